package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tend-dev/tend/internal/readiness"
)

// runStartRestore begins the pending EtcdRestore, which next found may
// start: it holds the backup it reads, records the recovery in
// status.recovery, and stops the members.
func (r *Reconciler) runStartRestore(ctx context.Context, s *scope, w *world, _ decision) error {
	c, rs, src := s.cluster, w.pending.rs, w.pending.src
	if src.from.Backup != "" {
		// Before the members stop: the backup and its file stay until the
		// restore is done, whether the EtcdRestore named it or Tend chose
		// it among the archive's bases.
		if err := r.holdBackup(ctx, c, src.from.Backup); err != nil {
			return err
		}
	}
	rec := &etcdv1alpha1.RecoveryStatus{
		Kind: etcdv1alpha1.RecoveryFromBackup, Restore: rs.Name, Cause: "EtcdRestore " + rs.Name,
		Phase: etcdv1alpha1.RecoveryStopping, StartedAt: metav1.Time{Time: s.now.Truncate(time.Second)},
		Revision: src.from.Revision,
	}
	from := src.from
	if err := r.setRestore(ctx, rs, func(st *etcdv1alpha1.EtcdRestoreStatus) {
		st.Phase, st.StartTime, st.MembersStopped, st.RestoredFrom = etcdv1alpha1.RecoveryStopping, &rec.StartedAt, true, &from
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: etcdv1alpha1.RestoreComplete, Status: metav1.ConditionFalse,
			Reason: etcdv1alpha1.ReasonRestoring, Message: "Stopping the members", ObservedGeneration: rs.Generation})
	}); err != nil {
		return err
	}
	r.event(c, corev1.EventTypeWarning, "RestoreStarted", "Restore", "EtcdRestore %s replaces every member's data with %s: stopping the members", rs.Name, src.from.URI)
	r.Recorder.Eventf(rs, c, corev1.EventTypeNormal, "RestoreStarted", "Restore", "Stopping the members of EtcdCluster %s", c.Name)
	s.obs.recovery = &recoveryObservation{status: rec, holding: true}
	return r.advanceRecovery(ctx, s, rec, []etcdv1alpha1.EtcdRestore{*rs}, w.data)
}

// answerPendingRestore tells the pending EtcdRestore that did not start
// why: it waits (for its backup, for the cluster to be resumed), or it is
// refused and fails.
func (r *Reconciler) answerPendingRestore(ctx context.Context, s *scope, w *world, v *restoreVerdict) error {
	if v == nil {
		return nil
	}
	rs := w.pending.rs
	if v.reason == "" {
		if v.retry {
			s.requeueAfter(requeueSteady)
		}
		return r.setRestore(ctx, rs, func(st *etcdv1alpha1.EtcdRestoreStatus) { pendingRestoreStatus(st, rs, v.message) })
	}
	r.Recorder.Eventf(rs, s.cluster, corev1.EventTypeWarning, "RestoreRefused", "Restore", v.message)
	return r.setRestore(ctx, rs, func(st *etcdv1alpha1.EtcdRestoreStatus) {
		failRestoreStatus(st, rs, v.reason, v.message, s.now)
	})
}

// annotationRestoreUID on a restore's Jobs is the UID of the EtcdRestore
// they work for: a Job of the same name left by an earlier EtcdRestore of
// the same name (deleted and created again) is not this one's.
const annotationRestoreUID = "etcd.tend.dev/restore-uid"

// forRestore marks job as rs's.
func forRestore(job *batchv1.Job, rs *etcdv1alpha1.EtcdRestore) *batchv1.Job {
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[annotationRestoreUID] = string(rs.UID)
	return job
}

// restoreJobOf reads rs's Job name: an empty Job when there is none yet,
// to be made. A Job of that name that Tend made for this cluster for an
// earlier EtcdRestore of the same name is deleted first (its result is
// not this restore's); nil while it is still going. A Job of that name
// that Tend did not make for this cluster is left alone: the restore waits,
// with an error that says so, until someone deletes or renames it.
func (r *Reconciler) restoreJobOf(ctx context.Context, c *etcdv1alpha1.EtcdCluster, rs *etcdv1alpha1.EtcdRestore, name string) (*batchv1.Job, error) {
	job, err := r.ownedJob(ctx, c, name)
	switch {
	case err != nil:
		return nil, err
	case job == nil:
		return &batchv1.Job{}, nil
	case job.Annotations[annotationRestoreUID] == string(rs.UID):
		return job, nil
	case job.DeletionTimestamp != nil:
		return nil, nil // going; a later pass makes ours
	}
	// Deleted in the background, the Job goes at once (its pods later),
	// and ours can be made; if not, the create meets it and a later pass
	// comes back.
	if err := r.deleteOwned(ctx, c, "Job", job); err != nil {
		return nil, fmt.Errorf("deleting the Job of an earlier restore: %w", err)
	}
	r.event(c, corev1.EventTypeNormal, "JobReplaced", "Restore", "Deleted Job %s, left by an earlier EtcdRestore named %s, to run it for this one", name, rs.Name)
	return &batchv1.Job{}, nil
}

// restoreRunJob is the Job that restores the i-th member for rs.
func restoreRunJob(rs *etcdv1alpha1.EtcdRestore, i int) string {
	return fmt.Sprintf("%s-%d", rs.Name, i)
}

// restoreCheckJob is the Job that checks the cluster after rs.
func restoreCheckJob(rs *etcdv1alpha1.EtcdRestore) string { return rs.Name + "-check" }

// setRestore writes rs's status as change makes it, when it changes.
func (r *Reconciler) setRestore(ctx context.Context, rs *etcdv1alpha1.EtcdRestore, change func(*etcdv1alpha1.EtcdRestoreStatus)) error {
	before := rs.DeepCopy()
	change(&rs.Status)
	rs.Status.ObservedGeneration = rs.Generation
	readiness.Set(&rs.Status.Conditions, rs.Generation, rs.Status.ObservedGeneration, restoreReadiness(rs.Status.Conditions))
	if equality.Semantic.DeepEqual(before.Status, rs.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, rs, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("writing the status of EtcdRestore %s: %w", rs.Name, err)
	}
	return nil
}

// pendingRestoreStatus says that rs waits, and why.
func pendingRestoreStatus(st *etcdv1alpha1.EtcdRestoreStatus, rs *etcdv1alpha1.EtcdRestore, msg string) {
	st.Phase = etcdv1alpha1.RecoveryPending
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: etcdv1alpha1.RestoreComplete, Status: metav1.ConditionFalse,
		Reason: etcdv1alpha1.ReasonRestorePending, Message: msg, ObservedGeneration: rs.Generation})
}

// failRestoreStatus ends rs as failed.
func failRestoreStatus(st *etcdv1alpha1.EtcdRestoreStatus, rs *etcdv1alpha1.EtcdRestore, reason, msg string, now time.Time) {
	st.Phase = etcdv1alpha1.RecoveryFailed
	if st.CompletionTime == nil {
		st.CompletionTime = &metav1.Time{Time: now.Truncate(time.Second)}
	}
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: etcdv1alpha1.RestoreFailed, Status: metav1.ConditionTrue,
		Reason: reason, Message: msg, ObservedGeneration: rs.Generation})
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: etcdv1alpha1.RestoreComplete, Status: metav1.ConditionFalse,
		Reason: reason, Message: msg, ObservedGeneration: rs.Generation})
}

// restoresWaitingForCluster marks the restores of a cluster that does not
// exist as pending.
func (r *Reconciler) restoresWaitingForCluster(ctx context.Context, key client.ObjectKey) error {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	restores, err := r.restoresOf(ctx, c)
	if err != nil {
		return err
	}
	for i := range restores {
		rs := &restores[i]
		if restoreFinished(rs) || rs.DeletionTimestamp != nil {
			continue
		}
		if rs.Status.MembersStopped {
			// Its cluster is gone during the restore: so is what it restored.
			err = errors.Join(err, r.setRestore(ctx, rs, func(st *etcdv1alpha1.EtcdRestoreStatus) {
				failRestoreStatus(st, rs, etcdv1alpha1.ReasonRestoreFailed, fmt.Sprintf("EtcdCluster %s was deleted during the restore", key.Name), time.Now())
			}))
			continue
		}
		err = errors.Join(err, r.setRestore(ctx, rs, func(st *etcdv1alpha1.EtcdRestoreStatus) {
			pendingRestoreStatus(st, rs, fmt.Sprintf("EtcdCluster %s does not exist (yet)", key.Name))
		}))
	}
	return err
}
