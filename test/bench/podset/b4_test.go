package podset

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkB4 leaves converged PodSets (flagB4Sets of one pod each, under
// tend manager with no client limit) idle for flagB4Idle and counts the
// controller's writes meanwhile, from the apiserver's counters, and its
// passes, from tend's own metrics. The goal is none of either: a converged
// PodSet is written only when something changes.
func BenchmarkB4(b *testing.B) {
	r := getRig(b)
	var writes ControllerWrites
	var passes float64
	var idle time.Duration
	for range b.N {
		writes, passes, idle = r.runIdle(b, shape{*flagB4Sets, 1})
	}
	perMinute := writes.Total() / idle.Minutes()
	b.ReportMetric(perMinute, "writes/min")
	b.ReportMetric(passes/idle.Minutes(), "passes/min")
	record(b, row{
		bench: "B4", measure: fmt.Sprintf("API writes per minute, %d converged sets idle", *flagB4Sets),
		podset: fmt.Sprintf("%.1f", perMinute), goal: "0", met: yes(writes.Total() == 0),
		conditions: fmt.Sprintf("%s idle; %.0f passes/min; %s", idle.Round(time.Second), passes/idle.Minutes(), unlimitedBudget),
	})
}

// runIdle brings sh's PodSets to Ready, waits until tend stops writing,
// then counts its writes and passes over flagB4Idle.
func (r *rig) runIdle(b *testing.B, sh shape) (ControllerWrites, float64, time.Duration) {
	b.Helper()
	ctx := context.Background()
	c := r.startController(b, podSets, unlimitedBudget)
	ns := r.namespace(b, "b4")
	t := track(b, r.cs, ns)
	sets, desired := r.sets(podSets, ns, sh)
	t.expect(desired)
	if err := r.createAll(ctx, sets); err != nil {
		b.Fatal(err)
	}
	if _, _, err := t.waitReady(ctx, sh.total(), 10*time.Minute, c.err); err != nil {
		b.Fatal(err)
	}
	if err := r.waitStatus(ctx, c, ns, sh.sets, 5*time.Minute); err != nil {
		b.Fatal(err)
	}
	before, err := r.quiesce(ctx, podSets)
	if err != nil {
		b.Fatal(err)
	}
	passes, err := c.reconciles(ctx)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	time.Sleep(*flagB4Idle)
	after, err := r.requests(ctx)
	if err != nil {
		b.Fatal(err)
	}
	idle := time.Since(start)
	passesAfter, err := c.reconciles(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.err(); err != nil {
		b.Fatal(err)
	}
	window := after.Sub(before)
	writes := window.Controller("podsets", 0)
	b.Logf("idle %s: controller writes %+v; every write %v", idle, writes, window.ByResource(Request.IsWrite))
	if err := c.stop(); err != nil {
		b.Fatal(err)
	}
	t.close()
	if err := r.deleteAll(ctx, podSets, ns); err != nil {
		b.Fatal(err)
	}
	return writes, passesAfter - passes, idle
}
