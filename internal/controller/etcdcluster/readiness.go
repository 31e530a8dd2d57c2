package etcdcluster

import (
	"slices"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/readiness"
)

// needsAPerson are the Degraded reasons that Tend cannot clear by itself:
// their messages say what a person must do.
var needsAPerson = []string{
	etcdv1alpha1.ReasonInvalidTLSSecrets,
	etcdv1alpha1.ReasonRestoreFailed,
	etcdv1alpha1.ReasonRecoveryFailed,
	etcdv1alpha1.ReasonRecoveryBlocked,
	etcdv1alpha1.ReasonStaleVolumes,
	etcdv1alpha1.ReasonInitFailed,
	etcdv1alpha1.ReasonMembersCannotStart,
	etcdv1alpha1.ReasonAlarm,
	etcdv1alpha1.ReasonUpgradeBlocked,
	etcdv1alpha1.ReasonUpdateStalled,
	etcdv1alpha1.ReasonUpdateCheckFailed,
	etcdv1alpha1.ReasonObjectNotOurs,
	etcdv1alpha1.ReasonNoSpaceTooLarge,
	etcdv1alpha1.ReasonDefragmentationStalled,
	etcdv1alpha1.ReasonVolumeMigrationBlocked,
}

// readinessOf is the verdict of the Ready, Reconciling and Stalled
// conditions, from the conditions that calculateStatus or deletingStatus
// set. Ready means Available, every member healthy, nothing in progress
// and nothing degraded but an even member count (a warning about the
// spec, not a gap between it and the cluster).
func readinessOf(c *etcdv1alpha1.EtcdCluster, conds []metav1.Condition) readiness.Summary {
	find := func(t string) *metav1.Condition { return apimeta.FindStatusCondition(conds, t) }
	is := func(c *metav1.Condition, s metav1.ConditionStatus) bool { return c != nil && c.Status == s }
	available, progressing := find(etcdv1alpha1.ConditionAvailable), find(etcdv1alpha1.ConditionProgressing)
	degraded, restored := find(etcdv1alpha1.ConditionDegraded), find(etcdv1alpha1.ConditionRestored)
	const first = "Waiting for the first pass"
	switch {
	case c.DeletionTimestamp != nil:
		deleting := find(etcdv1alpha1.ConditionDeleting)
		if deleting != nil && (deleting.Reason == etcdv1alpha1.ReasonFinalSnapshotFailed || deleting.Reason == etcdv1alpha1.ReasonObjectNotOurs) {
			return readiness.From(readiness.StateStalled, deleting, "")
		}
		return readiness.From(readiness.StateReconciling, deleting, "Deleting")
	case is(degraded, metav1.ConditionTrue) && slices.Contains(needsAPerson, degraded.Reason):
		return readiness.From(readiness.StateStalled, degraded, "")
	case is(degraded, metav1.ConditionTrue) && degraded.Reason == etcdv1alpha1.ReasonRecoveryPlanned &&
		c.Spec.QuorumLoss.Policy != etcdv1alpha1.QuorumLossAuto:
		// Manual: the plan waits for a person's approval.
		return readiness.From(readiness.StateStalled, degraded, "")
	case c.Spec.Paused:
		return readiness.From(readiness.StateNotReady, progressing, "spec.paused is true: Tend changes nothing until it is false")
	case !is(progressing, metav1.ConditionFalse):
		return readiness.From(readiness.StateReconciling, progressing, first)
	case !is(available, metav1.ConditionTrue):
		return readiness.From(readiness.StateReconciling, available, first)
	case degraded == nil || (degraded.Status != metav1.ConditionFalse && degraded.Reason != etcdv1alpha1.ReasonEvenMembers):
		return readiness.From(readiness.StateReconciling, degraded, first)
	case restored != nil && restored.Status != metav1.ConditionTrue:
		return readiness.From(readiness.StateReconciling, restored, "")
	}
	return readiness.From(readiness.StateReady, available, "")
}

// restoreReadiness is the verdict of an EtcdRestore's Ready, Reconciling
// and Stalled conditions: Ready once Complete, Stalled once Failed (its
// cluster's members stay stopped until another restore completes).
func restoreReadiness(conds []metav1.Condition) readiness.Summary {
	find := func(t string) *metav1.Condition { return apimeta.FindStatusCondition(conds, t) }
	switch {
	case apimeta.IsStatusConditionTrue(conds, etcdv1alpha1.RestoreComplete):
		return readiness.From(readiness.StateReady, find(etcdv1alpha1.RestoreComplete), "")
	case apimeta.IsStatusConditionTrue(conds, etcdv1alpha1.RestoreFailed):
		return readiness.From(readiness.StateStalled, find(etcdv1alpha1.RestoreFailed), "")
	}
	return readiness.From(readiness.StateReconciling, find(etcdv1alpha1.RestoreComplete), "Waiting for the first pass")
}
