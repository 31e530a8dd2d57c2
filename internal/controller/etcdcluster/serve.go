package etcdcluster

import (
	"context"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// serve carries out op, one of the operations of members that serve (nil
// when the members need none), and keeps the rest in line around it:
//
//   - before: pods of an older Tend take the current revision; the
//     StatefulSet holds every member and tells a member that starts afresh
//     the current membership; authentication is on before the init Job;
//   - after: the StatefulSet follows the membership the operation left,
//     volumes follow the members (volumes.go), and the init Job checks a
//     cluster that formed.
func (r *Reconciler) serve(ctx context.Context, s *scope, w *world, d decision, op operation) error {
	c := s.cluster
	if d.quorum != nil && d.quorum.decision == recoverWait {
		in := quorumInput(w)
		s.requeueAfter(max(time.Second, min(requeueUnreachable, in.lostSince.Add(in.after).Sub(s.now))))
	}
	if err := r.adoptUnmarkedPods(ctx, w.roll.template, w.data.pods); err != nil {
		return err
	}
	// The cluster exists: members that start afresh join it. This comes
	// before the operation, which may delete a pod for the StatefulSet to
	// recreate; the operation's own changes are synced after it.
	if err := r.syncStatefulSet(ctx, s, statefulSetSize(w.members), bootstrapOf(w.members)); err != nil {
		return err
	}
	if (c.Spec.Auth.Enabled || restoring(c)) && w.healthyQuorum {
		callCtx, cancel := context.WithTimeout(ctx, etcdTimeout)
		err := r.enableAuth(callCtx, s, s.cli)
		cancel()
		if err != nil {
			return err
		}
	}
	s.obs.step = d.step
	if !rolling(w) && (d.op == opNone || d.op == opCompact || d.op == opDefragment) {
		s.obs.roll = &rollObservation{finished: true}
	}
	if op != nil {
		if err := op(r, ctx, s, w, d); err != nil {
			return err
		}
	}
	s.obs.members = w.members
	if err := r.syncStatefulSet(ctx, s, statefulSetSize(w.members), bootstrapOf(w.members)); err != nil {
		return err
	}
	if err := r.reconcileVolumes(ctx, s, w.members, w.data.pvcs); err != nil {
		return err
	}
	s.requeueAfter(healthRequeue(c, w.members, s.now))
	return r.reconcileInitJob(ctx, s)
}

// tidyAfterRecovery makes good what a finished recovery leaves: the
// backups a restore held, and an approval of a recovery (the annotation
// AnnotationRecoverFrom), which is for the quorum loss at hand: a healthy
// cluster must not keep one for the next.
func (r *Reconciler) tidyAfterRecovery(ctx context.Context, s *scope, w *world) error {
	c := s.cluster
	if w.sts == nil {
		return nil
	}
	if rec := w.recovery; rec != nil && rec.Kind == etcdv1alpha1.RecoveryFromBackup {
		// Done: a pass that ended the restore but lost its release is
		// made good.
		if err := r.releaseBackups(ctx, c); err != nil {
			return err
		}
	}
	if _, ok := c.Annotations[etcdv1alpha1.AnnotationRecoverFrom]; ok && apimeta.IsStatusConditionTrue(c.Status.Conditions, etcdv1alpha1.ConditionAvailable) {
		patch := client.MergeFrom(c.DeepCopy())
		delete(c.Annotations, etcdv1alpha1.AnnotationRecoverFrom)
		if err := r.Patch(ctx, c, patch); err != nil {
			return fmt.Errorf("removing the used annotation %s: %w", etcdv1alpha1.AnnotationRecoverFrom, err)
		}
		r.written.Wrote(c)
	}
	return nil
}
