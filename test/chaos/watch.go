//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tend-dev/tend/internal/scheme"
)

// podWatch follows the pods of one selector in one namespace through a
// watch, and at every event compares the pods that are not terminating with
// the most the test allows at that moment: the larger of the old and the
// new spec while a scale is under way, the spec once it has converged.
type podWatch struct {
	mu       sync.Mutex
	live     map[string]bool
	allowed  int
	maxAbove int
	evidence string
	orphans  map[string]bool
	events   int
	errs     firstErr
	cancel   context.CancelFunc
	done     chan struct{}
}

// watchPods starts a podWatch and returns once it has the pods that exist
// now; stop ends it.
func watchPods(t *testing.T, c client.WithWatch, ns string, sel client.MatchingLabels, allowed int) *podWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &podWatch{live: map[string]bool{}, allowed: allowed, orphans: map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	listed := newListed()
	go w.run(ctx, c, ns, sel, listed.done)
	listed.wait(t, "the pods of "+ns, w.stop)
	return w
}

func (w *podWatch) run(ctx context.Context, c client.WithWatch, ns string, sel client.MatchingLabels, listed func()) {
	defer close(w.done)
	follow(ctx, c, &corev1.PodList{}, []client.ListOption{client.InNamespace(ns), sel}, func() {
		w.mu.Lock()
		w.live = map[string]bool{}
		w.mu.Unlock()
	}, func(typ watch.EventType, obj client.Object) {
		if p, ok := obj.(*corev1.Pod); ok {
			w.observe(typ, p)
		}
	}, listed, w.errs.set)
}

// listedSignal tells a watch's starter that its first list was observed:
// what the test counts from then on is measured against what existed
// before it acted, not against a list that came in late.
type listedSignal struct {
	once sync.Once
	ch   chan struct{}
}

func newListed() *listedSignal { return &listedSignal{ch: make(chan struct{})} }

// done marks the list observed; later calls do nothing.
func (l *listedSignal) done() { l.once.Do(func() { close(l.ch) }) }

// listWait bounds the wait for a watch's first list.
const listWait = time.Minute

// wait returns once the first list was observed; past listWait it stops
// the watch and fails t.
func (l *listedSignal) wait(t *testing.T, what string, stop func() error) {
	t.Helper()
	select {
	case <-l.ch:
	case <-time.After(listWait):
		err := stop()
		t.Fatalf("the watch of %s did not list them within %s: %v", what, listWait, err)
	}
}

// follow lists the objects of list's kind, then watches from the list's
// version, until ctx ends: a watch that the apiserver ends is taken up again
// without a gap. Before each list it calls reset; every listed object comes
// to observe as Added, then listed is called; every watch event comes to
// observe as it came.
func follow(ctx context.Context, c client.WithWatch, list client.ObjectList, opts []client.ListOption,
	reset func(), observe func(watch.EventType, client.Object), listed func(), fail func(error)) {
	for ctx.Err() == nil {
		if err := c.List(ctx, list, opts...); err != nil {
			fail(err)
			time.Sleep(time.Second)
			continue
		}
		reset()
		items, err := apimeta.ExtractList(list)
		if err != nil {
			fail(err)
			return
		}
		for _, it := range items {
			if o, ok := it.(client.Object); ok {
				observe(watch.Added, o)
			}
		}
		listed()
		wopts := append(slices.Clone(opts), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})
		wi, err := c.Watch(ctx, list, wopts...)
		if err != nil {
			fail(err)
			time.Sleep(time.Second)
			continue
		}
		for ev := range wi.ResultChan() {
			if o, ok := ev.Object.(client.Object); ok {
				observe(ev.Type, o)
			}
		}
		wi.Stop()
	}
}

// firstErr keeps the first error a watch met.
type firstErr struct {
	mu  sync.Mutex
	err error
}

func (f *firstErr) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

// get returns the error, unless it is the cancellation that stopped the
// watch.
func (f *firstErr) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil && !strings.Contains(f.err.Error(), "context canceled") {
		return f.err
	}
	return nil
}

func (w *podWatch) observe(typ watch.EventType, p *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events++
	if typ == watch.Deleted || p.DeletionTimestamp != nil {
		delete(w.live, p.Name)
	} else {
		w.live[p.Name] = true
		if metav1.GetControllerOf(p) == nil {
			w.orphans[p.Name] = true
		}
	}
	if above := len(w.live) - w.allowed; above > w.maxAbove {
		w.maxAbove = above
		w.evidence = fmt.Sprintf("%d live pods %v while at most %d were allowed, at %s", len(w.live), w.names(), w.allowed, time.Now().UTC().Format(time.RFC3339Nano))
	}
}

func (w *podWatch) names() []string {
	var n []string
	for k := range w.live {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

// setAllowed changes the most pods allowed from now on.
func (w *podWatch) setAllowed(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.allowed = n
}

// result returns the most pods seen above the allowed number, what was
// seen then, the pods ever seen without a controller, and the events seen.
func (w *podWatch) result() (int, string, []string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var orphans []string
	for k := range w.orphans {
		orphans = append(orphans, k)
	}
	slices.Sort(orphans)
	return w.maxAbove, w.evidence, orphans, w.events
}

func (w *podWatch) stop() error {
	w.cancel()
	<-w.done
	return w.errs.get()
}

// watchClient is a client of the cluster that can watch.
func watchClient(t *testing.T) client.WithWatch {
	t.Helper()
	wc, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return wc
}

// uidWatch follows the objects of one kind in one namespace and records
// every UID that each name has had: a Job made twice, or a pod re-created,
// shows as a name with more than one.
type uidWatch struct {
	mu     sync.Mutex
	uids   map[string]map[types.UID]bool
	errs   firstErr
	cancel context.CancelFunc
	done   chan struct{}
}

// watchUIDs starts a uidWatch of list's kind and returns once it has the
// objects that exist now, so that counts taken next are a true baseline;
// stop ends it.
func watchUIDs(t *testing.T, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) *uidWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	u := &uidWatch{uids: map[string]map[types.UID]bool{}, cancel: cancel, done: make(chan struct{})}
	listed := newListed()
	go func() {
		defer close(u.done)
		follow(ctx, c, list, opts, func() {}, func(_ watch.EventType, o client.Object) {
			u.mu.Lock()
			defer u.mu.Unlock()
			if u.uids[o.GetName()] == nil {
				u.uids[o.GetName()] = map[types.UID]bool{}
			}
			u.uids[o.GetName()][o.GetUID()] = true
		}, listed.done, u.errs.set)
	}()
	listed.wait(t, fmt.Sprintf("%T", list), u.stop)
	return u
}

// counts returns how many UIDs each name seen so far has had.
func (u *uidWatch) counts() map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]int, len(u.uids))
	for name, set := range u.uids {
		out[name] = len(set)
	}
	return out
}

func (u *uidWatch) stop() error {
	u.cancel()
	<-u.done
	return u.errs.get()
}
