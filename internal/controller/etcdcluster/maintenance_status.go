package etcdcluster

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// maintenanceStatus is status.maintenance: the upkeep as the pass left
// it, with who compacts and what is kept as the spec says now.
func maintenanceStatus(c *etcdv1alpha1.EtcdCluster, m *etcdv1alpha1.MaintenanceStatus) *etcdv1alpha1.MaintenanceStatus {
	out := m.DeepCopy()
	p := compactionOf(c)
	if out.Compaction == nil {
		out.Compaction = &etcdv1alpha1.CompactionStatus{}
	}
	out.Compaction.By, out.Compaction.Retention = p.by, p.String()
	return out
}

// maintenanceOf is the upkeep the pass saw, else the last status's.
func maintenanceOf(c *etcdv1alpha1.EtcdCluster, obs observation) *etcdv1alpha1.MaintenanceStatus {
	if obs.maintenance != nil {
		return obs.maintenance
	}
	return c.Status.Maintenance
}

// maintenanceReason is the Degraded reason of the upkeep, "" when it
// needs no attention: a NOSPACE recovery (under way, or waiting for a
// person), or a defragmentation round that stalled.
func maintenanceReason(c *etcdv1alpha1.EtcdCluster, obs observation) string {
	m := maintenanceOf(c, obs)
	switch {
	case m == nil:
		return ""
	case m.NoSpace != nil && m.NoSpace.Stage == etcdv1alpha1.NoSpaceTooLarge:
		return etcdv1alpha1.ReasonNoSpaceTooLarge
	case m.NoSpace != nil && m.NoSpace.Stage == etcdv1alpha1.NoSpaceWaiting:
		return etcdv1alpha1.ReasonAlarm
	case m.NoSpace != nil:
		return etcdv1alpha1.ReasonNoSpace
	case m.Defragmentation != nil && m.Defragmentation.Phase == etcdv1alpha1.DefragmentationStalled:
		return etcdv1alpha1.ReasonDefragmentationStalled
	case m.VolumeMigration != nil && m.VolumeMigration.Phase == etcdv1alpha1.MigrationBlocked:
		return etcdv1alpha1.ReasonVolumeMigrationBlocked
	}
	return ""
}

// maintenanceMessage is the message that goes with maintenanceReason.
func maintenanceMessage(c *etcdv1alpha1.EtcdCluster, obs observation) string {
	m := maintenanceOf(c, obs)
	switch {
	case m.NoSpace != nil:
		return m.NoSpace.Message
	case m.Defragmentation != nil && m.Defragmentation.Phase == etcdv1alpha1.DefragmentationStalled:
		return m.Defragmentation.Message
	}
	return m.VolumeMigration.Message
}

// volumesMessage says how the member claims' growth stands.
func volumesMessage(c *etcdv1alpha1.EtcdCluster, v *volumeStep) string {
	if len(v.grow) > 0 {
		return fmt.Sprintf("Asking %s to grow to %s", strings.Join(v.grow, ", "), c.Spec.Storage.Size)
	}
	return "Volumes growing to " + c.Spec.Storage.Size.String() + ": " + strings.Join(v.resizing, "; ")
}

// migrationStatus is status.maintenance.volumeMigration after the pass
// planned step on in: the target, the phase, the members still to move and
// the volumes kept.
func migrationStatus(c *etcdv1alpha1.EtcdCluster, prev *etcdv1alpha1.VolumeMigrationStatus, in migrationInput, step migrationStep, now time.Time) *etcdv1alpha1.VolumeMigrationStatus {
	size := storageQuantity(c)
	out := &etcdv1alpha1.VolumeMigrationStatus{StorageClassName: ptr.Deref(c.Spec.Storage.StorageClassName, ""), Size: &size,
		Backup: in.backupName, Message: step.message}
	if prev != nil && prev.Phase != etcdv1alpha1.MigrationCompleted {
		out.StartedAt = prev.StartedAt
	}
	if out.StartedAt == nil {
		out.StartedAt = &metav1.Time{Time: now}
	}
	for _, v := range in.migrate {
		out.Remaining = append(out.Remaining, v.member)
	}
	for _, v := range in.retained {
		out.RetainedVolumes = append(out.RetainedVolumes, v.name)
	}
	switch step.kind {
	case migrateNone:
		if prev != nil && prev.Phase == etcdv1alpha1.MigrationCompleted {
			return prev
		}
		out.Phase, out.CompletedAt = etcdv1alpha1.MigrationCompleted, &metav1.Time{Time: now}
		out.Message = fmt.Sprintf("Every member stands on a volume claim of %s", targetOf(c))
	case migrateBlocked:
		out.Phase = etcdv1alpha1.MigrationBlocked
	case migrateBackup:
		out.Phase = etcdv1alpha1.MigrationBackingUp
	case migrateWait:
		out.Phase = etcdv1alpha1.MigrationMigrating
		if !in.backupExists || in.backup != backupDone {
			out.Phase = etcdv1alpha1.MigrationBackingUp
		}
	default:
		out.Phase = etcdv1alpha1.MigrationMigrating
	}
	return out
}

// targetOf names the claims' target: the spec's class, if it names one,
// and size.
func targetOf(c *etcdv1alpha1.EtcdCluster) string {
	size := storageQuantity(c)
	if class := c.Spec.Storage.StorageClassName; class != nil {
		return fmt.Sprintf("StorageClass %s and %s", *class, size.String())
	}
	return size.String()
}

// migrating tells whether the volume migration is under way (backing up
// or moving members) as the pass left it.
func migrating(m *etcdv1alpha1.MaintenanceStatus) bool {
	if m == nil || m.VolumeMigration == nil {
		return false
	}
	p := m.VolumeMigration.Phase
	return p == etcdv1alpha1.MigrationBackingUp || p == etcdv1alpha1.MigrationMigrating
}
