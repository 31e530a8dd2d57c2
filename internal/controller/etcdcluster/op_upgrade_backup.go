package etcdcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// runUpgradeBackup holds a minor upgrade at the version the members run
// until its pre-upgrade EtcdBackup is done (and verified): the first
// member restarts only after. An upgrade path that etcd does not support
// is refused before anything starts.
func (r *Reconciler) runUpgradeBackup(ctx context.Context, s *scope, w *world, _ decision) error {
	c := s.cluster
	if err := w.upgrade.pathErr; err != nil {
		s.obs.roll = &rollObservation{update: c.Status.Update.DeepCopy(), reason: etcdv1alpha1.ReasonUpgradeBlocked, degraded: true,
			message: fmt.Sprintf("spec.version %s is refused and no member was touched: %v", w.upgrade.to, err)}
		return nil
	}
	u, obs, ok := r.beginUpdate(s, w)
	if !ok {
		return nil
	}
	return r.reconcileUpgradeBackup(ctx, s, w.upgrade, u, obs)
}

// reconcileUpgradeBackup takes the backup that a minor upgrade waits for:
// the first member restarts only once it is Complete and, when verified,
// Verified. A failed backup blocks the upgrade until someone deletes it
// (Tend then takes another) or the spec goes back.
func (r *Reconciler) reconcileUpgradeBackup(ctx context.Context, s *scope, up upgradeState, u *etcdv1alpha1.UpdateStatus, obs *rollObservation) error {
	c := s.cluster
	name := u.Backup
	switch {
	case up.backup == nil:
		if err := r.createBackupClaim(ctx, c); err != nil {
			return err
		}
		// A cache behind the create finds no backup yet: the backup is
		// there, and its Event was recorded when it was made.
		switch err := r.createOwned(ctx, c, upgradeBackup(c)); {
		case err == nil:
			r.event(c, corev1.EventTypeNormal, "UpgradeBackup", "CreateBackup", "Created EtcdBackup %s: the upgrade from %s to %s starts once it is complete and verified", name, up.from, up.to)
		case !apierrors.IsAlreadyExists(err):
			return err
		}
		obs.reason, obs.message = etcdv1alpha1.ReasonBackingUpBeforeUpgrade, fmt.Sprintf("Taking EtcdBackup %s before upgrading from %s to %s", name, up.from, up.to)
	case up.backupState == backupFailed:
		obs.reason, obs.degraded = etcdv1alpha1.ReasonUpgradeBlocked, true
		obs.message = fmt.Sprintf("The upgrade from %s to %s did not start: its backup %s failed (%s). Fix the cause and delete the EtcdBackup (kubectl delete etcdbackup -n %s %s) to take it again",
			up.from, up.to, name, up.backupMsg, c.Namespace, name)
		if !blockedBefore(c) {
			r.event(c, corev1.EventTypeWarning, "UpgradeBlocked", "Update", "The upgrade from %s to %s waits: backup %s failed", up.from, up.to, name)
		}
	default:
		obs.reason, obs.message = etcdv1alpha1.ReasonBackingUpBeforeUpgrade, fmt.Sprintf("Waiting for EtcdBackup %s to complete and be verified before upgrading from %s to %s", name, up.from, up.to)
	}
	s.requeueAfter(requeueUnreachable)
	return nil
}

func blockedBefore(c *etcdv1alpha1.EtcdCluster) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == etcdv1alpha1.ConditionDegraded && cond.Reason == etcdv1alpha1.ReasonUpgradeBlocked && cond.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}

// createBackupClaim makes the volume claim that the backups taken before
// an upgrade or a volume migration go to, when the cluster has no backup
// destination of its own.
func (r *Reconciler) createBackupClaim(ctx context.Context, c *etcdv1alpha1.EtcdCluster) error {
	if c.Spec.Backup != nil {
		return nil
	}
	pvc := finalSnapshotClaim(c)
	pvc.Name, pvc.Labels = upgradeBackupClaimName(c), map[string]string{labelUpgradeBackupOf: c.Name, "app.kubernetes.io/managed-by": "tend"}
	if err := r.createOwned(ctx, c, pvc); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
