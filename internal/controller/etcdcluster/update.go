package etcdcluster

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// beginUpdate opens the roll's record, status.update, or follows a spec
// that changed during the roll, and holds an operator roll's slot. It
// tells whether the roll may go on: one that a new Tend causes waits for
// a slot (--etcdcluster-max-operator-rolls). The roll's state lives in
// status.update and on the pods (their revision annotation), so a pass
// cut short anywhere is picked up by the next.
func (r *Reconciler) beginUpdate(s *scope, w *world) (*etcdv1alpha1.UpdateStatus, *rollObservation, bool) {
	c := s.cluster
	rev := w.roll.rev
	u := c.Status.Update.DeepCopy()
	obs := &rollObservation{update: u}
	s.obs.roll = obs
	if u == nil {
		cause := etcdv1alpha1.UpdateCauseSpec
		if w.roll.unmarked || (c.Status.UpdatedGeneration != 0 && c.Status.UpdatedGeneration == c.Generation) {
			cause = etcdv1alpha1.UpdateCauseOperator
		}
		if cause == etcdv1alpha1.UpdateCauseOperator && !r.rolls.acquire(client.ObjectKeyFromObject(c), r.MaxOperatorRolls) {
			obs.reason = etcdv1alpha1.ReasonUpdateQueued
			obs.message = fmt.Sprintf("This version of Tend runs the members differently; %d cluster(s) are rolled at a time (--etcdcluster-max-operator-rolls) and this one waits for its turn", r.MaxOperatorRolls)
			s.requeueAfter(requeueSteady)
			return nil, obs, false
		}
		u = &etcdv1alpha1.UpdateStatus{From: w.upgrade.from, To: version(c), Revision: rev, Cause: cause, StartedAt: metav1.Time{Time: s.now}}
		if u.From == "" {
			u.From = u.To
		}
		obs.update = u
		r.event(c, corev1.EventTypeNormal, "UpdateStarted", "Update", "Rolling the members to revision %s (%s to %s, cause %s), one at a time", rev, u.From, u.To, cause)
	} else if u.Revision != rev {
		r.event(c, corev1.EventTypeNormal, "UpdateRetargeted", "Update", "The spec changed during the roll: rolling to revision %s (%s) instead of %s", rev, version(c), u.Revision)
		u.Revision, u.To, u.CheckJob = rev, version(c), ""
	}
	if keepsRollSlot(c, u) {
		r.rolls.keep(client.ObjectKeyFromObject(c))
	}
	if w.upgrade.minor {
		u.Backup = upgradeBackupName(c)
	}
	return u, obs, true
}

// countMembers records in u which members run the roll's revision, healthy,
// and which wait for it.
func countMembers(u *etcdv1alpha1.UpdateStatus, members []rollMember) {
	u.UpdatedMembers, u.PendingMembers = nil, nil
	for _, m := range members {
		if m.Updated && m.Healthy {
			u.UpdatedMembers = append(u.UpdatedMembers, m.Name)
		} else if !m.Updated && !m.PodGone {
			u.PendingMembers = append(u.PendingMembers, m.Name)
		}
	}
}

// keepsRollSlot tells whether the roll u of c holds one of the slots of
// operator-caused rolls: one under way does, also after a restart of the
// manager; one that stalled (a member that did not come back, a check Job
// that failed) waits for a person without one, so that it does not hold
// every other cluster's roll for ever.
func keepsRollSlot(c *etcdv1alpha1.EtcdCluster, u *etcdv1alpha1.UpdateStatus) bool {
	return u.Cause == etcdv1alpha1.UpdateCauseOperator && !stalledBefore(c) && !checkFailedBefore(c)
}
