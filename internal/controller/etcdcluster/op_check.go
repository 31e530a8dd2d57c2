package etcdcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/names"
)

// runCheck ends a roll once every member runs its revision: a check Job
// proves the cluster's health, version and equal hashes.
func (r *Reconciler) runCheck(ctx context.Context, s *scope, w *world, _ decision) error {
	u, obs, ok := r.beginUpdate(s, w)
	if !ok {
		return nil
	}
	countMembers(u, w.roll.members)
	// The Job's changes start passes (the controller owns it): while it
	// runs, only the steady health check comes back on its own.
	s.requeueAfter(requeueSteady)
	return r.reconcileCheckJob(ctx, s, u, obs)
}

// checkFailedBefore tells whether the last status said the roll's check
// Job failed.
func checkFailedBefore(c *etcdv1alpha1.EtcdCluster) bool {
	d := apimeta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionDegraded)
	return d != nil && d.Status == metav1.ConditionTrue && d.Reason == etcdv1alpha1.ReasonUpdateCheckFailed
}

// reconcileCheckJob runs the check Job once every member runs the
// revision, and ends the roll when it succeeds.
func (r *Reconciler) reconcileCheckJob(ctx context.Context, s *scope, u *etcdv1alpha1.UpdateStatus, obs *rollObservation) error {
	c := s.cluster
	name := checkJobName(c, u.Revision)
	u.CheckJob, u.Member, u.MemberSince = name, "", nil
	u.PendingMembers = nil
	job, err := r.ownedJob(ctx, c, name)
	switch {
	case err == nil && job == nil:
		if err := r.createOwned(ctx, c, checkJob(c, name, r.AgentImage)); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		r.event(c, corev1.EventTypeNormal, "CheckingUpdate", "CreateJob", "Every member runs revision %s; Job %s checks health, version %s and equal hashes", u.Revision, name, u.To)
		obs.reason, obs.message = etcdv1alpha1.ReasonCheckingUpdate, fmt.Sprintf("Every member runs the new revision; Job %s checks the cluster", name)
		return nil
	case err != nil:
		return fmt.Errorf("the check Job: %w", err)
	}
	switch state, msg := jobStateOf(job); state {
	case jobComplete:
		r.event(c, corev1.EventTypeNormal, "UpdateComplete", "Update", "Every member runs %s (revision %s), checked by Job %s; %d leader move(s)", u.To, u.Revision, name, u.LeaderMoves)
		r.rolls.release(client.ObjectKeyFromObject(c))
		obs.update, obs.finished = nil, true
		obs.reason, obs.message = "", ""
	case jobFailed:
		r.rolls.release(client.ObjectKeyFromObject(c)) // as a stalled roll
		obs.reason, obs.degraded = etcdv1alpha1.ReasonUpdateCheckFailed, true
		obs.message = fmt.Sprintf("Every member runs the new revision, but the check Job %s failed (%s). Read its logs (kubectl logs -n %s job/%s); delete the Job to check again", name, msg, c.Namespace, name)
	default:
		obs.reason, obs.message = etcdv1alpha1.ReasonCheckingUpdate, fmt.Sprintf("Every member runs the new revision; Job %s checks the cluster", name)
	}
	return nil
}

// checkJobName is the check Job of the roll to rev.
func checkJobName(c *etcdv1alpha1.EtcdCluster, rev string) string {
	return names.Child(c.Name, "-check-"+rev[:min(8, len(rev))], names.Job)
}
