package etcdcluster

import (
	"context"
	"fmt"
	"slices"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcd"
)

// maintenanceWorld is the storage upkeep as a pass sees it.
type maintenanceWorld struct {
	compaction compaction
	// samples are the revisions recorded over time; current is the
	// cluster's revision now.
	samples []revisionSample
	current int64
	// floor is a revision that history must be kept from (0: none): the
	// hook for what needs the history later, such as an archive that has
	// not read it yet.
	floor  int64
	defrag defragSettings
	// request is the etcd.tend.dev/defragment annotation.
	request string
	// alarm: etcd raised NOSPACE.
	alarm bool
	// status is the last status of the upkeep (never nil).
	status etcdv1alpha1.MaintenanceStatus
	// volumes is what growing the member claims to spec.storage.size
	// needs.
	volumes volumeStep
	// backupInFlight names an EtcdBackup of the cluster being taken or
	// verified: compaction waits for it.
	backupInFlight string
}

// revisionLog is one cluster's revisions over time, in memory.
type revisionLog struct {
	uid     types.UID
	samples []revisionSample
}

// observeMaintenance reads the upkeep's settings and state, records the
// cluster's revision for compaction by retention, and sees whether the
// member claims have spec.storage.size.
func (r *Reconciler) observeMaintenance(ctx context.Context, w *world) error {
	c := w.cluster
	m := maintenanceWorld{
		compaction: compactionOf(c), current: clusterRevision(w.members), defrag: defragOf(c, w.now()),
		request: c.Annotations[etcdv1alpha1.AnnotationDefragment], alarm: noSpaceRaised(w.members),
	}
	if st := c.Status.Maintenance; st != nil {
		m.status = *st.DeepCopy()
	}
	key := client.ObjectKeyFromObject(c)
	var log revisionLog
	if v, ok := r.revisions.Load(key); ok {
		log = v.(revisionLog)
	}
	if log.uid != c.UID {
		log = revisionLog{uid: c.UID}
	}
	if m.compaction.retention > 0 && m.current > 0 {
		log.samples = recordRevision(log.samples, m.compaction, w.now(), m.current)
		r.revisions.Store(key, log)
	}
	m.samples = log.samples
	claims, err := r.observeClaims(ctx, w)
	if err != nil {
		return err
	}
	m.volumes = planVolumes(storageSize(c.Spec.Storage.Size), claims)
	if m.compaction.by == compactedByTend { // only Tend's compaction waits for backups
		backups, err := r.backupsOf(ctx, c)
		if err != nil {
			return err
		}
		for i := range backups {
			if backupInFlight(&backups[i]) {
				m.backupInFlight = backups[i].Name
			}
		}
	}
	w.maint = m
	return nil
}

// noSpaceRaised tells whether the members report a NOSPACE alarm: each
// lists the cluster's alarms among its errors.
func noSpaceRaised(members []memberView) bool {
	return slices.ContainsFunc(members, func(m memberView) bool { return slices.ContainsFunc(m.Errors, etcd.IsNoSpaceAlarm) })
}

// observeClaims reads the current members' volume claims; the StorageClass
// of a claim smaller than spec.storage.size is looked up, in the manager's
// cache, to see whether it may grow.
func (r *Reconciler) observeClaims(ctx context.Context, w *world) ([]claimView, error) {
	c := w.cluster
	size := storageSize(c.Spec.Storage.Size)
	var claims []claimView
	for i := range w.data.pvcs {
		pvc := &w.data.pvcs[i]
		ordinal, ok := isMemberPVC(c, pvc)
		if !ok || ordinal >= int(replicas(c)) || pvc.DeletionTimestamp != nil {
			continue
		}
		v := claimViewOf(pvc)
		if v.request < size && v.class != "" {
			sc := &storagev1.StorageClass{}
			switch err := r.Get(ctx, client.ObjectKey{Name: v.class}, sc); {
			case apierrors.IsNotFound(err):
			case err != nil:
				return nil, fmt.Errorf("reading StorageClass %s: %w", v.class, err)
			default:
				v.canExpand = ptr.Deref(sc.AllowVolumeExpansion, false)
			}
		}
		claims = append(claims, v)
	}
	return claims, nil
}

// volumesDue tells whether a member claim asks for less than
// spec.storage.size and its class lets it grow.
func volumesDue(w *world, _ *decision) bool { return len(w.maint.volumes.grow) > 0 }

// compactionInputOf is what planCompaction decides on.
func compactionInputOf(w *world) compactionInput {
	m := w.maint
	in := compactionInput{policy: m.compaction, samples: m.samples, current: m.current, floor: m.floor, now: w.now()}
	if st := m.status.Compaction; st != nil {
		in.compacted = st.Revision
		if st.Time != nil {
			in.compactedTime = st.Time.Time
		}
	}
	return in
}

// defragInputOf is what planDefrag decides on; noSpace is the stage of a
// NOSPACE recovery that asks for a round, or "".
func defragInputOf(w *world, noSpace string) defragInput {
	return defragInput{settings: w.maint.defrag, round: w.maint.status.Defragmentation, request: w.maint.request,
		noSpace: noSpace, members: w.members, created: w.cluster.CreationTimestamp.Time, now: w.now()}
}

// noSpaceInputOf is what planNoSpace decides on.
func noSpaceInputOf(w *world) noSpaceInput {
	m := w.maint
	in := noSpaceInput{alarm: m.alarm, policy: w.cluster.Spec.Maintenance.NoSpace, status: m.status.NoSpace,
		round: m.status.Defragmentation, current: m.current, mayCompactAll: m.compaction.by != compactedByNone, quota: quotaOf(w.cluster)}
	if m.floor > 0 {
		in.current = min(in.current, m.floor)
	}
	for _, mv := range w.members {
		in.largest, in.inUse = max(in.largest, mv.DBSize), max(in.inUse, mv.DBSizeInUse)
	}
	retention := compactionInputOf(w)
	if rev := compactionTarget(retention); rev > retention.compacted {
		in.retention = rev
	}
	return in
}

// noSpaceDue plans the NOSPACE recovery. It is chosen while it acts
// (compact, defragment, disarm, end); one that waits for a person (Manual,
// or the data is too large) is reported, and the choice goes on: the roll
// that raises the quota must not wait for it.
func noSpaceDue(w *world, d *decision) bool {
	if w.maint.status.NoSpace == nil && !w.maint.alarm {
		return false
	}
	d.noSpace = planNoSpace(noSpaceInputOf(w))
	switch d.noSpace.kind {
	case noSpaceDefrag:
		d.defrag = planDefrag(defragInputOf(w, d.noSpace.stage))
		return w.healthyQuorum
	case noSpaceCompact, noSpaceDisarm:
		return w.healthyQuorum
	case noSpaceDone:
		return true
	}
	return false
}

// compactDue tells whether the history may be compacted now: not while a
// roll is due or under way, between the steps of a defragmentation round,
// or while a backup is taken or verified.
func compactDue(w *world, d *decision) bool {
	r := w.maint.status.Defragmentation
	if !w.healthyQuorum || rolling(w) || (r != nil && r.Phase == etcdv1alpha1.DefragmentationRunning) || w.maint.backupInFlight != "" {
		return false
	}
	rev, ok := planCompaction(compactionInputOf(w))
	d.compact = rev
	return ok
}

// defragDue tells whether a defragmentation round goes on, or one starts.
// A round starts only while every member is healthy and no roll is due or
// under way; a round under way ends before a roll starts.
func defragDue(w *world, d *decision) bool {
	d.defrag = planDefrag(defragInputOf(w, ""))
	switch d.defrag.kind {
	case defragNone:
		return false
	case defragStart:
		return allHealthy(w.members) && !rolling(w)
	}
	return true
}

// allHealthy tells whether every member is healthy.
func allHealthy(members []memberView) bool {
	for _, m := range members {
		if !m.Healthy {
			return false
		}
	}
	return len(members) > 0
}
