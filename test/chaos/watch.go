//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	err      error
	cancel   context.CancelFunc
	done     chan struct{}
}

// watchPods starts a podWatch; stop ends it.
func watchPods(c client.WithWatch, ns string, sel client.MatchingLabels, allowed int) *podWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &podWatch{live: map[string]bool{}, allowed: allowed, orphans: map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	go w.run(ctx, c, ns, sel)
	return w
}

func (w *podWatch) run(ctx context.Context, c client.WithWatch, ns string, sel client.MatchingLabels) {
	defer close(w.done)
	for ctx.Err() == nil {
		// Each round lists, then watches from the list's version: a watch
		// that the apiserver ends is taken up again without a gap.
		var list corev1.PodList
		if err := c.List(ctx, &list, client.InNamespace(ns), sel); err != nil {
			w.fail(err)
			time.Sleep(time.Second)
			continue
		}
		w.mu.Lock()
		w.live = map[string]bool{}
		w.mu.Unlock()
		for i := range list.Items {
			w.observe(watch.Added, &list.Items[i])
		}
		wi, err := c.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns), sel, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
		if err != nil {
			w.fail(err)
			time.Sleep(time.Second)
			continue
		}
		for ev := range wi.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				w.observe(ev.Type, p)
			}
		}
		wi.Stop()
	}
}

func (w *podWatch) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
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
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil && !strings.Contains(w.err.Error(), "context canceled") {
		return w.err
	}
	return nil
}
