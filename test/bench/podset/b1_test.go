package podset

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// BenchmarkB1 scales sets from 0 to their size: one set of 1000 pods, and
// 100 sets of 100, each first under PodSet (tend manager) and then under
// ReplicaSet (kube-controller-manager), with the same budget; with no client
// limit it also measures the raw client's create rate first, the physical
// limit of this apiserver.
func BenchmarkB1(b *testing.B) {
	cases := []struct {
		shape  shape
		budget budget
	}{
		{shape{1, 1000}, equalBudget},
		{shape{1, 1000}, unlimitedBudget},
		{shape{100, 100}, unlimitedBudget},
	}
	if *flagB1Full {
		cases = append(cases, struct {
			shape  shape
			budget budget
		}{shape{100, 100}, equalBudget})
	}
	for _, tc := range cases {
		tc.shape.pods = max(1, int(float64(tc.shape.pods)**flagB1Scale))
		b.Run(tc.shape.String()+"/"+tc.budget.name, func(b *testing.B) {
			r := getRig(b)
			var raw, ps, rs scaleUp
			for range b.N {
				if tc.budget.qps < 0 {
					// The raw rate is measured on at most flagRawPods pods,
					// and their Ready time only where it is the shape's:
					// 10000 more creates and deletes would cost a minute of
					// the run and tell the same rate.
					n := min(tc.shape.total(), *flagRawPods)
					raw = r.runRaw(b, n, n == tc.shape.total())
				}
				ps = r.runScaleUp(b, podSets, tc.shape, tc.budget)
				rs = r.runScaleUp(b, replicaSets, tc.shape, tc.budget)
			}
			reportB1(b, tc.shape, tc.budget, raw, ps, rs)
		})
	}
}

// scaleUp is what one controller, or the raw client, did in one phase.
type scaleUp struct {
	pods int
	// created and ready are when the last pod appeared, and when the last
	// turned Ready, in the harness's pod watch, from the phase's first write
	// (the sets' creation); status is when every set's status said so.
	created, ready, status time.Duration
	writes                 ControllerWrites
	// kubelet counts kwok's writes (pod status, Leases), for context.
	kubelet float64
	// reconciles counts PodSet's passes (tend's own metric); 0 for the rest.
	reconciles float64
	// maxOver is the most pods above desired that any set had.
	maxOver int
	// cpu is the controller's CPU time in the window, kwokCPU kwok's.
	cpu, kwokCPU time.Duration
}

func (s scaleUp) createRate() float64 { return float64(s.pods) / s.created.Seconds() }

func (s scaleUp) writesPerPod() float64 { return s.writes.Total() / float64(s.pods) }

// runScaleUp starts k's controller with bud, creates the sets of sh, and
// measures until every pod is Ready, every status says so, and the
// controller has stopped writing. It stops the controller and deletes the
// sets and pods before it returns.
func (r *rig) runScaleUp(b *testing.B, k kind, sh shape, bud budget) scaleUp {
	b.Helper()
	ctx := context.Background()
	c := r.startController(b, k, bud)
	ns := r.namespace(b, "b1-"+strings.ToLower(k.String()))
	t := track(b, r.cs, ns)
	sets, desired := r.sets(k, ns, sh)
	t.expect(desired)
	before, err := r.requests(ctx)
	if err != nil {
		b.Fatal(err)
	}
	passes, err := c.reconciles(ctx)
	if err != nil {
		b.Fatal(err)
	}
	cpu, kwokCPU := c.cpu(), r.kwok.cpu()
	t.mark()
	profiled := r.profile(ctx, c, sh.String())
	start := time.Now()
	if err := r.createAll(ctx, sets); err != nil {
		b.Fatalf("creating the %ss: %v", k, err)
	}
	res := scaleUp{pods: sh.total()}
	if res.created, res.ready, err = t.waitReady(ctx, sh.total(), 15*time.Minute, c.err); err != nil {
		b.Fatalf("%s %s: %v; its log: %s\n%s", k, sh, err, c.log, tail(c.log, 20))
	}
	if err := r.waitStatus(ctx, c, ns, sh.sets, 5*time.Minute); err != nil {
		b.Fatalf("%s %s: waiting for the status to show every pod Ready: %v", k, sh, err)
	}
	res.status = time.Since(start)
	after, err := r.quiesce(ctx, k)
	if err != nil {
		b.Fatal(err)
	}
	if res.reconciles, err = c.reconciles(ctx); err != nil {
		b.Fatal(err)
	}
	res.reconciles -= passes
	res.cpu, res.kwokCPU = c.cpu()-cpu, r.kwok.cpu()-kwokCPU
	if err := profiled(); err != nil {
		b.Fatal(err)
	}
	window := after.Sub(before)
	res.writes = window.Controller(k.resource(), sh.sets)
	res.kubelet = window.Sum(func(q Request) bool { return q.IsWrite() && WriterOf(q) == WriterKubelet })
	res.maxOver = t.now().maxOver
	b.Logf("%s %s %s: Ready in %s s (created %s s, status %s s); writes %+v; %g passes; CPU %s s, kwok's %s s; window %v",
		k, sh, bud.name, seconds(res.ready), seconds(res.created), seconds(res.status), res.writes, res.reconciles,
		seconds(res.cpu), seconds(res.kwokCPU), window.ByResource(Request.IsWrite))
	cleanup := time.Now()
	t.close()
	if err := c.stop(); err != nil {
		b.Fatal(err)
	}
	if err := r.deleteAll(ctx, k, ns); err != nil {
		b.Fatal(err)
	}
	b.Logf("cleanup took %s s", seconds(time.Since(cleanup)))
	return res
}

// runRaw creates n pods of the sets' template with no client-side limit,
// from flagRawWorkers goroutines at once: the rate at which this apiserver
// takes pods, which no controller can beat. With waitReady it also waits
// until kwok has made them Ready.
func (r *rig) runRaw(b *testing.B, n int, waitReady bool) scaleUp {
	b.Helper()
	ctx := context.Background()
	cfg := rest.CopyConfig(r.cfg)
	// The controllers' clients send built-in types as protobuf; so does this.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ns := r.namespace(b, "b1-raw")
	t := track(b, r.cs, ns)
	before, err := r.requests(ctx)
	if err != nil {
		b.Fatal(err)
	}
	t.mark()
	err = parallel(n, *flagRawWorkers, func(i int) error {
		tmpl := template(fmt.Sprintf("raw%03d", i%100), r.nodes[i%len(r.nodes)])
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "raw-", Namespace: ns, Labels: tmpl.Labels},
			Spec:       tmpl.Spec,
		}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatalf("raw creates: %v", err)
	}
	res := scaleUp{pods: n}
	if waitReady {
		if res.created, res.ready, err = t.waitReady(ctx, n, 15*time.Minute, func() error { return nil }); err != nil {
			b.Fatal(err)
		}
	} else if res.created, err = t.waitSeen(ctx, n, 15*time.Minute); err != nil {
		b.Fatal(err)
	}
	res.status = res.ready
	after, err := r.requests(ctx)
	if err != nil {
		b.Fatal(err)
	}
	window := after.Sub(before)
	res.writes.Pods = window.Sum(func(q Request) bool { return q.IsWrite() && q.Target() == "pods" })
	res.kubelet = window.Sum(func(q Request) bool { return q.IsWrite() && WriterOf(q) == WriterKubelet })
	b.Logf("raw %d pods, %d workers: created in %s s (%.0f pods/s), Ready in %s s (0: not waited for)",
		n, *flagRawWorkers, seconds(res.created), res.createRate(), seconds(res.ready))
	t.close()
	if err := r.deletePods(ctx, ns); err != nil {
		b.Fatal(err)
	}
	return res
}

func reportB1(b *testing.B, sh shape, bud budget, raw, ps, rs scaleUp) {
	b.ReportMetric(ps.ready.Seconds(), "PodSet-s")
	b.ReportMetric(rs.ready.Seconds(), "RS-s")
	b.ReportMetric(ps.writesPerPod(), "PodSet-writes/pod")
	b.ReportMetric(rs.writesPerPod(), "RS-writes/pod")
	name := "B1 " + sh.String()
	cond := bud.String()
	rows := []row{
		{
			bench: name, measure: "seconds to all Ready",
			podset: seconds(ps.ready), replicaset: seconds(rs.ready), ratio: ratio(ps.ready.Seconds(), rs.ready.Seconds()),
			goal: "PodSet ≤ RS", met: yes(ps.ready <= rs.ready), conditions: cond,
		},
		{
			bench: name, measure: "API writes per pod",
			podset: fmt.Sprintf("%.3f", ps.writesPerPod()), replicaset: fmt.Sprintf("%.3f", rs.writesPerPod()),
			ratio: ratio(ps.writesPerPod(), rs.writesPerPod()),
			goal:  "PodSet < RS", met: yes(ps.writesPerPod() < rs.writesPerPod()), conditions: cond,
		},
		{
			bench: name, measure: "writes: pods / status / events / other (409s)",
			podset: breakdown(ps.writes), replicaset: breakdown(rs.writes), conditions: cond,
		},
	}
	if bud.qps < 0 {
		b.ReportMetric(raw.createRate(), "raw-pods/s")
		b.ReportMetric(100*ps.createRate()/raw.createRate(), "PodSet-%raw")
		b.ReportMetric(100*rs.createRate()/raw.createRate(), "RS-%raw")
		if raw.ready > 0 {
			rows = append(rows, row{
				bench: name, measure: "seconds to all Ready (raw: its own creates)",
				raw: seconds(raw.ready), conditions: cond,
			})
		}
		rows = append(rows,
			row{
				bench: name, measure: "create rate, pods/s (% of raw)",
				podset:     fmt.Sprintf("%.0f (%.0f%%)", ps.createRate(), 100*ps.createRate()/raw.createRate()),
				replicaset: fmt.Sprintf("%.0f (%.0f%%)", rs.createRate(), 100*rs.createRate()/raw.createRate()),
				ratio:      ratio(ps.createRate(), rs.createRate()),
				raw:        fmt.Sprintf("%.0f (%d pods)", raw.createRate(), raw.pods),
				goal:       "PodSet ≥ 85% of raw", met: yes(ps.createRate() >= 0.85*raw.createRate()), conditions: cond,
			})
	}
	rows = append(rows, row{
		bench: name, measure: "controller CPU seconds (kwok's)",
		podset:     fmt.Sprintf("%s (%s)", seconds(ps.cpu), seconds(ps.kwokCPU)),
		replicaset: fmt.Sprintf("%s (%s)", seconds(rs.cpu), seconds(rs.kwokCPU)),
		ratio:      ratio(ps.cpu.Seconds(), rs.cpu.Seconds()), conditions: cond,
	})
	if ps.reconciles > 0 {
		rows = append(rows, row{
			bench: name, measure: "PodSet passes per pod", podset: fmt.Sprintf("%.3f", ps.reconciles/float64(ps.pods)), conditions: cond,
		})
	}
	record(b, rows...)
}

// breakdown formats a controller's writes by kind.
func breakdown(w ControllerWrites) string {
	return fmt.Sprintf("%.0f / %.0f / %.0f / %.0f (%.0f)", w.Pods, w.Status, w.Events, w.Other, w.Conflicts)
}
