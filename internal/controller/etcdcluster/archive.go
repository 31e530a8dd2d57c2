package etcdcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
)

// archiveObservation is the archive as a pass left it.
type archiveObservation struct {
	// status is status.archive; nil with removed: spec.archive is gone.
	status  *etcdv1alpha1.ArchiveStatus
	removed bool
	// ok, reason and message are the ContinuousArchiving condition.
	ok      bool
	reason  string
	message string
}

// requeueArchive is how often an archived cluster's archive is read: the
// window in status is at most this old.
const requeueArchive = 30 * time.Second

// reconcileArchive runs the archive of spec.archive, or removes the one
// that spec.archive no longer asks for. It never stops an operation: the
// archive runs beside them, and holds still while a restore or recovery
// changes the history.
func (r *Reconciler) reconcileArchive(ctx context.Context, s *scope, w *world) error {
	c := s.cluster
	if c.Spec.Archive == nil && c.Status.Archive == nil {
		// Never archived, or removed already: nothing to read (a pass of an
		// idle cluster makes no request for the archive).
		return nil
	}
	// From the cache (Tend's Deployments, read through when it lacks the
	// name): an archived cluster's pass at rest asks the apiserver nothing.
	dep := &appsv1.Deployment{}
	err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: archiveDeploymentName(c)}, dep)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading Deployment %s: %w", archiveDeploymentName(c), err)
	}
	if err != nil {
		dep = nil
	}
	if c.Spec.Archive == nil {
		// status.archive goes once the Deployment is gone: a pass that
		// failed to delete it comes back for it.
		if dep != nil && metav1.IsControlledBy(dep, c) {
			if err := r.deleteExactly(ctx, "Deployment", dep); err != nil {
				return err
			}
			r.event(c, corev1.EventTypeNormal, "ArchiveRemoved", "Delete", "Deleted Deployment %s: spec.archive is gone; the archive's segments stay where they are", dep.Name)
		}
		s.obs.archive = &archiveObservation{removed: true}
		return nil
	}
	prev := c.Status.Archive
	var epoch int32
	if prev != nil {
		epoch = prev.Epoch
	}
	loc := archiveLocation(c).URI
	o := &archiveObservation{status: archiveStatusOf(prev, loc, "", 0, epoch, nil)}
	s.obs.archive = o
	s.requeueAfter(requeueArchive)
	if dep != nil && !metav1.IsControlledBy(dep, c) {
		o.reason, o.message = etcdv1alpha1.ReasonArchiveBroken, notOurs(c, "Deployment", dep).Error()
		return nil
	}

	if w.recovery != nil && w.recovery.CompletedAt == nil {
		o.status = prev
		o.reason = etcdv1alpha1.ReasonArchivePaused
		o.message = fmt.Sprintf("The %s changes the history: the archive's pod is stopped, and the archive starts again from a base backup taken after it", recoveryWord(w.recovery))
		if dep != nil && (dep.Spec.Replicas == nil || *dep.Spec.Replicas != 0) {
			return r.scaleArchive(ctx, c, dep, 0)
		}
		return nil
	}

	base, err := r.archiveBase(ctx, c, prev, epoch)
	if err != nil {
		return err
	}
	if base != nil {
		if why := archiveNeedsNewBase(base, nil, c.Status.Recovery); why != "" {
			epoch++
			r.event(c, corev1.EventTypeNormal, "ArchiveRestarting", "Archive", "The archive starts again from a new base backup, %s: %s", archiveBaseName(c, epoch, 0), why)
			o.status, base = archiveStatusOf(prev, loc, "", 0, epoch, nil), nil
		}
	}
	if base == nil {
		return r.takeArchiveBase(ctx, s, w, o, epoch)
	}
	o.status.BaseBackup = base.Name
	rev, failed, msg := baseProgress(base)
	switch {
	case failed && s.now.Sub(failedAt(base)) >= archiveRetryFailedBase:
		epoch++
		o.status = archiveStatusOf(prev, loc, "", 0, epoch, nil)
		r.event(c, corev1.EventTypeWarning, "ArchiveBaseFailed", "Archive", "%s; taking another, %s", msg, archiveBaseName(c, epoch, 0))
		return r.takeArchiveBase(ctx, s, w, o, epoch)
	case failed:
		o.reason, o.message = etcdv1alpha1.ReasonWaitingForBaseBackup, fmt.Sprintf("%s; Tend takes another %s after it failed", msg, archiveRetryFailedBase)
		return nil
	case rev == 0:
		o.reason, o.message = etcdv1alpha1.ReasonWaitingForBaseBackup, msg
		return nil
	}
	o.status.BaseRevision = rev
	if w.pending == nil && s.obs.recovery == nil && w.members != nil && w.healthyQuorum {
		// Retention waits while a restore is on its way (it may start from
		// an older base), while a verification replays from this one, and
		// while the cluster would fail a new base.
		if base, err = r.keepArchiveRetention(ctx, s, base, o.status); err != nil {
			return err
		}
	}
	rev, pruned := base.Status.Snapshot.Revision, o.status.PrunedThrough
	// The agent prunes only what status already says is pruned: no restore
	// chooses a base whose revisions it is deleting.
	var prunable int64
	if prev != nil {
		prunable = prev.PrunedThrough
	}

	want := archiveDeployment(c, rev, prunable, r.AgentImage, true)
	if dep == nil {
		o.reason, o.message = etcdv1alpha1.ReasonArchiveStarting, "The archive's pod is starting"
		err := r.createOwned(ctx, c, want)
		if apierrors.IsAlreadyExists(err) {
			// The cache is behind the Deployment that an earlier pass made.
			return nil
		}
		if err != nil {
			return err
		}
		r.event(c, corev1.EventTypeNormal, "ArchiveStarted", "Archive", "Created Deployment %s: archiving every revision after %s's revision %d to %s", want.Name, base.Name, rev, loc)
		return nil
	}
	if dep.Annotations[annotationArchiveSpec] != want.Annotations[annotationArchiveSpec] || ptr.Deref(dep.Spec.Replicas, 1) != *want.Spec.Replicas {
		dep.Spec.Template, dep.Spec.Replicas, dep.Spec.Strategy = want.Spec.Template, want.Spec.Replicas, want.Spec.Strategy
		if dep.Annotations == nil {
			dep.Annotations = map[string]string{}
		}
		dep.Annotations[annotationArchiveSpec] = want.Annotations[annotationArchiveSpec]
		if err := r.Update(ctx, dep); err != nil {
			return fmt.Errorf("updating Deployment %s: %w", dep.Name, err)
		}
		r.event(c, corev1.EventTypeNormal, "ArchiveUpdated", "Archive", "Updated Deployment %s: archiving after %s's revision %d", dep.Name, base.Name, rev)
		o.reason, o.message = etcdv1alpha1.ReasonArchiveStarting, "The archive's pod is starting with the new settings"
		return nil
	}

	state, err := r.readArchive(ctx, c, dep)
	if err != nil {
		o.reason, o.message = etcdv1alpha1.ReasonArchiveStarting, "The archive's pod does not report yet: "+err.Error()
		return nil
	}
	o.status = archiveStatusOf(prev, loc, base.Name, rev, epoch, &state)
	o.status.PrunedThrough = pruned
	maxAge, _, _ := archiveSettings(c.Spec.Archive)
	switch {
	case archiveNeedsNewBase(nil, &state, nil) != "":
		o.status.Epoch++
		o.reason = etcdv1alpha1.ReasonArchiveBroken
		o.message = state.Message + "; Tend takes a new base backup, " + archiveBaseName(c, epoch+1, 0) + ", and the archive starts again from it"
		r.event(c, corev1.EventTypeWarning, "ArchiveBroken", "Archive", "%s", o.message)
	case state.Phase == agentapi.ArchiveBroken:
		o.reason = etcdv1alpha1.ReasonArchiveBroken
		o.message = state.Message + "; the archive stays stopped until the location is the cluster's alone (change spec.archive.destination, or move what is there)"
	case state.Phase != agentapi.ArchiveArchiving:
		o.reason, o.message = etcdv1alpha1.ReasonArchiveStarting, state.Message
	case time.Duration(state.LagSeconds*float64(time.Second)) > 2*maxAge+30*time.Second:
		o.reason = etcdv1alpha1.ReasonArchiveLagging
		o.message = fmt.Sprintf("The oldest revision not yet stored was received %ds ago (segments every %s): the store is slow or refuses writes; see the pod's log", int64(state.LagSeconds), maxAge)
	default:
		o.ok, o.reason = true, etcdv1alpha1.ReasonArchiving
		o.message = archivingMessage(o.status, maxAge)
		return r.verifyArchive(ctx, s, base, o.status)
	}
	return nil
}

// archivingMessage says what the archive holds.
func archivingMessage(st *etcdv1alpha1.ArchiveStatus, maxAge time.Duration) string {
	if st.LastRevision == 0 {
		return fmt.Sprintf("Archiving every revision after %d (base backup %s); no write since", st.BaseRevision, st.BaseBackup)
	}
	return fmt.Sprintf("Archived revisions %d to %d, stored within %s of their writes", st.FirstRevision, st.LastRevision, maxAge)
}

// archiveBase reads the archive's base backup: the one status.archive
// names for this epoch (retention moves it on to a newer one of Tend's),
// or the epoch's first; nil when there is none.
func (r *Reconciler) archiveBase(ctx context.Context, c *etcdv1alpha1.EtcdCluster, prev *etcdv1alpha1.ArchiveStatus, epoch int32) (*etcdv1alpha1.EtcdBackup, error) {
	first := archiveBaseName(c, epoch, 0)
	if prev != nil && prev.Epoch == epoch && prev.BaseBackup != "" && prev.BaseBackup != first {
		b, err := r.readArchiveBase(ctx, c, prev.BaseBackup)
		if err != nil || (b != nil && b.Labels[labelArchiveEpoch] == strconv.Itoa(int(epoch))) {
			return b, err
		}
		// Not this epoch's (the archive broke since): its first base.
	}
	return r.readArchiveBase(ctx, c, first)
}

// readArchiveBase reads the base backup name, which c must control; nil
// when there is none.
func (r *Reconciler) readArchiveBase(ctx context.Context, c *etcdv1alpha1.EtcdCluster, name string) (*etcdv1alpha1.EtcdBackup, error) {
	b := &etcdv1alpha1.EtcdBackup{}
	err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, b)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading EtcdBackup %s: %w", name, err)
	}
	if !metav1.IsControlledBy(b, c) {
		return nil, notOurs(c, "EtcdBackup", b)
	}
	if b.DeletionTimestamp != nil {
		return nil, nil // going: a new base takes its place once it is gone
	}
	return b, nil
}

// takeArchiveBase creates the base backup of epoch once the cluster
// serves.
func (r *Reconciler) takeArchiveBase(ctx context.Context, s *scope, w *world, o *archiveObservation, epoch int32) error {
	c := s.cluster
	o.reason = etcdv1alpha1.ReasonWaitingForBaseBackup
	if w.members == nil || !w.healthyQuorum || !w.formed() {
		o.message = "The base backup is taken once the cluster serves"
		return nil
	}
	b := archiveBaseBackup(c, epoch, 0)
	err := r.createOwned(ctx, c, b)
	switch {
	case apierrors.IsAlreadyExists(err):
	case err != nil:
		return err
	default:
		r.event(c, corev1.EventTypeNormal, "ArchiveBaseBackup", "Backup", "Created EtcdBackup %s: the archive's base", b.Name)
	}
	o.status.BaseBackup = b.Name
	o.message = "Waiting for the base backup " + b.Name
	return nil
}

// scaleArchive sets the archive Deployment's replicas.
func (r *Reconciler) scaleArchive(ctx context.Context, c *etcdv1alpha1.EtcdCluster, dep *appsv1.Deployment, n int32) error {
	dep.Spec.Replicas = &n
	if err := r.Update(ctx, dep); err != nil {
		return fmt.Errorf("scaling Deployment %s to %d: %w", dep.Name, n, err)
	}
	r.event(c, corev1.EventTypeNormal, "ArchivePaused", "Archive", "Scaled Deployment %s to %d while the history changes", dep.Name, n)
	return nil
}

// archiveAddr is where a cluster's archive agent last answered: its pod's
// IP, while the Deployment stays at generation.
type archiveAddr struct {
	generation int64
	ip         string
}

// readArchive asks the archive's running pod for its state. It asks the
// pod that answered last, as long as the Deployment has not changed since
// and that pod still answers for this cluster, so that a pass at rest
// lists no pods; otherwise it lists them from the apiserver (the archive's
// pods are not in the controller's pod cache, which holds the members).
func (r *Reconciler) readArchive(ctx context.Context, c *etcdv1alpha1.EtcdCluster, dep *appsv1.Deployment) (agentapi.ArchiveState, error) {
	key := client.ObjectKeyFromObject(c)
	if v, ok := r.archiveAt.Load(key); ok {
		if at := v.(archiveAddr); at.generation == dep.Generation {
			if st, err := r.askArchive(ctx, c, at.ip); err == nil {
				return st, nil
			}
		}
		r.archiveAt.Delete(key)
	}
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(c.Namespace), client.MatchingLabels(archivePodLabels(c))); err != nil {
		return agentapi.ArchiveState{}, fmt.Errorf("listing the archive's pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			continue
		}
		st, err := r.askArchive(ctx, c, p.Status.PodIP)
		if err == nil {
			r.archiveAt.Store(key, archiveAddr{generation: dep.Generation, ip: p.Status.PodIP})
		}
		return st, err
	}
	return agentapi.ArchiveState{}, errors.New("no pod of the archive runs yet")
}

// askArchive reads the state of the agent at ip, and refuses the answer of
// an agent that archives for another cluster (an address that another pod
// took over).
func (r *Reconciler) askArchive(ctx context.Context, c *etcdv1alpha1.EtcdCluster, ip string) (agentapi.ArchiveState, error) {
	read := r.ArchiveState
	if read == nil {
		read = httpArchiveState
	}
	ctx, cancel := context.WithTimeout(ctx, agentapi.ArchiveStatusTimeout)
	defer cancel()
	st, err := read(ctx, ip)
	if err != nil {
		return agentapi.ArchiveState{}, err
	}
	if st.Owner != string(c.UID) {
		return agentapi.ArchiveState{}, fmt.Errorf("the agent at %s archives for owner %q, not for this cluster (%s)", ip, st.Owner, c.UID)
	}
	return st, nil
}

// archivePods counts the archive's pods that have not ended, terminating
// ones included: while one is left, the archive may still change.
func (r *Reconciler) archivePods(ctx context.Context, c *etcdv1alpha1.EtcdCluster) (int, error) {
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(c.Namespace), client.MatchingLabels(archivePodLabels(c))); err != nil {
		return 0, fmt.Errorf("listing the archive's pods: %w", err)
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n, nil
}

// httpArchiveState reads a `tend archive`'s state at podIP.
func httpArchiveState(ctx context.Context, podIP string) (agentapi.ArchiveState, error) {
	var st agentapi.ArchiveState
	url := "http://" + net.JoinHostPort(podIP, strconv.Itoa(archiveStatusPort)) + agentapi.ArchiveStatusPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s answered %s", url, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
		return st, fmt.Errorf("reading %s: %w", url, err)
	}
	return st, nil
}
