package etcdcluster

import (
	"context"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tend-dev/tend/internal/names"
)

// runQuorumLoss starts the recovery of a formed cluster that lost its
// quorum, as the guard (planRecovery, recovery_plan.go) planned it: from a
// survivor's data, which runRecovery carries on, or from the newest
// verified backup, through an EtcdRestore.
func (r *Reconciler) runQuorumLoss(ctx context.Context, s *scope, w *world, d decision) error {
	c, plan := s.cluster, d.quorum
	s.requeueAfter(requeueStep)
	now := metav1.Time{Time: s.now.Truncate(time.Second)}
	if plan.decision == recoverFromMember {
		rec := &etcdv1alpha1.RecoveryStatus{
			Kind: etcdv1alpha1.RecoveryFromSurvivor, Survivor: plan.survivor, Cause: "quorum loss, " + plan.cause,
			Phase: etcdv1alpha1.RecoveryStopping, StartedAt: now, Revision: plan.revision,
			Job:     recoverJobName(c, now.Time),
			Message: plan.message,
		}
		s.obs.recovery = &recoveryObservation{status: rec, holding: true}
		r.event(c, corev1.EventTypeWarning, "QuorumLossRecovery", "Recover", "Recovering from the quorum loss (%s): keeping %s's data at revision %d; the other members come back empty", plan.cause, plan.survivor, plan.revision)
		return nil
	}
	// An EtcdRestore does it; its name is fixed by the loss, so a pass
	// that does not see it in its cache yet makes no second one.
	rs := &etcdv1alpha1.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: quorumLossRestoreName(c, quorumInput(w).lostSince), Labels: labels(c)},
		// The guard decided that the lost quorum's data gives way: the
		// survivors may still answer with it.
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterRef: etcdv1alpha1.ClusterReference{Name: c.Name},
			BackupRef: &corev1.LocalObjectReference{Name: plan.backup}, ConfirmOverwrite: true},
	}
	if err := r.createOwned(ctx, c, rs); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	r.event(c, corev1.EventTypeWarning, "QuorumLossRecovery", "Recover", "Recovering from the quorum loss (%s): EtcdRestore %s restores EtcdBackup %s into every member", plan.cause, rs.Name, plan.backup)
	return nil
}

// quorumLossRestoreName is the EtcdRestore that recovers c from a backup
// after the quorum loss that began at lostSince: fixed by the loss, so a
// pass that does not see it in its cache yet makes no second one.
func quorumLossRestoreName(c *etcdv1alpha1.EtcdCluster, lostSince time.Time) string {
	return names.Child(c.Name, "-quorum-loss-"+strconv.FormatInt(lostSince.Unix(), 36), names.EtcdRestore)
}

// recoverJobName is the Job of a recovery from a survivor started at t.
func recoverJobName(c *etcdv1alpha1.EtcdCluster, t time.Time) string {
	return names.Child(c.Name, "-recover-"+strconv.FormatInt(t.Unix(), 36), names.Job)
}
