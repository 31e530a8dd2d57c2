package etcdcluster

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// runRoll takes the roll's next step, as planRoll (roll_plan.go) chose
// it: restart one member whose pod runs another revision, move the
// leadership off the last one first, or wait; a member that does not come
// back within spec.updateStrategy.memberTimeout stalls the roll.
func (r *Reconciler) runRoll(ctx context.Context, s *scope, w *world, d decision) error {
	c := s.cluster
	u, obs, ok := r.beginUpdate(s, w)
	if !ok {
		return nil
	}
	action := d.roll
	countMembers(u, w.roll.members)
	obs.reason, obs.message = etcdv1alpha1.ReasonUpdating, action.message
	s.requeueAfter(requeueStep)
	switch action.kind {
	case rollStalled:
		// It goes on only once someone acts: its slot goes to the next
		// cluster meanwhile, and it takes one again when it moves.
		r.rolls.release(client.ObjectKeyFromObject(c))
		obs.reason, obs.degraded = etcdv1alpha1.ReasonUpdateStalled, true
		obs.message = fmt.Sprintf("%s. The roll stopped: no other member is touched. Read the pod's events and logs (kubectl describe pod -n %s %s); "+
			"correct the spec (for example the image or version) and Tend restarts %s with it and goes on", action.message, c.Namespace, action.member.Name, action.member.Name)
		if c.Status.Update == nil || !stalledBefore(c) {
			r.event(c, corev1.EventTypeWarning, "UpdateStalled", "Update", "%s; the roll stopped", action.message)
		}
		s.requeueAfter(requeueUnreachable)
	case rollRestart:
		if err := r.ensureLiveTemplate(ctx, s, w.members, w.roll.current); err != nil {
			return err
		}
		if pod := w.data.pods[action.member.Name]; pod != nil {
			if err := r.deleteMemberPod(ctx, c, pod, s.now); err != nil {
				return fmt.Errorf("restarting member %s: %w", action.member.Name, err)
			}
		}
		u.Member, u.MemberSince = action.member.Name, &metav1.Time{Time: s.now}
		r.event(c, corev1.EventTypeNormal, "MemberRestarted", "RestartMember", "%s to run revision %s", action.message, u.Revision)
	case rollMoveLeader:
		moveCtx, cancel := context.WithTimeout(ctx, etcdTimeout)
		defer cancel()
		if err := s.cli.MoveLeader(moveCtx, action.to); err != nil {
			return fmt.Errorf("%s: %w", action.message, err)
		}
		r.event(c, corev1.EventTypeNormal, "LeaderMoved", "MoveLeader", "%s", action.message)
		return r.recordLeaderMove(ctx, s, u)
	}
	return nil
}

// recordLeaderMove counts the leadership move just made in the live
// status at once, rather than in the pass's status write at the end: that
// write fails with a conflict when the cache had not seen the last one,
// and the move has happened whatever it does. The pass then writes its
// status on top of the live object it read.
func (r *Reconciler) recordLeaderMove(ctx context.Context, s *scope, u *etcdv1alpha1.UpdateStatus) error {
	key := client.ObjectKeyFromObject(s.cluster)
	var live *etcdv1alpha1.EtcdCluster
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live = &etcdv1alpha1.EtcdCluster{}
		if err := r.APIReader.Get(ctx, key, live); err != nil {
			return err
		}
		base := live.DeepCopy()
		moves := int32(1)
		if lu := live.Status.Update; lu != nil && lu.Revision == u.Revision {
			moves = lu.LeaderMoves + 1
		} else {
			live.Status.Update = u.DeepCopy()
		}
		live.Status.Update.LeaderMoves = moves
		return r.Status().Patch(ctx, live, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return fmt.Errorf("recording the leader move in the status: %w", err)
	}
	r.written.Wrote(live)
	u.LeaderMoves = live.Status.Update.LeaderMoves
	s.cluster.ResourceVersion, s.before.ResourceVersion = live.ResourceVersion, live.ResourceVersion
	s.cluster.Status, s.before.Status = *live.Status.DeepCopy(), *live.Status.DeepCopy()
	return nil
}

// ensureLiveTemplate makes sure the StatefulSet in the apiserver, not
// only the cache, has the template of the current revision before a pod
// is deleted: the pass skipped its template write when its cached
// StatefulSet already looked current, and a cache that lagged a change
// (this one, or one made and undone since) would have the pod come back
// on the template before, for a restart more.
func (r *Reconciler) ensureLiveTemplate(ctx context.Context, s *scope, views []memberView, want string) error {
	live := &appsv1.StatefulSet{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.sts), live); err != nil {
		return fmt.Errorf("reading StatefulSet %s: %w", s.sts.Name, err)
	}
	if live.Spec.Template.Annotations[etcdv1alpha1.AnnotationMemberRevision] == want {
		return nil
	}
	s.sts = live
	delete(s.sts.Annotations, annotationTemplateHash) // write it, whatever the hash says
	return r.syncStatefulSet(ctx, s, statefulSetSize(views), bootstrapOf(views))
}

// stalledBefore tells whether the last status already said the roll
// stalled, so that the Warning Event is recorded once per stall.
func stalledBefore(c *etcdv1alpha1.EtcdCluster) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == etcdv1alpha1.ConditionDegraded && cond.Reason == etcdv1alpha1.ReasonUpdateStalled && cond.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}
