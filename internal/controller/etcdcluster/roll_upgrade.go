package etcdcluster

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/names"
)

// upgradeState is how a change of the etcd version stands: whether it is a
// minor upgrade, whether etcd supports the path, and its backup.
type upgradeState struct {
	// from is the oldest version a member runs; to the spec's.
	from, to string
	// minor: a member runs an older minor version than the spec, and none
	// runs the spec's minor version yet: the upgrade has not started.
	minor   bool
	pathErr error
	// backup is the pre-upgrade EtcdBackup, nil until it exists.
	backup      *etcdv1alpha1.EtcdBackup
	backupState backupState
	backupMsg   string
}

// hold tells whether the members' template must keep the version they run:
// a minor upgrade may not start before its path is allowed and its backup
// is done, and a member that restarts meanwhile (a crash, a node drain)
// must come back on the version it had.
func (u upgradeState) hold() bool {
	return u.minor && (u.pathErr != nil || u.backup == nil || u.backupState != backupDone)
}

// observeUpgrade reads how a version change stands. The members' own
// versions decide, not the status: the oldest member is what etcd's
// upgrade rules are about.
func (r *Reconciler) observeUpgrade(ctx context.Context, c *etcdv1alpha1.EtcdCluster, views []memberView) (upgradeState, error) {
	u := upgradeState{from: lowestVersion(views), to: version(c)}
	if u.from == "" {
		return u, nil // no member has said its version yet
	}
	u.from = "v" + strings.TrimPrefix(u.from, "v")
	if !isMinorUpgrade(u.from, u.to) {
		return u, nil
	}
	to, _ := parseVersion(u.to)
	for _, v := range views {
		if mv, ok := parseVersion(v.Version); ok && mv.minor >= to.minor {
			return u, nil // the upgrade is under way: its backup was taken
		}
	}
	u.minor = true
	u.pathErr = checkUpgradePath(u.from, u.to, c.Spec.Auth.Enabled)
	b := &etcdv1alpha1.EtcdBackup{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: upgradeBackupName(c)}, b)
	switch {
	case apierrors.IsNotFound(err):
		return u, nil
	case err != nil:
		return u, fmt.Errorf("reading the pre-upgrade backup: %w", err)
	}
	u.backup = b
	u.backupState, u.backupMsg = finalBackupState(b)
	return u, nil
}

// templateCluster is the cluster as the members' template must be built
// for it: c, or while a minor upgrade is held, c with the version and
// image that the members run now.
func templateCluster(c *etcdv1alpha1.EtcdCluster, u upgradeState, runningImage string) *etcdv1alpha1.EtcdCluster {
	if !u.hold() {
		return c
	}
	held := c.DeepCopy()
	held.Spec.Version = u.from
	if runningImage != "" {
		held.Spec.Image = runningImage
	}
	return held
}

// version is the spec's etcd version.
func version(c *etcdv1alpha1.EtcdCluster) string {
	if c.Spec.Version == "" {
		return etcdv1alpha1.DefaultVersion
	}
	return c.Spec.Version
}

// upgradeBackupName is the EtcdBackup taken before the upgrade to the
// spec's version.
func upgradeBackupName(c *etcdv1alpha1.EtcdCluster) string {
	return names.Child(c.Name, "-upgrade-"+strings.ReplaceAll(strings.TrimPrefix(version(c), "v"), ".", "-"), names.EtcdBackup)
}

// upgradeBackup is the backup of c before a minor upgrade: to the
// cluster's backup destination, or to a volume claim of its own, verified.
// It belongs to the cluster; its file stays when it is deleted.
func upgradeBackup(c *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.EtcdBackup {
	b := finalBackup(c)
	b.ObjectMeta = metav1.ObjectMeta{Name: upgradeBackupName(c), Namespace: c.Namespace, Labels: b.Labels}
	if c.Spec.Backup == nil {
		b.Spec.Destination.Volume.ClaimName = upgradeBackupClaimName(c)
	}
	return b
}

// labelUpgradeBackupOf marks the volume claim of a cluster's pre-upgrade
// backups. Not the cluster label: it is none of the members' volumes.
const labelUpgradeBackupOf = "etcd.tend.dev/upgrade-backups-of"

func upgradeBackupClaimName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-upgrade-backups" }

// reconcileUpgradeBackup takes the backup that a minor upgrade waits for:
// the first member restarts only once it is Complete and, when verified,
// Verified. A failed backup blocks the upgrade until someone deletes it
// (Tend then takes another) or the spec goes back.
func (r *Reconciler) reconcileUpgradeBackup(ctx context.Context, s *scope, u *etcdv1alpha1.UpdateStatus, obs *rollObservation) error {
	c := s.cluster
	up := s.upgrade
	name := u.Backup
	switch {
	case up.backup == nil:
		if c.Spec.Backup == nil {
			pvc := finalSnapshotClaim(c)
			pvc.Name, pvc.Labels = upgradeBackupClaimName(c), map[string]string{labelUpgradeBackupOf: c.Name, "app.kubernetes.io/managed-by": "tend"}
			if err := r.createOwned(ctx, c, pvc); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		if err := r.createOwned(ctx, c, upgradeBackup(c)); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		r.event(c, corev1.EventTypeNormal, "UpgradeBackup", "CreateBackup", "Created EtcdBackup %s: the upgrade from %s to %s starts once it is complete and verified", name, up.from, up.to)
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
