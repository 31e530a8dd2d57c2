package etcdcluster

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
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
