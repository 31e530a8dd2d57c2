package podset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	podsetcontroller "github.com/tend-dev/tend/internal/controller/podset"
	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/scheme"
)

// BenchmarkB6 measures the heap that Tend's manager spends per cached pod.
// The manager runs in this process, built by internal/manager.New exactly
// as `tend manager` builds it: its pod cache holds only pods with the
// PodSet label, trimmed to the fields the podset controller reads
// (metadata less managedFields, spec.nodeName, status.phase and the Ready
// condition). Its PodSets create the pods
// (so they carry what real ones do: owner reference, labels, two field
// managers, kwok's status), and flagB6Noise unlabelled pods stand beside
// them. The heap in use after a full GC is read with the manager holding
// flagB6Small and then flagB6Large pods; the difference over the
// difference in pods is the cost per pod, free of the manager's fixed cost.
// For comparison it reads what other caches of every pod hold per pod: a
// plain controller-runtime cache (managedFields kept), and one that only
// strips them.
//
// controller-runtime allows one controller of a name per process, so B6
// measures once per process, whatever -benchtime says.
func BenchmarkB6(b *testing.B) {
	r := getRig(b)
	b6Once.Do(func() { b6Result = r.runHeap(b) })
	if b.Failed() {
		return
	}
	res := b6Result
	b.ReportMetric(res.perPod, "B/pod")
	b.ReportMetric(res.plainPerPod, "plain-B/pod")
	cond := fmt.Sprintf("%d → %d pods cached, %d unlabelled pods beside them", res.small, res.large, res.noise)
	record(b,
		row{
			bench: "B6", measure: "heap bytes per cached pod (Tend: labelled pods only, trimmed to the fields PodSet reads)",
			podset: fmt.Sprintf("%.0f", res.perPod), goal: "≤ 2560", met: yes(res.perPod <= 2560), conditions: cond,
		},
		row{
			bench: "B6", measure: "heap bytes per pod, first measurement (manager's fixed cost included)",
			podset: fmt.Sprintf("%.0f", res.firstPerPod), conditions: fmt.Sprintf("0 → %d pods", res.small),
		},
		row{
			bench: "B6", measure: "unlabelled pods in Tend's cache",
			podset: fmt.Sprint(res.cachedNoise), goal: "0", met: yes(res.cachedNoise == 0), conditions: cond,
		},
		row{
			bench: "B6", measure: "heap bytes per pod, plain cache (managedFields kept, every pod)",
			podset: fmt.Sprintf("%.0f", res.plainPerPod), ratio: ratio(res.perPod, res.plainPerPod),
			conditions: fmt.Sprintf("%d pods held; PodSet/RS column: Tend ÷ plain", res.plainPods),
		},
		row{
			bench: "B6", measure: "heap bytes per pod, cache that strips managedFields, every pod",
			podset: fmt.Sprintf("%.0f", res.strippedPerPod), ratio: ratio(res.perPod, res.strippedPerPod),
			conditions: fmt.Sprintf("%d pods held; PodSet/RS column: Tend ÷ stripped", res.plainPods),
		},
		row{
			bench: "B6", measure: "heap MiB for this cluster's pods: Tend / plain",
			podset:     fmt.Sprintf("%.1f / %.1f", res.perPod*float64(res.large)/(1<<20), res.plainPerPod*float64(res.plainPods)/(1<<20)),
			conditions: cond,
		},
	)
}

var (
	b6Once   sync.Once
	b6Result heapResult
)

type heapResult struct {
	small, large, noise int
	// perPod is the heap per pod between the two measurements; firstPerPod
	// from an empty cache to the first, with the fixed cost.
	perPod, firstPerPod float64
	// cachedNoise is how many unlabelled pods Tend's cache held.
	cachedNoise int
	// plainPerPod and strippedPerPod are per pod of the other caches
	// (whole pods; managedFields stripped), which held plainPods pods.
	plainPerPod, strippedPerPod float64
	plainPods                   int
}

func (r *rig) runHeap(b *testing.B) heapResult {
	b.Helper()
	ctx := context.Background()
	res := heapResult{small: *flagB6Small, large: *flagB6Large, noise: *flagB6Noise}
	ns := r.namespace(b, "b6")

	// The unlabelled pods, Ready, before the manager starts.
	t := track(b, r.cs, ns)
	err := parallel(res.noise, 64, func(i int) error {
		tmpl := template("noise", r.nodes[i%len(r.nodes)])
		delete(tmpl.Labels, setLabel)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "noise-", Namespace: ns, Labels: tmpl.Labels}, Spec: tmpl.Spec}
		return r.c.Create(ctx, pod)
	})
	if err != nil {
		b.Fatalf("creating the unlabelled pods: %v", err)
	}
	if _, _, err := t.waitReady(ctx, res.noise, 10*time.Minute, func() error { return nil }); err != nil {
		b.Fatal(err)
	}
	t.close()

	mgr, stop := r.startManager(b)
	defer stop()
	var pods corev1.PodList
	if err := mgr.GetClient().List(ctx, &pods, client.InNamespace(ns)); err != nil {
		b.Fatalf("listing pods from the manager's cache: %v", err)
	}
	h0 := heapAlloc()

	cached := func(want int) int {
		t := track(b, r.cs, ns)
		if _, _, err := t.waitReady(ctx, res.noise+want, 10*time.Minute, func() error { return nil }); err != nil {
			b.Fatal(err)
		}
		t.close()
		if err := r.waitIdle(ctx, mgr, ns, want/100); err != nil {
			b.Fatal(err)
		}
		if err := mgr.GetClient().List(ctx, &pods, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		n := len(pods.Items)
		pods = corev1.PodList{}
		return n
	}
	// Sets of 100 pods: the first flagB6Small/100, then the rest.
	all, _ := r.sets(podSets, ns, shape{res.large / 100, 100})
	if err := r.createAll(ctx, all[:res.small/100]); err != nil {
		b.Fatal(err)
	}
	n1 := cached(res.small)
	h1 := heapAlloc()
	if err := r.createAll(ctx, all[res.small/100:]); err != nil {
		b.Fatal(err)
	}
	n2 := cached(res.large)
	h2 := heapAlloc()
	res.cachedNoise = n2 - res.large
	res.perPod = float64(int64(h2)-int64(h1)) / float64(n2-n1)
	res.firstPerPod = float64(int64(h1)-int64(h0)) / float64(n1)
	b.Logf("Tend's cache: %d pods → %d B heap, %d pods → %d B, %d pods → %d B", 0, h0, n1, h1, n2, h2)

	var plain, stripped float64
	if plain, res.plainPods, err = plainCacheBytes(ctx, r, nil); err != nil {
		b.Fatal(err)
	}
	if stripped, _, err = plainCacheBytes(ctx, r, cache.TransformStripManagedFields()); err != nil {
		b.Fatal(err)
	}
	res.plainPerPod = plain / float64(res.plainPods)
	res.strippedPerPod = stripped / float64(res.plainPods)

	stop()
	if err := r.deleteAll(ctx, podSets, ns); err != nil {
		b.Fatal(err)
	}
	return res
}

var loggerOnce sync.Once

// startManager runs Tend's manager with the podset controller in this
// process, as `tend manager --controllers=podset` would with its default
// flags, and returns once it has started.
func (r *rig) startManager(b *testing.B) (ctrl.Manager, func()) {
	b.Helper()
	loggerOnce.Do(func() {
		f, err := os.Create(filepath.Join(r.dir, "manager-in-process.log"))
		if err != nil {
			b.Fatal(err)
		}
		ctrl.SetLogger(zap.New(zap.WriteTo(f)))
	})
	opts := r.env.ManagerOptions()
	psOpts := podsetcontroller.DefaultOptions()
	mgr, err := manager.New(r.env.Config, opts, []manager.Controller{podsetcontroller.Controller(&psOpts)})
	if err != nil {
		b.Fatalf("building the manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		b.Fatal("the manager's cache never synced")
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				b.Errorf("the manager: %v", err)
			}
		})
	}
	return mgr, stop
}

// waitIdle waits until sets PodSets in ns report Ready in their status and
// the manager has had nothing to do for two seconds.
func (r *rig) waitIdle(ctx context.Context, mgr ctrl.Manager, ns string, sets int) error {
	last := -1.0
	quiet := 0
	return wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := r.statusConverged(ctx, podSets, ns)
		if err != nil || n < sets {
			return false, err
		}
		passes, depth, err := inProcessWork()
		if err != nil {
			return false, err
		}
		if passes == last && depth == 0 {
			quiet++
		} else {
			quiet = 0
		}
		last = passes
		return quiet >= 2, nil
	})
}

// inProcessWork reads this process's controller-runtime metrics: podset
// passes so far, and the podset queue's depth.
func inProcessWork() (passes, depth float64, err error) {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return 0, 0, err
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			podset := false
			for _, l := range m.GetLabel() {
				if (l.GetName() == "controller" || l.GetName() == "name") && l.GetValue() == podsetcontroller.Name {
					podset = true
				}
			}
			if !podset {
				continue
			}
			switch f.GetName() {
			case "controller_runtime_reconcile_total":
				passes += m.GetCounter().GetValue()
			case "workqueue_depth":
				depth += m.GetGauge().GetValue()
			}
		}
	}
	return passes, depth, nil
}

// plainCacheBytes starts a controller-runtime cache of every pod in the
// cluster, whose objects go through transform (nil: kept whole), and
// returns the heap it holds once synced and how many pods that is.
func plainCacheBytes(ctx context.Context, r *rig, transform toolscache.TransformFunc) (float64, int, error) {
	opts := cache.Options{Scheme: scheme.Scheme, DefaultTransform: transform}
	c, err := cache.New(r.env.Config, opts)
	if err != nil {
		return 0, 0, err
	}
	before := heapAlloc()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	if _, err := c.GetInformer(ctx, &corev1.Pod{}); err != nil {
		cancel()
		return 0, 0, err
	}
	if !c.WaitForCacheSync(ctx) {
		cancel()
		return 0, 0, errors.New("the plain cache never synced")
	}
	after := heapAlloc()
	var pods corev1.PodList
	err = c.List(ctx, &pods)
	cancel()
	if startErr := <-done; startErr != nil && err == nil {
		err = startErr
	}
	return float64(int64(after) - int64(before)), len(pods.Items), err
}

// heapAlloc returns the bytes of live heap objects after full collections.
func heapAlloc() uint64 {
	var m runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
