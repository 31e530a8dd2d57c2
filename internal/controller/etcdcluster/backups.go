package etcdcluster

import (
	"fmt"
	"hash/fnv"
	"strings"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tend-dev/tend/internal/names"
)

// FinalBackupName is the EtcdBackup that holds a deleted cluster's final
// snapshot. The UID's head tells apart the final snapshots of clusters
// that had the same name one after the other.
func FinalBackupName(c *etcdv1alpha1.EtcdCluster) string {
	return names.Child(c.Name, "-final-"+string(c.UID)[:min(8, len(c.UID))], names.EtcdBackup)
}

// finalSnapshotClaimName is the volume claim that receives the final
// snapshot of a cluster without spec.backup.
func finalSnapshotClaimName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-final-snapshot" }

// finalBackup builds the EtcdBackup of the final snapshot. It is not owned
// by the cluster, so that it outlives it, and it keeps its file when it is
// deleted itself.
func finalBackup(c *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.EtcdBackup {
	b := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{
			Name: FinalBackupName(c), Namespace: c.Namespace,
			Labels: map[string]string{etcdv1alpha1.LabelBackupCluster: c.Name, labelClusterUID: string(c.UID), "app.kubernetes.io/managed-by": "tend"},
		},
		Spec: etcdv1alpha1.EtcdBackupSpec{
			ClusterRef: etcdv1alpha1.ClusterReference{Name: c.Name},
			BackupOptions: etcdv1alpha1.BackupOptions{
				Compression:    etcdv1alpha1.CompressionNone,
				Verify:         ptr.To(true),
				ArtifactPolicy: etcdv1alpha1.ArtifactRetain,
			},
		},
	}
	if c.Spec.Backup != nil {
		b.Spec.Destination = *c.Spec.Backup.Destination.DeepCopy()
		if c.Spec.Backup.Compression != "" {
			b.Spec.Compression = c.Spec.Backup.Compression
		}
	} else {
		b.Spec.Destination.Volume = &etcdv1alpha1.VolumeLocation{ClaimName: finalSnapshotClaimName(c)}
	}
	return b
}

// finalSnapshotClaim is the volume claim for the final snapshot when the
// cluster names no backup destination: as large as a member's volume,
// which holds the database and more, in the members' storage class.
func finalSnapshotClaim(c *etcdv1alpha1.EtcdCluster) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: finalSnapshotClaimName(c), Namespace: c.Namespace,
			Labels: map[string]string{labelFinalSnapshotOf: c.Name, "app.kubernetes.io/managed-by": "tend"},
		},
		Spec: claimSpec(c),
	}
}

// backupState is how far an EtcdBackup got, as deletion sees it.
type backupState int

const (
	backupRunning backupState = iota
	backupDone
	backupFailed
)

// finalBackupState reads b's conditions: done once Complete and, when it
// is verified, Verified; failed when it failed or its verification did.
func finalBackupState(b *etcdv1alpha1.EtcdBackup) (backupState, string) {
	conds := b.Status.Conditions
	if f := apimeta.FindStatusCondition(conds, etcdv1alpha1.BackupFailed); f != nil && f.Status == metav1.ConditionTrue {
		return backupFailed, f.Message
	}
	if !apimeta.IsStatusConditionTrue(conds, etcdv1alpha1.BackupComplete) {
		return backupRunning, ""
	}
	if !ptr.Deref(b.Spec.Verify, true) {
		return backupDone, ""
	}
	v := apimeta.FindStatusCondition(conds, etcdv1alpha1.BackupVerified)
	switch {
	case v == nil || v.Status == metav1.ConditionUnknown:
		return backupRunning, ""
	case v.Status == metav1.ConditionFalse:
		return backupFailed, "its verification failed: " + v.Message
	}
	return backupDone, ""
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

// migrationBackupName is the EtcdBackup taken before the members move
// onto claims of the spec's class and size: one per target.
func migrationBackupName(c *etcdv1alpha1.EtcdCluster) string {
	h, size := fnv.New32a(), storageQuantity(c)
	_, _ = fmt.Fprintf(h, "%s/%s", ptr.Deref(c.Spec.Storage.StorageClassName, ""), size.String())
	return names.Child(c.Name, fmt.Sprintf("-migrate-%08x", h.Sum32()), names.EtcdBackup)
}

// migrationBackup is the backup of c before its members move onto new
// claims: as the one before an upgrade, verified.
func migrationBackup(c *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.EtcdBackup {
	b := upgradeBackup(c)
	b.Name = migrationBackupName(c)
	return b
}

// labelUpgradeBackupOf marks the volume claim of a cluster's pre-upgrade
// backups. Not the cluster label: it is none of the members' volumes.
const labelUpgradeBackupOf = "etcd.tend.dev/upgrade-backups-of"

func upgradeBackupClaimName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-upgrade-backups" }

// labelFinalSnapshotOf marks the volume claim of a deleted cluster's final
// snapshot. It is not the cluster label: the claim outlives the cluster
// and is none of its members' volumes.
const labelFinalSnapshotOf = "etcd.tend.dev/final-snapshot-of"

func deletionPolicy(c *etcdv1alpha1.EtcdCluster) etcdv1alpha1.DeletionPolicy {
	if c.Spec.DeletionPolicy == "" {
		return etcdv1alpha1.DeletionSnapshot
	}
	return c.Spec.DeletionPolicy
}

// bumpRevision is how far a restore moves the store's revision past the
// snapshot's (etcdutl --bump-revision), with --mark-compacted: clients
// that watched the old cluster (an apiserver's caches) never see a
// revision go back, and their watches from older revisions are told to
// start again. A billion is more writes than any cluster makes between
// its backup and a restore.
const bumpRevision = 1_000_000_000

func restoring(c *etcdv1alpha1.EtcdCluster) bool {
	return c.Spec.Bootstrap != nil && c.Spec.Bootstrap.Restore != nil
}

// staleVolumes are the claims among pvcs that a new cluster's members
// would start on but that another cluster of the same name made: its
// members would come up with that cluster's data, or fail to join. Claims
// made for this cluster (labelled with its UID) are not stale.
func staleVolumes(c *etcdv1alpha1.EtcdCluster, pvcs []corev1.PersistentVolumeClaim) []string {
	var stale []string
	for i := range pvcs {
		pvc := &pvcs[i]
		if _, ok := memberClaimOrdinal(c, pvc); !ok || pvc.DeletionTimestamp != nil {
			continue
		}
		if pvc.Labels[labelClusterUID] != string(c.UID) {
			stale = append(stale, pvc.Name)
		}
	}
	return stale
}

// backupInFlight tells whether b is being taken or verified: its
// verification compares the live cluster's history at the snapshot's
// revision, which a compaction in between would make incomparable.
func backupInFlight(b *etcdv1alpha1.EtcdBackup) bool {
	conds := b.Status.Conditions
	switch {
	case b.DeletionTimestamp != nil, apimeta.IsStatusConditionTrue(conds, etcdv1alpha1.BackupFailed):
		return false
	case !apimeta.IsStatusConditionTrue(conds, etcdv1alpha1.BackupComplete):
		return true
	}
	v := apimeta.FindStatusCondition(conds, etcdv1alpha1.BackupVerified)
	return v != nil && v.Status == metav1.ConditionUnknown
}
