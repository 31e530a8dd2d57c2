package etcdcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// migration is the volume migration's next step; migrating tells
	// whether one is due or under way (its status is then written).
	migration migrationStep
	migrating bool
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
		floor:   archiveFloor(c, w.now()),
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
	if err := r.observeMigration(ctx, w, &m); err != nil {
		return err
	}
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
		v.member = memberName(c, ordinal)
		if want := c.Spec.Storage.StorageClassName; want != nil && *want != v.class {
			v.otherClass = true
		}
		if v.request < size && v.class != "" && !v.otherClass {
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

// observeMigration reads what the volume migration decides on, while one
// is due or under way: the migration's backup, the StatefulSet's claim
// template, the pods' adoption and the volumes kept for the cluster (a
// live read of PersistentVolumes, which the manager does not cache).
func (r *Reconciler) observeMigration(ctx context.Context, w *world, m *maintenanceWorld) error {
	c := w.cluster
	prev := m.status.VolumeMigration
	if len(m.volumes.migrate) == 0 && (prev == nil || prev.Phase == etcdv1alpha1.MigrationCompleted) {
		return nil
	}
	in := migrationInput{replicas: int(replicas(c)), migrate: m.volumes.migrate, members: w.members,
		templateMatches: claimTemplateMatches(c, w.sts), backupName: migrationBackupName(c),
		remaking: w.sts.DeletionTimestamp != nil, unadopted: w.data.orphans, set: c.Namespace + "/" + w.sts.Name, setAge: w.clock.Sub(w.sts.CreationTimestamp.Time)}
	if class := c.Spec.Storage.StorageClassName; class != nil && len(in.migrate) > 0 {
		switch err := r.Get(ctx, client.ObjectKey{Name: *class}, &storagev1.StorageClass{}); {
		case apierrors.IsNotFound(err):
			in.classMissing = *class
		case err != nil:
			return fmt.Errorf("reading StorageClass %s: %w", *class, err)
		}
	}
	b := &etcdv1alpha1.EtcdBackup{}
	switch err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: in.backupName}, b); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading EtcdBackup %s: %w", in.backupName, err)
	case !metav1.IsControlledBy(b, c):
		in.backupExists, in.backup, in.backupMsg = true, backupFailed, "it was not made by Tend for this cluster; delete or rename it"
	default:
		in.backupExists = true
		in.backup, in.backupMsg = finalBackupState(b)
	}
	var err error
	if in.retained, err = r.retainedVolumes(ctx, c); err != nil {
		return err
	}
	m.migration, m.migrating = planMigration(in), true
	m.status.VolumeMigration = migrationStatus(c, prev, in, m.migration, w.now())
	return nil
}

// retainedVolumes lists the PersistentVolumes kept for c's members: marked
// with its UID, and bound (Released) to a claim of its namespace.
func (r *Reconciler) retainedVolumes(ctx context.Context, c *etcdv1alpha1.EtcdCluster) ([]retainedVolume, error) {
	var pvs corev1.PersistentVolumeList
	if err := r.APIReader.List(ctx, &pvs, client.MatchingLabels{etcdv1alpha1.LabelRetainedFor: string(c.UID)}); err != nil {
		return nil, fmt.Errorf("listing the volumes kept for the members: %w", err)
	}
	var kept []retainedVolume
	for _, pv := range pvs.Items {
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != c.Namespace || pv.DeletionTimestamp != nil {
			continue
		}
		policy := corev1.PersistentVolumeReclaimPolicy(pv.Annotations[etcdv1alpha1.AnnotationReclaimPolicy])
		if policy == "" {
			policy = corev1.PersistentVolumeReclaimDelete
		}
		kept = append(kept, retainedVolume{name: pv.Name, member: pv.Annotations[etcdv1alpha1.AnnotationRetainedMember], policy: policy})
	}
	slices.SortFunc(kept, func(a, b retainedVolume) int { return strings.Compare(a.name, b.name) })
	return kept, nil
}

// claimTemplateMatches tells whether sts makes member claims of the
// spec's class (when it names one) and size.
func claimTemplateMatches(c *etcdv1alpha1.EtcdCluster, sts *appsv1.StatefulSet) bool {
	if len(sts.Spec.VolumeClaimTemplates) == 0 {
		return true
	}
	have, want := sts.Spec.VolumeClaimTemplates[0].Spec, claimSpec(c)
	if want.StorageClassName != nil && ptr.Deref(have.StorageClassName, "") != *want.StorageClassName {
		return false
	}
	return have.Resources.Requests.Storage().Cmp(*want.Resources.Requests.Storage()) == 0
}

// migrationDue tells whether the volume migration has a step to take, or
// waits (its status says why). A roll under way ends first: the next
// member moves after it (a kept volume is still released).
func migrationDue(w *world, d *decision) bool {
	step := w.maint.migration
	if !w.maint.migrating || step.kind == migrateNone || (rolling(w) && step.kind != migrateRelease) {
		return false
	}
	d.migration = step
	return true
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
