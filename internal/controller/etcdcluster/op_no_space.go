package etcdcluster

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcd"
)

// runNoSpace takes one step of the recovery from a NOSPACE alarm:
// compact, defragment every member (a round of op_defragment.go), and
// disarm once every member has room; or end a recovery whose alarm is gone.
func (r *Reconciler) runNoSpace(ctx context.Context, s *scope, w *world, d decision) error {
	c, st, step := s.cluster, &w.maint.status, d.noSpace
	switch step.kind {
	case noSpaceCompact:
		if st.NoSpace == nil || st.NoSpace.Stage == etcdv1alpha1.NoSpaceWaiting {
			st.NoSpace = &etcdv1alpha1.NoSpaceStatus{Since: metav1.Time{Time: s.now}}
			r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonNoSpace, "RecoverSpace",
				"etcd raised NOSPACE at %s of its %s quota and takes no writes; Tend compacts, defragments every member and disarms", bytesOf(largestDB(w.members)), bytesOf(quotaOf(c)))
		}
		ns := st.NoSpace
		if step.rev > 0 {
			if err := r.compact(ctx, s, w, step.rev, "NOSPACE recovery"); err != nil {
				return err
			}
			ns.CompactedTo = step.rev
		}
		ns.Stage = step.stage
		ns.Message = noSpaceMessage(ns)
		s.requeueAfter(requeueStep)
		return nil
	case noSpaceDefrag:
		return r.defragStep(ctx, s, w, d.defrag)
	case noSpaceDisarm:
		callCtx, cancel := context.WithTimeout(ctx, etcdTimeout)
		defer cancel()
		if _, err := s.cli.DisarmNoSpace(callCtx); err != nil {
			return fmt.Errorf("disarming NOSPACE: %w", err)
		}
		r.event(c, corev1.EventTypeNormal, "NoSpaceCleared", "RecoverSpace", "Disarmed NOSPACE: the largest database is %s of the %s quota; the cluster takes writes again",
			bytesOf(largestDB(w.members)), bytesOf(quotaOf(c)))
		st.NoSpace = nil
		for i := range w.members { // as the members report it from now on
			w.members[i].Errors = slices.DeleteFunc(slices.Clone(w.members[i].Errors), etcd.IsNoSpaceAlarm)
		}
		s.requeueAfter(requeueStep)
	case noSpaceDone:
		r.event(c, corev1.EventTypeNormal, "NoSpaceCleared", "RecoverSpace", "The NOSPACE alarm is gone")
		st.NoSpace = nil
	}
	return nil
}

// noteNoSpace records a NOSPACE recovery that waits for a person, which
// is reported whatever the pass chose: Manual, or data too large for the
// quota.
func noteNoSpace(w *world, step noSpaceStep, now metav1.Time) {
	if step.kind != noSpaceWait && step.kind != noSpaceTooLarge {
		return
	}
	st := &w.maint.status
	if st.NoSpace == nil {
		st.NoSpace = &etcdv1alpha1.NoSpaceStatus{Since: now}
	}
	ns, c := st.NoSpace, w.cluster
	ns.Stage = step.stage
	switch step.kind {
	case noSpaceWait:
		ns.Message = fmt.Sprintf("etcd raised NOSPACE: the cluster takes no writes. spec.maintenance.noSpace is Manual: compact, defragment every member "+
			"(kubectl tend defrag %s) and disarm (etcdctl alarm disarm), or set spec.maintenance.noSpace to Auto", c.Name)
	default:
		ns.Message = fmt.Sprintf("The data alone fills the quota: after compacting to revision %d and defragmenting, the largest database is %s, "+
			"over %d%% of the %s quota, and NOSPACE would come back at once. Raise spec.options.quotaBackendBytes (the members restart one at a time), "+
			"and spec.storage.size when the volumes are smaller than the quota over three quarters; Tend disarms once there is room",
			ns.CompactedTo, bytesOf(largestDB(w.members)), noSpaceHeadroom, bytesOf(quotaOf(c)))
	}
}

// noSpaceMessage says what a recovery that acts does now.
func noSpaceMessage(ns *etcdv1alpha1.NoSpaceStatus) string {
	if ns.Stage == etcdv1alpha1.NoSpaceCurrent {
		return fmt.Sprintf("Compacting did not free enough; compacted to the current revision %d, defragmenting every member, then disarming", ns.CompactedTo)
	}
	if ns.CompactedTo > 0 {
		return fmt.Sprintf("Compacted to revision %d (the retention), defragmenting every member, then disarming", ns.CompactedTo)
	}
	return "Nothing is older than the retention; defragmenting every member, then disarming"
}

// largestDB is the largest member database.
func largestDB(members []memberView) int64 {
	var n int64
	for _, m := range members {
		n = max(n, m.DBSize)
	}
	return n
}
