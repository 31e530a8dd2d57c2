//go:build e2e

package etcd

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// observer keeps every distinct state of one EtcdCluster and every Event
// about it, each with the moment this process received it, from two
// watches. Measurements read the moments from it afterwards, so that a
// state that lasted less than any poll interval still counts.
type observer struct {
	mu  sync.Mutex
	obs []observation
	evs []event
	// changed is closed (and replaced) whenever something is added.
	changed chan struct{}
	// seen is the resourceVersion of each Event already counted, so that a
	// watch that starts over does not count the Events again.
	seen map[types.UID]string
	err  error
	// ready is closed once both watches have been established.
	ready chan struct{}
}

// watchFailures is how many watch calls in a row may fail, a second apart,
// before the observer gives up and fails the measurement.
const watchFailures = 30

// observe starts watching EtcdCluster ns/name and its Events until ctx ends.
func (r *rig) observe(ctx context.Context, ns, name string) *observer {
	o := &observer{changed: make(chan struct{}), seen: map[types.UID]string{}, ready: make(chan struct{})}
	var started sync.WaitGroup
	started.Add(2)
	go o.run(ctx, &started, func(ctx context.Context, rv string) (watch.Interface, error) {
		return r.wc.Watch(ctx, &etcdv1alpha1.EtcdClusterList{}, client.InNamespace(ns), &client.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name),
			Raw:           &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true},
		})
	}, o.addCluster)
	go o.run(ctx, &started, func(ctx context.Context, rv string) (watch.Interface, error) {
		return r.wc.Watch(ctx, &corev1.EventList{}, client.InNamespace(ns), &client.ListOptions{
			FieldSelector: fields.SelectorFromSet(fields.Set{"involvedObject.kind": "EtcdCluster", "involvedObject.name": name}),
			Raw:           &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true},
		})
	}, o.addEvent)
	go func() {
		started.Wait()
		close(o.ready)
	}()
	return o
}

// run keeps one watch going: from the last resourceVersion it saw, or from
// the current state when that is too old.
func (o *observer) run(ctx context.Context, started *sync.WaitGroup, watchFrom func(context.Context, string) (watch.Interface, error), add func(watch.EventType, runtime.Object)) {
	rv, failures, first := "", 0, true
	for ctx.Err() == nil {
		w, err := watchFrom(ctx, rv)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if failures++; failures > watchFailures {
				o.fail(err)
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		failures = 0
		if first {
			first = false
			started.Done()
		}
		rv = o.drain(w, rv, add)
		w.Stop()
	}
	if first {
		started.Done()
	}
}

// drain passes w's events to add until w ends, and returns the
// resourceVersion to go on from: "" after an error such as 410 Gone.
func (o *observer) drain(w watch.Interface, rv string, add func(watch.EventType, runtime.Object)) string {
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			return ""
		}
		if acc, err := meta.Accessor(ev.Object); err == nil {
			rv = acc.GetResourceVersion()
		}
		if ev.Type != watch.Bookmark {
			add(ev.Type, ev.Object)
		}
	}
	return rv
}

func (o *observer) addCluster(typ watch.EventType, obj runtime.Object) {
	at := time.Now()
	ec, ok := obj.(*etcdv1alpha1.EtcdCluster)
	if !ok {
		return
	}
	next := observation{at: at, generation: ec.Generation, deleted: typ == watch.Deleted, status: *ec.Status.DeepCopy()}
	o.mu.Lock()
	defer o.mu.Unlock()
	if n := len(o.obs); n > 0 {
		last := &o.obs[n-1]
		if last.generation == next.generation && last.deleted == next.deleted && equality.Semantic.DeepEqual(last.status, next.status) {
			return
		}
	}
	o.obs = append(o.obs, next)
	o.signal()
}

func (o *observer) addEvent(typ watch.EventType, obj runtime.Object) {
	at := time.Now()
	ev, ok := obj.(*corev1.Event)
	if !ok || typ == watch.Deleted {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen[ev.UID] == ev.ResourceVersion {
		return
	}
	o.seen[ev.UID] = ev.ResourceVersion
	o.evs = append(o.evs, event{at: at, typ: ev.Type, reason: ev.Reason, message: ev.Message})
	o.signal()
}

func (o *observer) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		o.err = err
	}
	o.signal()
}

// signal wakes the waiters; o.mu is held.
func (o *observer) signal() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// snapshot returns copies of what o has received so far.
func (o *observer) snapshot() ([]observation, []event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.obs), slices.Clone(o.evs)
}

// last returns the last state received; ok is false before the first.
func (o *observer) last() (observation, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.obs) == 0 {
		return observation{}, false
	}
	return o.obs[len(o.obs)-1], true
}

// waitReady waits until both watches run, so that no state of a cluster
// created afterwards goes unseen.
func (o *observer) waitReady(b *testing.B) {
	b.Helper()
	select {
	case <-o.ready:
	case <-time.After(time.Minute):
		b.Fatal("the watches of the EtcdCluster and its Events did not start within a minute")
	}
	o.mu.Lock()
	err := o.err
	o.mu.Unlock()
	if err != nil {
		b.Fatalf("watching the EtcdCluster: %v", err)
	}
}

// waitFor waits until a state received at or after since satisfies pred,
// and returns when it was received. It fails b when timeout passes first,
// when the watches fail, or when stop (which may be nil), called on every
// change and every second, returns an error: the awaited state can no
// longer come. The failure says what was seen last, and logs the timeline
// from origin.
func (o *observer) waitFor(b *testing.B, what string, origin, since time.Time, timeout time.Duration, pred func(*observation) bool, stop func([]observation) error) time.Time {
	b.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		o.mu.Lock()
		found, ok := firstAfter(o.obs, since, pred)
		var at time.Time
		if ok {
			at = found.at
		}
		err := o.err
		if err == nil && stop != nil {
			err = stop(o.obs)
		}
		changed := o.changed
		o.mu.Unlock()
		switch {
		case ok:
			return at
		case err != nil:
			o.logTimeline(b, origin, nil)
			b.Fatalf("waiting for %s: %v; last status seen: %s", what, err, o.lastSummary())
		case time.Now().After(deadline):
			o.logTimeline(b, origin, nil)
			b.Fatalf("waiting for %s: not within %s (-b8.timeout); last status seen: %s", what, timeout, o.lastSummary())
		}
		select {
		case <-changed:
		case <-tick.C:
		}
	}
}

func (o *observer) lastSummary() string {
	last, ok := o.last()
	if !ok {
		return "none: no EtcdCluster seen"
	}
	return summary(&last)
}

// logTimeline logs every state and Event received, and marks, as seconds
// after origin, in the order received (with -b8.timeline).
func (o *observer) logTimeline(b *testing.B, origin time.Time, marks []mark) {
	b.Helper()
	if !*flagTimeline {
		return
	}
	obs, evs := o.snapshot()
	b.Logf("timeline (seconds after the create):\n%s", renderTimeline(origin, obs, evs, marks))
}
