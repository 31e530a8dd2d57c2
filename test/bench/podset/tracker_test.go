package podset

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// setLabel names, on every pod of the benchmarks, the set it belongs to: a
// PodSet, a ReplicaSet, or a batch of the raw client's pods.
const setLabel = "bench.tend.dev/set"

// tracker follows a namespace's pods through a watch (an informer) and
// keeps, as events arrive, what the benchmarks measure: when the n-th pod
// appeared and turned Ready, and how far any set's live pods ever went above
// its desired count. It reads nothing by polling.
type tracker struct {
	start time.Time
	// close stops the watch, waits for its goroutines and drops its copy
	// of the pods: B6 measures the heap without it.
	close func()

	mu      sync.Mutex
	desired map[string]int // by set
	pods    map[types.UID]podState
	live    map[string]int // live pods by set
	seen    int            // distinct pods ever seen
	ready   int            // live and Ready now
	// seenAt[i] and readyAt[i] are when the (i+1)-th pod appeared and when
	// the count of live Ready pods first reached i+1, since start.
	seenAt, readyAt []time.Duration
	// maxOver is the most live pods any set had above its desired count, and
	// overSets how many sets ever went above it.
	maxOver int
	overSet map[string]bool
}

type podState struct {
	name, set   string
	live, ready bool
	running     bool // phase Running
}

// track starts watching ns's pods and returns once the watch has listed
// them. desired is each set's desired count, for the overshoot; it may grow
// later through expect.
func track(b *testing.B, cs kubernetes.Interface, ns string) *tracker {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t := &tracker{
		desired: map[string]int{}, pods: map[types.UID]podState{},
		live: map[string]int{}, overSet: map[string]bool{},
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTransform(func(o any) (any, error) {
			if p, ok := o.(*corev1.Pod); ok {
				p.ManagedFields = nil
			}
			return o, nil
		}))
	inf := factory.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.observe(o, false) },
		UpdateFunc: func(_, o any) { t.observe(o, false) },
		DeleteFunc: func(o any) { t.observe(o, true) },
	})
	if err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		b.Fatalf("the pod watch of %s never synced", ns)
	}
	t.mark()
	var once sync.Once
	t.close = func() {
		once.Do(func() {
			cancel()
			factory.Shutdown()
			// The cleanup keeps this function, and so the factory and
			// its copy of every pod, until the benchmark ends: let go.
			factory, inf = nil, nil
			t.mu.Lock()
			t.pods = map[types.UID]podState{}
			t.mu.Unlock()
		})
	}
	b.Cleanup(t.close)
	return t
}

// expect sets the desired count of sets; overshoot is measured from now.
func (t *tracker) expect(desired map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range desired {
		t.desired[k] = v
	}
}

// mark makes now the origin of the times that waitReady returns; call it
// just before the phase's first write.
func (t *tracker) mark() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.start = time.Now()
}

func (t *tracker) observe(o any, deleted bool) {
	if tomb, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o, deleted = tomb.Obj, true
	}
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	old, known := t.pods[p.UID]
	cur := podState{name: p.Name, set: p.Labels[setLabel], running: p.Status.Phase == corev1.PodRunning, live: !deleted && isLive(p), ready: !deleted && isLive(p) && isReady(p)}
	if !known && !deleted {
		t.seen++
		t.seenAt = append(t.seenAt, now.Sub(t.start))
	}
	if deleted {
		delete(t.pods, p.UID)
	} else {
		t.pods[p.UID] = cur
	}
	if old.live != cur.live {
		if cur.live {
			t.live[cur.set]++
		} else {
			t.live[old.set]--
		}
	}
	if old.ready != cur.ready {
		if cur.ready {
			t.ready++
			if t.ready > len(t.readyAt) {
				t.readyAt = append(t.readyAt, now.Sub(t.start))
			}
		} else {
			t.ready--
		}
	}
	if want, ok := t.desired[cur.set]; ok && cur.live {
		if over := t.live[cur.set] - want; over > 0 {
			t.overSet[cur.set] = true
			if over > t.maxOver {
				t.maxOver = over
			}
		}
	}
}

// isLive reports whether a pod counts towards its set: neither terminating
// nor finished, as both controllers count.
func isLive(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// progress is a snapshot of the tracker's counts.
type progress struct {
	seen, ready, live int
	maxOver, overSets int
}

func (t *tracker) now() progress {
	t.mu.Lock()
	defer t.mu.Unlock()
	live := 0
	for _, n := range t.live {
		live += n
	}
	return progress{seen: t.seen, ready: t.ready, live: live, maxOver: t.maxOver, overSets: len(t.overSet)}
}

// randomRunning picks a live pod in phase Running at random, and says
// whether it is Ready.
func (t *tracker) randomRunning(rng *rand.Rand) (name string, ready, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.pods) == 0 {
		return "", false, false
	}
	skip := rng.IntN(len(t.pods))
	for _, p := range t.pods {
		if skip--; skip < 0 && p.live && p.running {
			return p.name, p.ready, true
		}
	}
	return "", false, false
}

// unready returns the names of the live pods in phase Running that are not
// Ready.
func (t *tracker) unready() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var names []string
	for _, p := range t.pods {
		if p.live && p.running && !p.ready {
			names = append(names, p.name)
		}
	}
	return names
}

// waitReady waits until n pods are live and Ready, checking alive (the
// controller's process) on the way, and returns how long after the origin
// the n-th pod appeared and the n-th turned Ready.
func (t *tracker) waitReady(ctx context.Context, n int, timeout time.Duration, alive func() error) (created, ready time.Duration, err error) {
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		p := t.now()
		return p.ready >= n && p.live >= n, nil
	})
	if err != nil {
		p := t.now()
		return 0, 0, fmt.Errorf("waiting for %d Ready pods (seen %d, live %d, Ready %d): %w", n, p.seen, p.live, p.ready, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seenAt[n-1], t.readyAt[n-1], nil
}

// waitSeen waits until n pods have appeared and returns how long after the
// origin the n-th did.
func (t *tracker) waitSeen(ctx context.Context, n int, timeout time.Duration) (time.Duration, error) {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return t.now().seen >= n, nil
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for %d pods (seen %d): %w", n, t.now().seen, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seenAt[n-1], nil
}
