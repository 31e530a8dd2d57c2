package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/tend-dev/tend/internal/fence"
	"github.com/tend-dev/tend/internal/scheme"
)

const (
	me      = "tend-manager-a_11111111-1111-1111-1111-111111111111"
	another = "tend-manager-b_22222222-2222-2222-2222-222222222222"
	ns      = "default"
)

var (
	leaseKey = client.ObjectKey{Namespace: "tend-system", Name: "tend.tend.dev"}
	t0       = time.Date(2026, 11, 23, 13, 50, 0, 0, time.UTC)
)

// lease is the manager's Lease, of 15s, held by holder and renewed at
// renewed.
func lease(holder string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: leaseKey.Namespace, Name: leaseKey.Name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			LeaseDurationSeconds: ptr.To(int32(15)),
			RenewTime:            ptr.To(metav1.NewMicroTime(renewed)),
		},
	}
}

// fenceRig is a fenced client over a fake apiserver that holds the Lease,
// with a fake clock at t0.
type fenceRig struct {
	fenced client.Client
	store  client.Client // the fake, unfenced
	clock  *clocktesting.FakePassiveClock
	gets   atomic.Int32 // GETs of the Lease
	getErr atomic.Pointer[error]
	slow   atomic.Bool // GETs of the Lease take a while
	mu     sync.Mutex
	lost   []error // the hook's calls
}

func newFenceRig(l *coordinationv1.Lease, objs ...client.Object) *fenceRig {
	r := &fenceRig{clock: clocktesting.NewFakePassiveClock(t0)}
	store := fake.NewClientBuilder().
		WithScheme(scheme.Scheme).
		WithObjects(append(objs, l)...).
		WithStatusSubresource(&corev1.Pod{}).
		Build()
	r.store = store
	// What the fence reads the Lease with: the test's own reads are not
	// counted.
	live := interceptor.NewClient(store, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*coordinationv1.Lease); ok {
				r.gets.Add(1)
				if r.slow.Load() {
					// Long enough for the other writers to arrive.
					time.Sleep(20 * time.Millisecond)
				}
				if err := r.getErr.Load(); err != nil {
					return *err
				}
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	f := newFence(live, leaseKey, me, 5*time.Second, r.clock, func(err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.lost = append(r.lost, err)
	})
	r.fenced = fencedClient{Client: r.store, fence: f}
	return r
}

func (r *fenceRig) hookCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lost)
}

func (r *fenceRig) step(d time.Duration) { r.clock.SetTime(r.clock.Now().Add(d)) }

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// exists reports whether the fake apiserver holds obj's namesake.
func (r *fenceRig) exists(g Gomega, obj client.Object) bool {
	err := r.store.Get(context.Background(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
	if apierrors.IsNotFound(err) {
		return false
	}
	g.Expect(err).NotTo(HaveOccurred())
	return true
}

// TestFenceLetsTheLeaderWrite: with the Lease held by this process and
// fresh, concurrent writes all pass, on one read of the Lease.
func TestFenceLetsTheLeaderWrite(t *testing.T) {
	g := NewWithT(t)
	r := newFenceRig(lease(me, t0.Add(-2*time.Second)))
	r.slow.Store(true)
	const n = 20
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs <- r.fenced.Create(context.Background(), configMap(fmt.Sprintf("cm-%d", i))) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	for i := range n {
		g.Expect(r.exists(g, configMap(fmt.Sprintf("cm-%d", i)))).To(BeTrue())
	}
	g.Expect(r.gets.Load()).To(BeEquivalentTo(1), "concurrent writers share one check")
	g.Expect(r.hookCalls()).To(BeZero())
}

// TestFenceChecksAgainAfterTheInterval: a check lets writes through for an
// interval; the first write after it reads the Lease again, and finds it
// taken.
func TestFenceChecksAgainAfterTheInterval(t *testing.T) {
	g := NewWithT(t)
	r := newFenceRig(lease(me, t0))
	ctx := context.Background()
	g.Expect(r.fenced.Create(ctx, configMap("first"))).To(Succeed())
	g.Expect(r.gets.Load()).To(BeEquivalentTo(1))

	// Another process takes the Lease. Within the interval, the fence
	// does not know yet: that is its bound.
	taken := &coordinationv1.Lease{}
	g.Expect(r.store.Get(ctx, leaseKey, taken)).To(Succeed())
	taken.Spec = lease(another, t0).Spec
	g.Expect(r.store.Update(ctx, taken)).To(Succeed())
	r.step(fenceInterval - time.Millisecond)
	g.Expect(r.fenced.Create(ctx, configMap("within"))).To(Succeed())
	g.Expect(r.gets.Load()).To(BeEquivalentTo(1))

	r.step(time.Millisecond)
	err := r.fenced.Create(ctx, configMap("after"))
	g.Expect(err).To(MatchError(ErrNotLeader))
	g.Expect(err).To(MatchError(ContainSubstring(another)))
	g.Expect(r.gets.Load()).To(BeEquivalentTo(2))
	g.Expect(r.exists(g, configMap("after"))).To(BeFalse())
	g.Expect(r.hookCalls()).To(Equal(1))
}

// TestFenceRefusesALostLease: a Lease that another holds, or that has
// expired, refuses the write, and every one after it without another
// read, and calls the hook once.
func TestFenceRefusesALostLease(t *testing.T) {
	noRenewal := lease(me, t0)
	noRenewal.Spec.RenewTime = nil
	for name, l := range map[string]*coordinationv1.Lease{
		"held by another":     lease(another, t0.Add(-time.Second)),
		"released":            lease("", t0.Add(-time.Second)),
		"ours, expiring now":  lease(me, t0.Add(-15*time.Second)),
		"ours, expired":       lease(me, t0.Add(-15*time.Second).Add(-time.Nanosecond)),
		"ours, long expired":  lease(me, t0.Add(-time.Hour)),
		"ours, never renewed": noRenewal,
		"another's, expired":  lease(another, t0.Add(-time.Hour)),
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := newFenceRig(l)
			ctx := context.Background()
			for i := range 3 {
				cm := configMap(fmt.Sprintf("cm-%d", i))
				g.Expect(r.fenced.Create(ctx, cm)).To(MatchError(ErrNotLeader))
				g.Expect(r.exists(g, cm)).To(BeFalse())
				r.step(2 * fenceInterval)
			}
			g.Expect(r.gets.Load()).To(BeEquivalentTo(1), "a lost Lease stays lost")
			g.Expect(r.hookCalls()).To(Equal(1))
			g.Expect(r.lost[0]).To(MatchError(ErrNotLeader))
		})
	}
}

// TestFenceRefusesWhenTheLeaseCannotBeRead: unable to prove that it leads,
// the fence refuses the write but does not stop the process; the next
// write checks again.
func TestFenceRefusesWhenTheLeaseCannotBeRead(t *testing.T) {
	g := NewWithT(t)
	r := newFenceRig(lease(me, t0))
	ctx := context.Background()
	unreachable := errors.New("dial tcp 10.96.0.1:443: connect: connection refused")
	r.getErr.Store(&unreachable)

	err := r.fenced.Create(ctx, configMap("unproven"))
	g.Expect(err).To(MatchError(unreachable))
	g.Expect(err).NotTo(MatchError(ErrNotLeader))
	g.Expect(r.exists(g, configMap("unproven"))).To(BeFalse())
	// No interval passes: a failed read is no check.
	g.Expect(r.fenced.Create(ctx, configMap("unproven"))).To(MatchError(unreachable))
	g.Expect(r.gets.Load()).To(BeEquivalentTo(2))

	r.getErr.Store(nil)
	g.Expect(r.fenced.Create(ctx, configMap("proven"))).To(Succeed())
	g.Expect(r.exists(g, configMap("proven"))).To(BeTrue())
	g.Expect(r.gets.Load()).To(BeEquivalentTo(3))
	g.Expect(r.hookCalls()).To(BeZero())
}

// TestFenceStopsAtTheLeasesExpiry: a check does not let writes through past
// the Lease's expiry, even within the interval.
func TestFenceStopsAtTheLeasesExpiry(t *testing.T) {
	g := NewWithT(t)
	r := newFenceRig(lease(me, t0.Add(-15*time.Second).Add(fenceInterval/2)))
	ctx := context.Background()
	g.Expect(r.fenced.Create(ctx, configMap("before"))).To(Succeed())
	r.step(fenceInterval / 2)
	g.Expect(r.fenced.Create(ctx, configMap("after"))).To(MatchError(ErrNotLeader))
	g.Expect(r.exists(g, configMap("after"))).To(BeFalse())
	g.Expect(r.gets.Load()).To(BeEquivalentTo(2))
	g.Expect(r.hookCalls()).To(Equal(1))
}

// TestFenceGuardsEveryWrite: with the Lease lost, no write of any kind
// reaches the apiserver, and reads still do.
func TestFenceGuardsEveryWrite(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: map[string]string{"v": "1"}},
		Status:     corev1.PodStatus{Message: "1"},
	}
	changed := func() *corev1.Pod {
		p := pod.DeepCopy()
		p.Labels["v"] = "2"
		p.Status.Message = "2"
		return p
	}
	patch := client.MergeFrom(pod)
	writes := map[string]func(context.Context, client.Client) error{
		"Create": func(ctx context.Context, c client.Client) error { return c.Create(ctx, configMap("new")) },
		"Update": func(ctx context.Context, c client.Client) error { return c.Update(ctx, changed()) },
		"Patch":  func(ctx context.Context, c client.Client) error { return c.Patch(ctx, changed(), patch) },
		"Apply": func(ctx context.Context, c client.Client) error {
			return c.Apply(ctx, corev1ac.Pod("p", ns).WithLabels(map[string]string{"v": "2"}), client.FieldOwner("test"))
		},
		"Delete": func(ctx context.Context, c client.Client) error { return c.Delete(ctx, pod.DeepCopy()) },
		"DeleteAllOf": func(ctx context.Context, c client.Client) error {
			return c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns))
		},
		"Status().Update": func(ctx context.Context, c client.Client) error { return c.Status().Update(ctx, changed()) },
		"Status().Patch":  func(ctx context.Context, c client.Client) error { return c.Status().Patch(ctx, changed(), patch) },
		"Status().Apply": func(ctx context.Context, c client.Client) error {
			return c.Status().Apply(ctx, corev1ac.Pod("p", ns).WithStatus(corev1ac.PodStatus().WithMessage("2")), client.FieldOwner("test"))
		},
		"SubResource(status).Update": func(ctx context.Context, c client.Client) error {
			return c.SubResource("status").Update(ctx, changed())
		},
		"SubResource(eviction).Create": func(ctx context.Context, c client.Client) error {
			return c.SubResource("eviction").Create(ctx, pod.DeepCopy(), &policyv1.Eviction{})
		},
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := newFenceRig(lease(another, t0), pod.DeepCopy())
			ctx := context.Background()
			g.Expect(write(ctx, r.fenced)).To(MatchError(ErrNotLeader))

			got := &corev1.Pod{}
			g.Expect(r.store.Get(ctx, client.ObjectKeyFromObject(pod), got)).To(Succeed())
			g.Expect(got.Labels).To(Equal(pod.Labels))
			g.Expect(got.Status).To(Equal(pod.Status))
			g.Expect(r.exists(g, configMap("new"))).To(BeFalse())

			// Reads are not fenced.
			g.Expect(r.fenced.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})).To(Succeed())
			g.Expect(r.fenced.List(ctx, &corev1.PodList{})).To(Succeed())
		})
	}
}

// recordingLock is a leader-election lock that counts its writes.
type recordingLock struct {
	resourcelock.Interface
	writes int
}

func (l *recordingLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	l.writes++
	return nil
}

func (l *recordingLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	l.writes++
	return nil
}

func (l *recordingLock) Describe() string { return leaseKey.String() }

// TestFencedLockWritesNothingOnceLost: once the fence found the Lease lost,
// the leader elector cannot renew it, nor release it on the way out over
// its new holder's.
func TestFencedLockWritesNothingOnceLost(t *testing.T) {
	g := NewWithT(t)
	inner := &recordingLock{}
	lost := make(chan struct{})
	lock := &fencedLock{Interface: inner, lost: lost}
	ctx := context.Background()
	g.Expect(lock.Update(ctx, resourcelock.LeaderElectionRecord{})).To(Succeed())
	g.Expect(lock.Create(ctx, resourcelock.LeaderElectionRecord{})).To(Succeed())
	g.Expect(inner.writes).To(Equal(2))

	close(lost)
	g.Expect(lock.Update(ctx, resourcelock.LeaderElectionRecord{})).To(MatchError(ErrNotLeader))
	g.Expect(lock.Create(ctx, resourcelock.LeaderElectionRecord{})).To(MatchError(ErrNotLeader))
	g.Expect(inner.writes).To(Equal(2))
}

// TestWriteFenceStopsTheManager: the runnable that New adds returns, once
// the fence found the Lease lost, an error that stops the manager, and
// nothing when the manager stops for another reason.
func TestWriteFenceStopsTheManager(t *testing.T) {
	g := NewWithT(t)
	w := &writeFence{lost: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g.Expect(w.wait(ctx)).To(Succeed())

	why := fmt.Errorf("%w: the Lease is held by %q", ErrNotLeader, another)
	w.stop(why)
	g.Expect(w.wait(context.Background())).To(MatchError(why))
}

// TestFenceWaitsNoLongerThanItsWriter: a writer whose context ends while
// another's check is under way gives up.
func TestFenceWaitsNoLongerThanItsWriter(t *testing.T) {
	g := NewWithT(t)
	r := newFenceRig(lease(me, t0))
	f := r.fenced.(fencedClient).fence
	f.sem <- struct{}{} // a check under way
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	g.Expect(r.fenced.Create(ctx, configMap("late"))).To(MatchError(context.DeadlineExceeded))
	<-f.sem
	g.Expect(r.exists(g, configMap("late"))).To(BeFalse())
}

// TestGateIsTheClientsFence: the Gate that GateOf gives the controllers, for
// their writes to SQS and etcd, is their client's fence: one check of the
// Lease serves both, and once either finds it lost, both refuse, with
// ErrNotLeader, and the manager is told once.
func TestGateIsTheClientsFence(t *testing.T) {
	g := NewWithT(t)
	r := newFenceRig(lease(me, t0))
	mgr := fencedManager{client: r.fenced, fence: r.fenced.(fencedClient).fence}
	gate := GateOf(mgr)
	ctx := context.Background()
	g.Expect(gate.Allow(ctx)).To(Succeed())
	g.Expect(r.fenced.Create(ctx, configMap("leading"))).To(Succeed())
	g.Expect(r.gets.Load()).To(BeEquivalentTo(1), "one check serves the Gate and the client")

	// Another process takes the Lease; after the interval, the Gate is
	// the first to look, and the client's writes are refused too.
	taken := &coordinationv1.Lease{}
	g.Expect(r.store.Get(ctx, leaseKey, taken)).To(Succeed())
	taken.Spec = lease(another, t0).Spec
	g.Expect(r.store.Update(ctx, taken)).To(Succeed())
	r.step(fenceInterval)
	err := gate.Allow(ctx)
	g.Expect(err).To(MatchError(fence.ErrNotLeader))
	g.Expect(err).To(MatchError(ErrNotLeader))
	g.Expect(err).To(MatchError(ContainSubstring(another)))
	g.Expect(r.fenced.Create(ctx, configMap("after"))).To(MatchError(ErrNotLeader))
	g.Expect(r.exists(g, configMap("after"))).To(BeFalse())
	g.Expect(r.gets.Load()).To(BeEquivalentTo(2))
	g.Expect(r.hookCalls()).To(Equal(1))

	// A manager that New did not fence (leader election off) gives the
	// open Gate.
	g.Expect(GateOf(struct{ ctrl.Manager }{})).To(Equal(fence.Open{}))
	g.Expect(fence.Open{}.Allow(ctx)).To(Succeed())
}
