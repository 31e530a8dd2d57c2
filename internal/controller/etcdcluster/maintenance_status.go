package etcdcluster

import (
	"fmt"
	"strings"

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
	}
	return ""
}

// maintenanceMessage is the message that goes with maintenanceReason.
func maintenanceMessage(c *etcdv1alpha1.EtcdCluster, obs observation) string {
	m := maintenanceOf(c, obs)
	if m.NoSpace != nil {
		return m.NoSpace.Message
	}
	return m.Defragmentation.Message
}

// volumesMessage says how the member claims' growth stands.
func volumesMessage(c *etcdv1alpha1.EtcdCluster, v *volumeStep) string {
	if len(v.grow) > 0 {
		return fmt.Sprintf("Asking %s to grow to %s", strings.Join(v.grow, ", "), c.Spec.Storage.Size)
	}
	return "Volumes growing to " + c.Spec.Storage.Size.String() + ": " + strings.Join(v.resizing, "; ")
}

// stuckMessage says which claims cannot grow, and the way out.
func stuckMessage(c *etcdv1alpha1.EtcdCluster, v *volumeStep) string {
	return fmt.Sprintf("spec.storage.size is %s, but the StorageClass of %s does not allow volume expansion (allowVolumeExpansion), so these volumes keep their size. "+
		"Set spec.storage.size back, or move the data to larger volumes: back it up and restore it into a new EtcdCluster (docs/etcdcluster.md, Runbook)",
		c.Spec.Storage.Size, strings.Join(v.stuck, ", "))
}
