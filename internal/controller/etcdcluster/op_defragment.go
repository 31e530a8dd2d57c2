package etcdcluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// runDefragment takes one step of a defragmentation round.
func (r *Reconciler) runDefragment(ctx context.Context, s *scope, w *world, d decision) error {
	return r.defragStep(ctx, s, w, d.defrag)
}

// defragStep starts a round, moves the leadership before the leader's
// turn, defragments one member, or ends the round; the round's record is
// status.maintenance.defragmentation, so a pass cut short is resumed.
func (r *Reconciler) defragStep(ctx context.Context, s *scope, w *world, step defragStep) error {
	c, st := s.cluster, &w.maint.status
	switch step.kind {
	case defragWait:
		s.requeueAfter(requeueUnreachable)
	case defragStart:
		last := (*metav1.Time)(nil)
		if st.Defragmentation != nil {
			last = st.Defragmentation.LastScheduleTime
		}
		if !step.schedule.IsZero() {
			last = &metav1.Time{Time: step.schedule}
		}
		st.Defragmentation = &etcdv1alpha1.DefragmentationStatus{Cause: step.cause, Request: step.request, Phase: etcdv1alpha1.DefragmentationRunning,
			Members: step.members, StartedAt: metav1.Time{Time: s.now}, LastScheduleTime: last}
		r.event(c, corev1.EventTypeNormal, "DefragmentationStarted", "Defragment", "Defragmenting %s one at a time, the leader last (%s)",
			strings.Join(step.members, ", "), step.cause)
		s.requeueAfter(requeueStep)
	case defragMove:
		if step.to.ID == 0 {
			return fmt.Errorf("no voting member can take the leadership from %s before its defragmentation", step.member.Name)
		}
		callCtx, cancel := context.WithTimeout(ctx, etcdTimeout)
		defer cancel()
		if err := s.cli.MoveLeader(callCtx, step.to.ID); err != nil {
			return fmt.Errorf("moving the leadership to %s before %s's defragmentation: %w", step.to.Name, step.member.Name, err)
		}
		r.event(c, corev1.EventTypeNormal, "LeaderMoved", "Defragment", "Moved the leadership from %s to %s before %s's defragmentation", step.member.Name, step.to.Name, step.member.Name)
		s.requeueAfter(requeueStep)
	case defragMember:
		r.defragMember(ctx, s, w, step.member)
		s.requeueAfter(requeueStep)
	case defragFinish:
		round := st.Defragmentation
		round.Phase, round.CompletedAt = etcdv1alpha1.DefragmentationCompleted, &metav1.Time{Time: s.now}
		var before, after int64
		for _, res := range round.Results {
			before, after = before+res.Before.Value(), after+res.After.Value()
		}
		r.event(c, corev1.EventTypeNormal, "DefragmentationCompleted", "Defragment", "Defragmented %d members: %s before, %s after",
			len(round.Results), bytesOf(before), bytesOf(after))
		s.requeueAfter(requeueStep) // a NOSPACE recovery goes on with its disarm
	}
	return nil
}

// defragMember defragments member within the round's timeout and records
// the result. One that fails or outlasts the timeout stalls the round,
// after a look at how the member is; no other round starts until a person
// asks for one.
func (r *Reconciler) defragMember(ctx context.Context, s *scope, w *world, member memberView) {
	c, round := s.cluster, w.maint.status.Defragmentation
	callCtx, cancel := context.WithTimeout(ctx, w.maint.defrag.timeout)
	res, err := s.cli.Defragment(callCtx, member.Endpoint)
	cancel()
	if err != nil {
		round.Phase, round.CompletedAt = etcdv1alpha1.DefragmentationStalled, &metav1.Time{Time: s.now}
		round.Message = fmt.Sprintf("The defragmentation of %s failed or took longer than %s: %v. %s. No other round starts until one is asked for (kubectl tend defrag %s)",
			member.Name, w.maint.defrag.timeout, err, r.lookAt(ctx, s, member), c.Name)
		r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonDefragmentationStalled, "Defragment", "%s", round.Message)
		return
	}
	round.Results = append(round.Results, etcdv1alpha1.DefragmentationResult{Member: member.Name,
		Before: *resource.NewQuantity(res.Before, resource.BinarySI), After: *resource.NewQuantity(res.After, resource.BinarySI),
		Duration: metav1.Duration{Duration: res.Took.Round(time.Millisecond)}, Time: metav1.Time{Time: s.now}})
	r.event(c, corev1.EventTypeNormal, "Defragmented", "Defragment", "Defragmented %s: %s before, %s after, in %s",
		member.Name, bytesOf(res.Before), bytesOf(res.After), res.Took.Round(time.Millisecond))
}

// lookAt says how member is after a defragmentation that did not end
// well: etcd goes on with one that the client stopped waiting for.
func (r *Reconciler) lookAt(ctx context.Context, s *scope, member memberView) string {
	callCtx, cancel := context.WithTimeout(ctx, observeTimeout)
	defer cancel()
	statuses, err := s.cli.Status(callCtx)
	if err != nil {
		return fmt.Sprintf("Tend could not ask the members afterwards: %v", err)
	}
	for _, m := range statuses {
		switch {
		case m.ID != member.ID:
		case m.Healthy:
			return fmt.Sprintf("%s is healthy again, its database %s", member.Name, bytesOf(m.DBSize))
		case m.Err != nil:
			return fmt.Sprintf("%s is not healthy yet (%v); etcd finishes a defragmentation by itself", member.Name, m.Err)
		}
	}
	return member.Name + " is no longer a member"
}
