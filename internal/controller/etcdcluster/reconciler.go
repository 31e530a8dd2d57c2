package etcdcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/etcd"
	"github.com/tend-dev/tend/internal/fence"
	"github.com/tend-dev/tend/internal/ownwrite"
)

// Reconciler runs EtcdClusters.
type Reconciler struct {
	client.Client
	// APIReader reads what no cache holds: a Job's pods once it ended,
	// Events, PersistentVolumes, and objects a step must see as they are.
	APIReader client.Reader
	// Pods reads the member pods: the controller's own pod cache
	// (MemberPodCache), set by SetupWithManager.
	Pods     client.Reader
	Recorder events.EventRecorder
	// Clock times member health and certificate renewal. Nil means the real
	// clock.
	Clock clock.PassiveClock
	// Connect opens a client to one etcd cluster. Nil means etcd.New.
	Connect func(context.Context, etcd.Config) (Members, error)
	// Gate is passed by every etcd call that changes a cluster: a manager
	// that lost its Lease changes no membership (docs/reliability.md).
	// Nil is the manager's own fence (manager.GateOf).
	Gate fence.Gate
	// MemberChangeInterval: see Options.
	MemberChangeInterval time.Duration
	// AgentImage: see Options.
	AgentImage string
	// MaxOperatorRolls: see Options.
	MaxOperatorRolls int
	// ArchiveState: see Options.
	ArchiveState func(ctx context.Context, podIP string) (agentapi.ArchiveState, error)

	// nextLook is when each cluster's membership may next be looked at,
	// under MemberChangeInterval. Losing it on a restart only allows one
	// look sooner.
	nextLook sync.Map // types.NamespacedName → time.Time
	// rolls bounds the rolls that a new Tend causes (update.go).
	rolls rollSlots
	// revisions are each cluster's revisions over time, for compaction
	// by retention (maintenance.go). Losing them on a restart delays the
	// next compaction by one retention, as etcd's own compactor does.
	revisions sync.Map // types.NamespacedName → revisionLog
	// written is, per cluster, the resourceVersion of Tend's last write of
	// it, until the cache has caught up: a pass on an older copy waits.
	written ownwrite.Log
	// going are the member pods Tend deleted that the pod cache may not
	// show deleting yet (pods.go).
	going goingPods
	// archiveAt is where each cluster's archive agent last answered
	// (archive.go). Losing it costs one list of the archive's pods.
	archiveAt sync.Map // types.NamespacedName → archiveAddr
}

// Members is what the controller asks of an etcd cluster; *etcd.Client
// implements it.
type Members interface {
	Status(ctx context.Context) ([]etcd.MemberStatus, error)
	AddLearner(ctx context.Context, peerURL string) (etcd.Member, error)
	Promote(ctx context.Context, id etcd.MemberID) error
	Remove(ctx context.Context, id etcd.MemberID) error
	MoveLeader(ctx context.Context, to etcd.MemberID) error
	EnableAuth(ctx context.Context, rootPassword string) error
	SetRootPassword(ctx context.Context, password string) error
	DisableAuth(ctx context.Context) error
	Compact(ctx context.Context, rev int64) error
	Defragment(ctx context.Context, endpoint string) (etcd.Defragmented, error)
	DisarmNoSpace(ctx context.Context) (int, error)
	Close() error
}

// event records an Event about c.
func (r *Reconciler) event(c *etcdv1alpha1.EtcdCluster, eventType, reason, action, note string, args ...any) {
	r.Recorder.Eventf(c, nil, eventType, reason, action, note, args...)
}

// etcdTimeout bounds the etcd calls of a pass, and observeTimeout the
// status check among them: a member that does not answer within it is
// unhealthy, and a pass that reaches none comes back soon.
const (
	etcdTimeout    = 10 * time.Second
	observeTimeout = 5 * time.Second
)

// errStaleCluster: the cache's EtcdCluster is older than the apiserver's.
var errStaleCluster = errors.New("the cached EtcdCluster is older than the apiserver's")

// Requeue intervals. A pass never waits for etcd; it comes back.
const (
	// requeueStep follows a membership change or a wait for a learner:
	// the next step is usually possible within seconds.
	requeueStep = 2 * time.Second
	// requeueUnreachable is while no member answers, such as while the
	// first members start; for at most unreachableFastFor (see
	// unreachableRequeue).
	requeueUnreachable = 5 * time.Second
	unreachableFastFor = 2 * time.Minute
	// requeueStale is how soon a pass that read a cache behind Tend's own
	// last write of the cluster looks again, should that write's watch
	// event not bring it sooner.
	requeueStale = 500 * time.Millisecond
	// requeueSteady is the health check of a cluster that matches its
	// spec: it times member replacement and notices failures that no
	// Kubernetes event reports.
	requeueSteady = 30 * time.Second
	// requeueIdle spaces the health checks of a cluster whose members are
	// idle (see idle): at it, a check costs each member less than a
	// Prometheus scrape of its metrics at the default interval (a
	// minute) does.
	requeueIdle = time.Minute
	// nearQuota is the share of the quota from which a member's database
	// keeps its cluster at the steady interval.
	nearQuota = 0.75
)

// scope is what the phases of one pass share.
type scope struct {
	cluster *etcdv1alpha1.EtcdCluster
	// before is the cluster as the pass read it: the base of its status
	// write, and its resourceVersion the write's precondition.
	before *etcdv1alpha1.EtcdCluster
	now    time.Time
	// tls is the client configuration of Tend's certificate;
	// rootPassword is set when auth is on.
	tls          *tls.Config
	rootPassword string
	// sts is the members' StatefulSet, nil until it exists.
	sts *appsv1.StatefulSet
	// cli is the pass's client to the members, nil when none answered;
	// the pass closes it.
	cli Members
	// obs is what the status is computed from.
	obs observation
	// requeue is the shortest requeue any phase asked for.
	requeue time.Duration
	// released is set once the deletion took the finalizer off.
	released bool
	// target, when set, is the cluster as the members' template is built
	// while an upgrade is held (world.upgrade says how it stands).
	target *etcdv1alpha1.EtcdCluster
}

// template is the cluster that the members' template is built from.
func (s *scope) template() *etcdv1alpha1.EtcdCluster {
	if s.target != nil {
		return s.target
	}
	return s.cluster
}

// requeueAfter asks for a pass within d; the shortest request wins.
func (s *scope) requeueAfter(d time.Duration) {
	if d > 0 && (s.requeue == 0 || d < s.requeue) {
		s.requeue = d
	}
}

// rollSlots bounds how many clusters roll at once because Tend changed
// (not their spec): a new Tend must not restart every member everywhere
// at the same moment. It is a bound, not a record: after a restart, the
// rolls under way (status.update) take their slots back.
type rollSlots struct {
	mu    sync.Mutex
	taken map[types.NamespacedName]bool
}

// acquire takes a slot for key if fewer than limit are taken.
func (s *rollSlots) acquire(key types.NamespacedName, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken[key] {
		return true
	}
	if len(s.taken) >= max(limit, 1) {
		return false
	}
	s.keepLocked(key)
	return true
}

// keep marks key's roll as holding a slot, whatever the bound.
func (s *rollSlots) keep(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keepLocked(key)
}

func (s *rollSlots) keepLocked(key types.NamespacedName) {
	if s.taken == nil {
		s.taken = map[types.NamespacedName]bool{}
	}
	s.taken[key] = true
}

// release frees key's slot.
func (s *rollSlots) release(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.taken, key)
}

// unreachableRequeue is how soon a pass looks again at a cluster that no
// member answers: every requeueUnreachable while its members may be
// starting, and at the steady interval once that has lasted
// unreachableFastFor. A member that starts, ends or turns Ready starts a
// pass at once through the member pods' watch; the requeue only bounds
// what no pod shows. Without the bound each broken cluster of a fleet
// costs a pass and a connection attempt every 5 s for as long as it stays
// broken.
func unreachableRequeue(c *etcdv1alpha1.EtcdCluster, now time.Time) time.Duration {
	cond := apimeta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAvailable)
	if cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == etcdv1alpha1.ReasonUnreachable &&
		now.Sub(cond.LastTransitionTime.Time) >= unreachableFastFor {
		return requeueSteady
	}
	return requeueUnreachable
}
