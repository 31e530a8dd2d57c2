package etcdcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcd"
)

// runMembership makes the one membership change d.step: replace an
// unhealthy member, add a learner, promote it, move the leadership away
// from a member to be removed, or remove one; or it waits, as the plan
// (plan.go) or etcd says. Under MemberChangeInterval (the benchmarks'
// anchor design) it acts only at its fixed look.
func (r *Reconciler) runMembership(ctx context.Context, s *scope, w *world, d decision) error {
	c := s.cluster
	next := d.step
	if r.MemberChangeInterval > 0 {
		if wait := r.untilTick(client.ObjectKeyFromObject(c), s.now); wait > 0 {
			next = step{kind: stepWait, reason: etcdv1alpha1.ReasonWaitingForMembers,
				message: fmt.Sprintf("%s, at the next look in %s (one look per %s)", next.message, wait.Round(time.Second), r.MemberChangeInterval)}
			s.requeueAfter(wait)
		} else {
			s.requeueAfter(r.MemberChangeInterval)
		}
	}
	callCtx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	views, err := r.takeStep(callCtx, s, s.cli, next, w.members)
	w.members = views
	return err
}

// takeStep makes the change next, records it as an Event, and returns the
// members as they are after it. A change that etcd refuses for now (the
// cluster is not ready for it) turns into a wait.
func (r *Reconciler) takeStep(ctx context.Context, s *scope, cli Members, next step, views []memberView) ([]memberView, error) {
	c := s.cluster
	s.obs.step = next
	if next.kind == stepNone {
		return views, nil
	}
	s.requeueAfter(requeueStep)
	if next.kind == stepWait {
		return views, nil
	}
	m := next.member
	var err error
	switch next.kind {
	case stepPromote:
		if err = cli.Promote(ctx, m.ID); err == nil {
			r.event(c, corev1.EventTypeNormal, "MemberPromoted", "PromoteMember", "Promoted learner %s (%s) to a voting member", m.Name, m.ID)
			views = replaceView(views, m.ID, func(v *memberView) { v.IsLearner = false })
		}
	case stepMoveLeader:
		if err = cli.MoveLeader(ctx, next.to); err == nil {
			r.event(c, corev1.EventTypeNormal, "LeaderMoved", "MoveLeader", "Moved the leadership from %s to member %s before removing %s", m.Name, next.to, m.Name)
		}
	case stepRemove:
		if err = cli.Remove(ctx, m.ID); err == nil {
			r.event(c, corev1.EventTypeNormal, "MemberRemoved", "RemoveMember", "Removed member %s (%s): the spec asks for %d members", m.Name, m.ID, replicas(c))
			views = removeView(views, m.ID)
		}
	case stepAddLearner:
		views, err = r.addLearner(ctx, s, cli, next.ordinal, views)
	case stepReplace:
		views, err = r.replaceMember(ctx, s, cli, m, views, func() {
			why := "unhealthy since " + m.UnhealthySince.UTC().Format(time.RFC3339)
			if m.DataLost {
				why = "which lost its data"
			}
			r.event(c, corev1.EventTypeWarning, "ReplacingMember", "RemoveMember", "Removed member %s (%s), %s; adding it anew with empty data", m.Name, m.ID, why)
		})
	}
	if err == nil {
		return views, nil
	}
	if etcd.Refused(err) {
		s.obs.step = step{kind: stepWait, member: m, reason: etcdv1alpha1.ReasonWaitingForMembers, message: fmt.Sprintf("%s: etcd refused for now: %v", next.message, err)}
		return views, nil
	}
	return views, fmt.Errorf("%s: %w", next.message, err)
}

// replaceMember removes m from etcd, says so (removed), and adds it anew
// at its ordinal as a learner whose pod and volume claim are deleted, so
// that it starts empty and joins: a failed member's replacement, and a
// member's move onto a new claim (op_migrate_volumes.go).
func (r *Reconciler) replaceMember(ctx context.Context, s *scope, cli Members, m memberView, views []memberView, removed func()) ([]memberView, error) {
	if err := cli.Remove(ctx, m.ID); err != nil {
		return views, err
	}
	removed()
	return r.addLearner(ctx, s, cli, m.Ordinal, removeView(views, m.ID))
}

// addLearner adds the member at ordinal as a learner. When the ordinal's
// pod may exist already (the member is being replaced), its pod and volume
// are deleted, so that it starts again with empty data and joins as the
// new learner.
func (r *Reconciler) addLearner(ctx context.Context, s *scope, cli Members, ordinal int, views []memberView) ([]memberView, error) {
	c := s.cluster
	name := memberName(c, ordinal)
	m, err := cli.AddLearner(ctx, peerURL(c, name))
	if err != nil {
		return views, err
	}
	r.event(c, corev1.EventTypeNormal, "MemberAdded", "AddMember", "Added member %s (%s) as a learner", name, m.ID)
	views = append(views, memberView{MemberStatus: etcd.MemberStatus{Member: m}, Name: name, Ordinal: ordinal})
	if int32(ordinal) < ptr.Deref(s.sts.Spec.Replicas, 0) {
		// The pod comes back from the template at once, and etcd reads
		// its bootstrap settings once: they must name the new learner
		// first. The membership before may not have named this ordinal
		// (after a recovery from a survivor), and a pod told the old one
		// fails until its learner is given up.
		if err := r.syncStatefulSet(ctx, s, statefulSetSize(views), bootstrapOf(views)); err != nil {
			return views, err
		}
		if err := r.deleteMemberData(ctx, s, ordinal); err != nil {
			return views, err
		}
	}
	return views, nil
}

// untilTick is how long the cluster uid must wait for its next look at the
// membership under MemberChangeInterval: the anchor design looks (and makes
// at most one change, or waits) once per interval, on a fixed requeue, and
// does nothing on the passes in between. A look now, when it is due, sets
// the next one an interval later.
func (r *Reconciler) untilTick(key types.NamespacedName, now time.Time) time.Duration {
	if next, ok := r.nextLook.Load(key); ok {
		if wait := next.(time.Time).Sub(now); wait > 0 {
			return wait
		}
	}
	r.nextLook.Store(key, now.Add(r.MemberChangeInterval))
	return 0
}
