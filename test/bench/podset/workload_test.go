package podset

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	"github.com/tend-dev/tend/internal/testing/loopback"
)

// kind is one of the two controllers compared.
type kind int

const (
	podSets kind = iota
	replicaSets
)

func (k kind) String() string {
	if k == podSets {
		return "PodSet"
	}
	return "ReplicaSet"
}

// resource is the plural that the apiserver's metrics name.
func (k kind) resource() string {
	if k == podSets {
		return "podsets"
	}
	return "replicasets"
}

// budget is the client budget that both controllers get, each through its
// own flags: QPS and burst of the apiserver client, and workers.
type budget struct {
	name    string
	qps     float64 // negative: no client-side limit
	burst   int
	workers int
}

var (
	// equalBudget is kube-controller-manager's default: --kube-api-qps=20
	// --kube-api-burst=30 --concurrent-replicaset-syncs=5.
	equalBudget = budget{name: "qps20", qps: 20, burst: 30, workers: 5}
	// unlimitedBudget turns the client-side limiters off on both sides and
	// keeps 5 workers.
	unlimitedBudget = budget{name: "unlimited", qps: -1, burst: 0, workers: 5}
)

func (b budget) String() string {
	if b.qps < 0 {
		return fmt.Sprintf("no client limit, %d workers", b.workers)
	}
	return fmt.Sprintf("QPS %g burst %d, %d workers", b.qps, b.burst, b.workers)
}

// controller is a running controller: tend manager or
// kube-controller-manager, as a child process.
type controller struct {
	*process
	kind kind
	// metrics is tend's metrics URL; kube-controller-manager serves none
	// here. pprof is tend's pprof address, with -profile only.
	metrics, pprof string
}

// startController starts k's controller with budget bud and returns once it
// has brought a one-pod set to Ready, so that a phase's clock never counts
// the process's start or its caches' first sync.
func (r *rig) startController(b *testing.B, k kind, bud budget) *controller {
	b.Helper()
	c := r.launch(b, k, bud, *flagProfile != "")
	if err := r.warmUp(b, c); err != nil {
		b.Fatalf("warming up %s: %v", k, err)
	}
	return c
}

// launch starts k's controller with budget bud, tend with its pprof
// handlers served when pprof is set, and returns at once: F2 times a
// restart from the process's start.
func (r *rig) launch(b *testing.B, k kind, bud budget, pprof bool) *controller {
	b.Helper()
	c := &controller{kind: k}
	var err error
	switch k {
	case podSets:
		port, perr := loopback.Port()
		if perr != nil {
			b.Fatal(perr)
		}
		c.metrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
		// tend always serves the PodSet conversion webhook; it serves it
		// where envtest points the CRD, as the controller's tests do.
		wh := r.env.WebhookOptions()
		args := []string{"manager", "--controllers=podset",
			"--webhook-cert-mode=external", fmt.Sprintf("--webhook-port=%d", wh.Port), "--webhook-cert-dir=" + wh.CertDir,
			"--kubeconfig=" + r.kubeconfig,
			fmt.Sprintf("--kube-api-qps=%g", bud.qps), fmt.Sprintf("--kube-api-burst=%d", bud.burst),
			fmt.Sprintf("--podset-workers=%d", bud.workers),
			fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port), "--metrics-secure=false",
			"--health-probe-bind-address=0"}
		if pprof {
			pport, perr := loopback.Port()
			if perr != nil {
				b.Fatal(perr)
			}
			c.pprof = fmt.Sprintf("http://127.0.0.1:%d", pport)
			args = append(args, fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", pport))
		}
		c.process, err = r.run("tend", r.tend, args...)
	case replicaSets:
		// The ReplicaSet controller alone. It needs no garbage collector:
		// the harness deletes the pods itself (see cleanup).
		c.process, err = r.run("kube-controller-manager", r.kcm,
			"--kubeconfig="+r.kubeconfig, "--controllers=replicaset-controller",
			"--leader-elect=false", "--secure-port=0",
			fmt.Sprintf("--kube-api-qps=%g", bud.qps), fmt.Sprintf("--kube-api-burst=%d", bud.burst),
			fmt.Sprintf("--concurrent-replicaset-syncs=%d", bud.workers))
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.stop() })
	return c
}

// warmUp has c bring a one-pod set to Ready in a namespace of its own, then
// deletes both.
func (r *rig) warmUp(b *testing.B, c *controller) error {
	ctx := context.Background()
	ns := r.namespace(b, "warmup")
	set := newSet(c.kind, ns, "warmup", 1, r.nodes[0])
	if err := r.c.Create(ctx, set); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.err(); err != nil {
			return false, err
		}
		var pods corev1.PodList
		if err := r.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return len(pods.Items) == 1 && isReady(&pods.Items[0]), nil
	})
	if err != nil {
		return fmt.Errorf("%w; its log: %s\n%s", err, c.log, tail(c.log, 20))
	}
	return r.deleteAll(ctx, c.kind, ns)
}

// profile starts, with -profile, CPU profiles of the apiserver and of c
// (tend only: kube-controller-manager serves nothing here) for
// -profile.seconds, written to the -profile directory as
// <phase>-<kind>-apiserver.pprof and <phase>-<kind>-tend.pprof, with
// tend's allocations in the window as <phase>-<kind>-tend-allocs.pprof. The
// returned function waits for them.
func (r *rig) profile(ctx context.Context, c *controller, phase string) func() error {
	if *flagProfile == "" {
		return func() error { return nil }
	}
	secs := strconv.Itoa(max(1, int(flagProfileFor.Seconds())))
	prefix := filepath.Join(*flagProfile, phase+"-"+strings.ToLower(c.kind.String()))
	var g errgroup.Group
	g.Go(func() error {
		raw, err := r.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", secs).Timeout(flagProfileFor.Abs() + time.Minute).DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("profiling the apiserver: %w", err)
		}
		return os.WriteFile(prefix+"-apiserver.pprof", raw, 0o644)
	})
	if c.pprof != "" {
		g.Go(func() error {
			raw, err := loopback.Get(c.pprof + "/debug/pprof/profile?seconds=" + secs)
			if err != nil {
				return fmt.Errorf("profiling tend: %w", err)
			}
			return os.WriteFile(prefix+"-tend.pprof", []byte(raw), 0o644)
		})
		// What tend allocated in the same window, for its GC's share.
		g.Go(func() error {
			raw, err := loopback.Get(c.pprof + "/debug/pprof/allocs?seconds=" + secs)
			if err != nil {
				return fmt.Errorf("profiling tend's allocations: %w", err)
			}
			return os.WriteFile(prefix+"-tend-allocs.pprof", []byte(raw), 0o644)
		})
	}
	return g.Wait
}

// reconciles returns how many passes tend's podset controller has run.
func (c *controller) reconciles(ctx context.Context) (float64, error) {
	if c.metrics == "" {
		return 0, nil
	}
	text, err := c.scrape(ctx)
	if err != nil {
		return 0, err
	}
	s, err := ParseSamples(text, "controller_runtime_reconcile_total")
	if err != nil {
		return 0, err
	}
	return Sum(s, map[string]string{"controller": "podset"}), nil
}

// scrape reads tend's /metrics page.
func (c *controller) scrape(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.metrics, nil)
	if err != nil {
		return "", err
	}
	// Plain text: on the loopback, compressing each page (Go's client asks
	// for gzip by default) only spends tend's CPU, which F2 times, on the
	// harness's reads.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("reading tend's metrics: %w", err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("reading tend's metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("reading tend's metrics: %s", resp.Status)
	}
	return string(text), nil
}

// template is the pod that every set and the raw client run: bound to a
// kwok Node by nodeName, so that no scheduler takes part on either side.
func template(set, node string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
			"app.kubernetes.io/name": "bench", setLabel: set,
		}},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "sleep", Image: "docker.io/library/busybox:1.35.0", Command: []string{"sleep", "3600"},
			}},
		},
	}
}

// newSet returns a PodSet or a ReplicaSet of replicas pods on node.
func newSet(k kind, ns, name string, replicas int32, node string) client.Object {
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	if k == podSets {
		return &appsv1alpha1.PodSet{ObjectMeta: meta, Spec: appsv1alpha1.PodSetSpec{
			Replicas: ptr.To(replicas), Template: template(name, node),
		}}
	}
	return &appsv1.ReplicaSet{ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{
		Replicas: ptr.To(replicas),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{setLabel: name}},
		Template: template(name, node),
	}}
}

// shape is how many sets of how many pods a phase runs.
type shape struct{ sets, pods int }

func (s shape) String() string { return fmt.Sprintf("%dx%d", s.sets, s.pods) }

func (s shape) total() int { return s.sets * s.pods }

// sets returns the shape's sets in ns, spread over the nodes, and their
// desired counts by name.
func (r *rig) sets(k kind, ns string, s shape) ([]client.Object, map[string]int) {
	objs := make([]client.Object, s.sets)
	desired := map[string]int{}
	for i := range objs {
		name := fmt.Sprintf("s%03d", i)
		objs[i] = newSet(k, ns, name, int32(s.pods), r.nodes[i%len(r.nodes)])
		desired[name] = s.pods
	}
	return objs, desired
}

// createAll creates objs, 16 at a time.
func (r *rig) createAll(ctx context.Context, objs []client.Object) error {
	return parallel(len(objs), 16, func(i int) error { return r.c.Create(ctx, objs[i]) })
}

// parallel calls fn(0) … fn(n-1) on workers goroutines and returns the
// first error.
func parallel(n, workers int, fn func(i int) error) error {
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	for range min(workers, n) {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil
				mu.Unlock()
				if i >= n || stop {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("item %d: %w", i, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}

// statusConverged counts the sets in ns whose status reports every desired
// pod Ready for their current generation.
func (r *rig) statusConverged(ctx context.Context, k kind, ns string) (int, error) {
	n := 0
	if k == podSets {
		var list appsv1alpha1.PodSetList
		if err := r.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return 0, err
		}
		for _, ps := range list.Items {
			if ps.Status.ObservedGeneration == ps.Generation && ps.Status.ReadyReplicas == ps.DesiredReplicas() &&
				ps.Status.Replicas == ps.DesiredReplicas() {
				n++
			}
		}
		return n, nil
	}
	var list appsv1.ReplicaSetList
	if err := r.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	for _, rs := range list.Items {
		if rs.Status.ObservedGeneration == rs.Generation && rs.Status.ReadyReplicas == *rs.Spec.Replicas &&
			rs.Status.Replicas == *rs.Spec.Replicas {
			n++
		}
	}
	return n, nil
}

// waitStatus waits until every one of sets sets in ns reports its pods Ready
// in its status.
func (r *rig) waitStatus(ctx context.Context, c *controller, ns string, sets int, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.err(); err != nil {
			return false, err
		}
		n, err := r.statusConverged(ctx, c.kind, ns)
		return n == sets, err
	})
}

// quiesce waits until the controller's writes stop (no new one for two
// seconds, at most 20 seconds), so that a window ends after the status and
// Event writes that trail the last pod, and returns the counters then.
func (r *rig) quiesce(ctx context.Context, k kind) (Requests, error) {
	last, err := r.requests(ctx)
	if err != nil {
		return nil, err
	}
	quiet := 0
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && quiet < 2; {
		time.Sleep(time.Second)
		cur, err := r.requests(ctx)
		if err != nil {
			return nil, err
		}
		if cur.Sub(last).Controller(k.resource(), 0).Total() == 0 {
			quiet++
		} else {
			quiet = 0
		}
		last = cur
	}
	return last, nil
}

// deleteAll deletes the sets of kind k in ns, then their pods at once
// (grace period 0: kwok would delete terminating pods too, but a phase's
// cleanup need not wait for it), and waits until the pods are gone. No
// garbage collector runs, and none is needed: a set is deleted in the
// background (no finalizer to wait for), and the harness deletes its pods.
func (r *rig) deleteAll(ctx context.Context, k kind, ns string) error {
	var set client.Object = &appsv1alpha1.PodSet{}
	if k == replicaSets {
		set = &appsv1.ReplicaSet{}
	}
	if err := r.c.DeleteAllOf(ctx, set, client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		return fmt.Errorf("deleting the sets: %w", err)
	}
	return r.deletePods(ctx, ns)
}

// deletePods deletes every pod of ns at once (grace period 0), from 64
// goroutines: the apiserver's deletecollection deletes one pod at a time,
// which for 10000 pods takes longer than the phase it cleans up after.
func (r *rig) deletePods(ctx context.Context, ns string) error {
	var pods metav1.PartialObjectMetadataList
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := r.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing the pods to delete: %w", err)
	}
	err := parallel(len(pods.Items), 64, func(i int) error {
		err := r.cs.CoreV1().Pods(ns).Delete(ctx, pods.Items[i].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("deleting the pods: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := r.c.List(ctx, &pods, client.InNamespace(ns), client.Limit(1)); err != nil {
			return false, err
		}
		return len(pods.Items) == 0, nil
	})
}

// seconds formats a duration in seconds.
func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) }
