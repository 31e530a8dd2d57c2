package etcdcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcd"
)

// world is what one pass knows of a cluster, read in one place (observe)
// before anything is chosen: next decides from it alone.
type world struct {
	cluster *etcdv1alpha1.EtcdCluster
	// clock is the pass's reading of the clock.
	clock time.Time
	// deleting: the cluster has a deletion timestamp; nothing else is read.
	deleting bool
	// sts is the members' StatefulSet; nil while there is none to act on
	// (paused before it was made, a new cluster's data being restored,
	// another owner's StatefulSet in the way).
	sts *appsv1.StatefulSet
	// recovery is status.recovery: an in-place restore or a quorum-loss
	// recovery, under way, failed or done. retryRecovery: a failed recovery
	// from a survivor whose Job someone deleted, to try again.
	recovery      *etcdv1alpha1.RecoveryStatus
	retryRecovery bool
	// restores are the cluster's EtcdRestores, oldest first; pending is
	// the oldest that has not finished, with its source resolved.
	restores []etcdv1alpha1.EtcdRestore
	pending  *queuedRestore
	// data is where the members' pods run and their data lives.
	data memberData
	// members are the members as etcd reports them; nil, with unreachable
	// saying why, when none answered. They are not asked while a recovery
	// holds them: that operation stops and starts them itself.
	members       []memberView
	unreachable   error
	healthyQuorum bool
	// initJob is how far the init Job got.
	initJob jobState
	// backup is the newest verified EtcdBackup, read while a formed
	// cluster has lost its quorum; "" when there is none.
	backup string
	// upgrade is how a version change stands; roll pairs the members with
	// the revision their pods run.
	upgrade upgradeState
	roll    rollWorld
	// maint is the storage upkeep: compaction, defragmentation, NOSPACE.
	maint maintenanceWorld
}

// queuedRestore is the EtcdRestore that waits for its turn, and where
// its data would come from (src), or why it cannot come yet (progress).
type queuedRestore struct {
	rs       *etcdv1alpha1.EtcdRestore
	src      *restoreSource
	progress *restoreProgress
}

// rollWorld is the members as a roll sees them.
type rollWorld struct {
	// template is the members' pod template as the StatefulSet gets it
	// now; current is its revision, and rev the revision the spec asks
	// for (they differ while a minor upgrade is held).
	template     corev1.PodTemplateSpec
	current, rev string
	members      []rollMember
	// outdated: a member's pod runs another revision; unmarked: a pod
	// carries none (made by a Tend older than revisions).
	outdated, unmarked bool
}

// formed tells whether the cluster had formed: its init Job exists.
func (w *world) formed() bool { return !w.data.formed.IsZero() }

// observe reads the world of s's cluster, once per pass, after the
// objects that do not depend on the operation (certificates, Services,
// the StatefulSet, the connection ConfigMap) are in place. It opens the
// etcd client that the operations use (s.cli) and records what the status
// reports in s.obs.
func (r *Reconciler) observe(ctx context.Context, s *scope) (*world, error) {
	c := s.cluster
	w := &world{cluster: c, clock: s.now, sts: s.sts, recovery: c.Status.Recovery.DeepCopy()}
	if err := r.observeInitJob(ctx, s, w); err != nil {
		return nil, err
	}
	if s.sts == nil {
		return w, nil // the pass made, or waits to make, the StatefulSet
	}
	var err error
	if w.restores, err = r.restoresOf(ctx, c); err != nil {
		return nil, err
	}
	if err := r.observeRecovery(ctx, w); err != nil {
		return nil, err
	}
	if w.data, err = r.observeData(ctx, c, s.sts); err != nil {
		return nil, err
	}
	w.data.formed = s.obs.jobCreated
	if recovering(w.recovery) {
		return w, nil
	}
	if s.obs.startProblems, err = r.observeStartProblems(ctx, s, w.data); err != nil {
		return nil, err
	}
	if err := r.observeMembers(ctx, s, w); err != nil {
		return nil, err
	}
	if w.members == nil || c.Spec.Paused {
		return w, nil
	}
	if !w.healthyQuorum && w.formed() {
		if w.backup, err = r.latestVerifiedBackup(ctx, c); err != nil {
			return nil, err
		}
	}
	if w.upgrade, err = r.observeUpgrade(ctx, c, w.members); err != nil {
		return nil, err
	}
	s.target = templateCluster(c, w.upgrade, runningImage(s.sts))
	w.roll = observeRoll(s, w)
	if err := r.observeMaintenance(ctx, w); err != nil {
		return nil, err
	}
	s.obs.maintenance, s.obs.volumes = &w.maint.status, &w.maint.volumes
	return w, nil
}

// observeInitJob reads how far the init Job got: authentication is set up
// only while it does not exist, and its creation marks the cluster formed.
func (r *Reconciler) observeInitJob(ctx context.Context, s *scope, w *world) error {
	c := s.cluster
	job, err := r.ownedJob(ctx, c, initJobName(c))
	switch {
	case err != nil:
		return fmt.Errorf("the init Job: %w", err)
	case job == nil:
		s.obs.job = jobNone
	default:
		s.obs.job, s.obs.jobMessage = jobStateOf(job)
		s.obs.jobCreated = job.CreationTimestamp.Time
	}
	w.initJob = s.obs.job
	return nil
}

// observeRecovery reads the pending EtcdRestore's source, and whether a
// failed recovery's Job was deleted to try again.
func (r *Reconciler) observeRecovery(ctx context.Context, w *world) error {
	c := w.cluster
	if rs := pendingRestore(w.restores); rs != nil && !recovering(w.recovery) {
		src, progress, err := r.resolveRestoreOf(ctx, c, rs)
		if err != nil {
			return err
		}
		w.pending = &queuedRestore{rs: rs, src: src, progress: progress}
	}
	rec := w.recovery
	if rec == nil || rec.Phase != etcdv1alpha1.RecoveryFailed || rec.Kind != etcdv1alpha1.RecoveryFromSurvivor || rec.Job == "" {
		return nil
	}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: rec.Job}, &batchv1.Job{})
	switch {
	case apierrors.IsNotFound(err):
		w.retryRecovery = true
	case err != nil:
		return fmt.Errorf("reading Job %s: %w", rec.Job, err)
	}
	return nil
}

// observeMembers asks etcd for the members' status, through the client
// that the pass keeps open for its operation.
func (r *Reconciler) observeMembers(ctx context.Context, s *scope, w *world) error {
	cli, err := r.connectMembers(ctx, s, w.data)
	if err != nil {
		return err
	}
	if cli == nil {
		w.unreachable = errors.New("no member pod has an IP address yet")
		s.obs.unreachable = w.unreachable
		return nil
	}
	s.cli = cli
	observeCtx, cancel := context.WithTimeout(ctx, observeTimeout)
	defer cancel()
	statuses, err := cli.Status(observeCtx)
	if err != nil {
		w.unreachable = err
		s.obs.unreachable = err
		return nil
	}
	w.members = markDataLoss(viewsOf(w.cluster, statuses, s.now), w.cluster.Status.Members, w.data)
	all, sts := split(w.members)
	w.healthyQuorum = etcd.HealthyQuorum(all, sts)
	s.obs.members, s.obs.healthyQuorum = w.members, w.healthyQuorum
	return nil
}

// membersWithData names the members that answered with data (a store past
// its first revision), as "<member> at revision <r>".
func (w *world) membersWithData() []string {
	var holding []string
	for _, m := range w.members {
		if m.Answered && m.Revision > 1 {
			name := m.Name
			if name == "" {
				name = m.ID.String()
			}
			holding = append(holding, fmt.Sprintf("%s at revision %d", name, m.Revision))
		}
	}
	return holding
}

// observeRoll pairs the members with the revision their pods run, against
// the template they would get now (held at the running version while a
// minor upgrade waits). A pod of an older Tend that runs what the template
// asks counts as current: the pass marks it so (adoptUnmarkedPods).
func observeRoll(s *scope, w *world) rollWorld {
	c := w.cluster
	rw := rollWorld{template: statefulSet(s.template(), 0, Bootstrap{}).Spec.Template}
	rw.current = rw.template.Annotations[etcdv1alpha1.AnnotationMemberRevision]
	rw.rev = memberRevision(c)
	pods := make(map[string]*corev1.Pod, len(w.data.pods))
	for name, pod := range w.data.pods {
		if adoptable(pod, rw.template) {
			pod = pod.DeepCopy()
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[etcdv1alpha1.AnnotationMemberRevision] = rw.current
		}
		pods[name] = pod
	}
	rw.members, rw.outdated, rw.unmarked = rollMembersOf(c, w.members, pods, rw.current)
	return rw
}

// adoptable tells whether pod, made by a Tend older than revisions, runs
// what template asks, and takes its revision without a restart.
func adoptable(pod *corev1.Pod, template corev1.PodTemplateSpec) bool {
	_, marked := pod.Annotations[etcdv1alpha1.AnnotationMemberRevision]
	return !marked && pod.DeletionTimestamp == nil && runsAs(pod, template)
}

// latestVerifiedBackup is the newest EtcdBackup of c that is Complete and
// Verified, or "".
func (r *Reconciler) latestVerifiedBackup(ctx context.Context, c *etcdv1alpha1.EtcdCluster) (string, error) {
	backups, err := r.backupsOf(ctx, c)
	if err != nil {
		return "", err
	}
	var best *etcdv1alpha1.EtcdBackup
	for i := range backups {
		b := &backups[i]
		if b.DeletionTimestamp != nil || b.Status.CompletionTime == nil ||
			!apimeta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.BackupComplete) ||
			!apimeta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.BackupVerified) {
			continue
		}
		if best == nil || b.Status.CompletionTime.After(best.Status.CompletionTime.Time) {
			best = b
		}
	}
	if best == nil {
		return "", nil
	}
	return best.Name, nil
}

// backupsOf lists the EtcdBackups of c, from the cache.
func (r *Reconciler) backupsOf(ctx context.Context, c *etcdv1alpha1.EtcdCluster) ([]etcdv1alpha1.EtcdBackup, error) {
	var list etcdv1alpha1.EtcdBackupList
	if err := r.List(ctx, &list, client.InNamespace(c.Namespace)); err != nil {
		return nil, fmt.Errorf("listing EtcdBackups: %w", err)
	}
	return slices.DeleteFunc(list.Items, func(b etcdv1alpha1.EtcdBackup) bool { return b.Spec.ClusterRef.Name != c.Name }), nil
}

// restoresOf lists the EtcdRestores of c, oldest first.
func (r *Reconciler) restoresOf(ctx context.Context, c *etcdv1alpha1.EtcdCluster) ([]etcdv1alpha1.EtcdRestore, error) {
	var list etcdv1alpha1.EtcdRestoreList
	if err := r.List(ctx, &list, client.InNamespace(c.Namespace), client.MatchingFields{indexRestoreCluster: c.Name}); err != nil {
		return nil, fmt.Errorf("listing EtcdRestores: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b etcdv1alpha1.EtcdRestore) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	return list.Items, nil
}

// restoreFinished tells whether rs completed or failed.
func restoreFinished(rs *etcdv1alpha1.EtcdRestore) bool {
	return apimeta.IsStatusConditionTrue(rs.Status.Conditions, etcdv1alpha1.RestoreComplete) ||
		apimeta.IsStatusConditionTrue(rs.Status.Conditions, etcdv1alpha1.RestoreFailed)
}

// pendingRestore is the oldest restore that has not finished.
func pendingRestore(restores []etcdv1alpha1.EtcdRestore) *etcdv1alpha1.EtcdRestore {
	for i := range restores {
		if rs := &restores[i]; rs.DeletionTimestamp == nil && !restoreFinished(rs) {
			return rs
		}
	}
	return nil
}
