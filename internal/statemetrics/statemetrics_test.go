package statemetrics

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// listRecorder is a reader that records the options of each List.
type listRecorder struct {
	client.Reader
	opts []*client.ListOptions
}

func (r *listRecorder) List(_ context.Context, _ client.ObjectList, opts ...client.ListOption) error {
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	r.opts = append(r.opts, o)
	return nil
}

func TestCollectorListsWithoutCopies(t *testing.T) {
	rec := &listRecorder{}
	src := Source{Collect: func(ctx context.Context, r client.Reader, _ *Emitter) error {
		var pods corev1.PodList
		return r.List(ctx, &pods, client.InNamespace("a"))
	}}
	ch := make(chan prometheus.Metric, 1)
	NewCollector(rec, src).Collect(ch)
	if len(rec.opts) != 1 {
		t.Fatalf("the source listed %d times, want once", len(rec.opts))
	}
	o := rec.opts[0]
	if o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy {
		t.Errorf("a scrape's List copies the cache's objects: UnsafeDisableDeepCopy is %v, want true", o.UnsafeDisableDeepCopy)
	}
	if o.Namespace != "a" {
		t.Errorf("the source's own options were lost: namespace %q, want %q", o.Namespace, "a")
	}
}
