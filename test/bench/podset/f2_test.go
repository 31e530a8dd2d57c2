package podset

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	podsetcontroller "github.com/tend-dev/tend/internal/controller/podset"
	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/testing/loopback"
)

var (
	flagF2Sets    = flag.Int("f2.sets", 1000, "F2: PodSets")
	flagF2Pods    = flag.Int("f2.pods", 100, "F2: pods per PodSet")
	flagF2Samples = flag.Int("f2.samples", 3, "F2: samples (each: raw client, then PodSet with idle window and restart); cells print median (min–max)")
	flagF2Idle    = flag.Duration("f2.idle", time.Minute, "F2: how long the settled sets are left idle while writes are counted")
	flagF2Stale   = flag.Int("f2.stale", 100, "F2: sets whose status is made stale (one pod turned unready) while the manager is down, before its restart")
	flagF2Limit   = flag.String("f2.memory-limit", "512Mi", "F2: the manager's container memory limit, given to it as the Deployment does (MEMORY_LIMIT, in bytes): it sets its soft memory limit from it; 0 gives none")
)

// f2Goals are issue F2's goals.
const (
	// f2HeapMiB is the most heap in use that the manager may hold with every
	// pod cached.
	f2HeapMiB = 512
	// f2Time is the most PodSet may take to bring every pod Ready, as a
	// share of the raw client's time for the same pods.
	f2Time = 1.1
)

// pollEvery is how often F2 reads tend's metrics during a restart: the
// resolution of the restart's times.
const pollEvery = 200 * time.Millisecond

// BenchmarkF2 runs 100,000 pods under one manager: flagF2Sets PodSets of
// flagF2Pods pods (1000 × 100), no client limit, 5 workers. Each sample
// first has the raw client create the same number of pods and times them
// to Ready; then it starts tend manager, creates the PodSets and times
// them to Ready, leaves them idle for flagF2Idle counting every write but
// kwok's, reads the manager's heap, stops it, turns one pod of each of
// flagF2Stale sets unready (their status is now stale), and restarts it:
// the writes of the restart, and the time from the new process's start to
// its first pass and until it has looked at every set.
func BenchmarkF2(b *testing.B) {
	sh := shape{*flagF2Sets, *flagF2Pods}
	limit, err := resource.ParseQuantity(*flagF2Limit)
	if err != nil {
		b.Fatalf("-f2.memory-limit: %v", err)
	}
	if limit.Value() > 0 {
		// The manager inherits it, as the Deployment's Downward API gives it.
		b.Setenv(manager.MemoryLimitEnv, fmt.Sprint(limit.Value()))
	}
	r := getRig(b)
	var samples []f2Sample
	for i := range b.N * max(1, *flagF2Samples) {
		start := time.Now()
		note("F2 %s: sample %d: the raw client", sh, i+1)
		s := f2Sample{raw: r.runRaw(b, sh.total(), true)}
		note("F2 %s: sample %d: raw Ready in %s s; PodSet", sh, i+1, seconds(s.raw.ready))
		r.runF2(b, sh, i, &s)
		samples = append(samples, s)
		b.Logf("F2 %s: sample %d took %s", sh, i+1, time.Since(start).Round(time.Second))
		note("F2 %s: sample %d took %s", sh, i+1, time.Since(start).Round(time.Second))
	}
	reportF2(b, sh, samples, limit.Value())
}

// f2Sample is one sample of F2: the raw client's pods, then PodSet's.
type f2Sample struct {
	raw, ps scaleUp
	// The manager's memory in bytes, with every pod cached and settled:
	// heap in use as read after the idle window, then after a forced GC,
	// and the process's resident set; peak is the most heap in use seen
	// during the scale-up (read each second), heapRestart the heap in use
	// once the restarted manager has settled.
	heap, heapGC, rss, peak, heapRestart float64
	// idle is the idle window; idleWrites every write in it but kwok's, by
	// resource in idleByResource; idlePasses the manager's passes.
	idle                   time.Duration
	idleWrites, idlePasses float64
	idleByResource         map[string]float64
	// stale is how many sets had a stale status at the restart.
	stale int
	// restart are the restarted manager's writes until it is quiet, and
	// restartPasses its passes. staleChanged and freshChanged are the stale
	// sets and the other sets whose resourceVersion moved.
	restart                    ControllerWrites
	restartPasses              float64
	staleChanged, freshChanged int
	// firstPass and allSets are from the restarted process's start until
	// its first pass and until it had looked at every set; staleFixed until
	// the harness saw every stale status right.
	firstPass, allSets, staleFixed time.Duration
}

// runF2 runs the PodSet half of a sample: scale-up, idle window, heap,
// restart. It deletes the sets and pods before it returns.
func (r *rig) runF2(b *testing.B, sh shape, sample int, s *f2Sample) {
	b.Helper()
	ctx := context.Background()
	phase := fmt.Sprintf("f2-%s-%d", sh, sample+1)
	c := r.launch(b, podSets, unlimitedBudget, true)
	if err := r.warmUp(b, c); err != nil {
		b.Fatalf("warming up PodSet: %v", err)
	}
	ns := r.namespace(b, "f2")
	t := track(b, r.cs, ns)

	peak := c.peakHeap()
	s.ps = r.measureScaleUp(b, c, t, ns, sh, unlimitedBudget, phase)
	s.peak = peak()

	// Idle: measureScaleUp returned once the controller had stopped writing.
	before, err := r.requests(ctx)
	if err != nil {
		b.Fatal(err)
	}
	st0, err := c.state(ctx)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	time.Sleep(*flagF2Idle)
	after, err := r.requests(ctx)
	if err != nil {
		b.Fatal(err)
	}
	s.idle = time.Since(start)
	st1, err := c.state(ctx)
	if err != nil {
		b.Fatal(err)
	}
	window := after.Sub(before)
	s.idleWrites = IdleWrites(window)
	s.idleByResource = window.ByResource(func(q Request) bool { return q.IsWrite() && WriterOf(q) != WriterKubelet })
	s.idlePasses = st1.Passes - st0.Passes
	s.heap, s.rss = st1.HeapInuse, st1.RSS
	if s.heapGC, err = r.heapAfterGC(ctx, c, phase); err != nil {
		b.Fatal(err)
	}
	note("F2 %s: PodSet Ready in %s s; idle, heap in use %s MiB; restart", sh, seconds(s.ps.ready), mib(s.heap))
	b.Logf("F2 %s: idle %s: writes %v, %g passes; heap in use %s MiB (%s MiB after GC, peak %s MiB), RSS %s MiB",
		sh, s.idle.Round(time.Second), s.idleByResource, s.idlePasses, mib(s.heap), mib(s.heapGC), mib(s.peak), mib(s.rss))
	if err := c.stop(); err != nil {
		b.Fatal(err)
	}

	r.restartF2(b, t, ns, sh, phase, s)

	note("F2 %s: restart: first pass %s s, every set %s s; deleting", sh, seconds(s.firstPass), seconds(s.allSets))
	cleanup := time.Now()
	t.close()
	if err := r.deleteAll(ctx, podSets, ns); err != nil {
		b.Fatal(err)
	}
	b.Logf("cleanup took %s s", seconds(time.Since(cleanup)))
}

// restartF2 makes flagF2Stale sets' status stale while no manager runs,
// by turning one Ready pod of each unready (kwok leaves a Running pod
// alone), then starts tend manager again and measures it until it is
// quiet. It leaves the manager stopped.
func (r *rig) restartF2(b *testing.B, t *tracker, ns string, sh shape, phase string, s *f2Sample) {
	b.Helper()
	ctx := context.Background()
	stale := map[string]bool{}
	for set, pod := range t.readyPodOf(StaleNames(sh.sets, *flagF2Stale)) {
		if err := r.patchStatus(ctx, ns, pod, false, false); err != nil {
			b.Fatalf("turning pod %s unready: %v", pod, err)
		}
		stale[set] = true
	}
	s.stale = len(stale)
	versions, err := r.setVersions(ctx, ns)
	if err != nil {
		b.Fatal(err)
	}
	before, err := r.requests(ctx)
	if err != nil {
		b.Fatal(err)
	}

	start := time.Now()
	c := r.launch(b, podSets, unlimitedBudget, true)
	profiled := func() error { return nil }
	if *flagProfile != "" {
		// From the moment the new process serves pprof.
		done := make(chan error, 1)
		go func() {
			err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
				_, err := loopback.Get(c.pprof + "/debug/pprof/")
				return err == nil, c.err()
			})
			if err == nil {
				err = r.profile(ctx, c, phase+"-restart")()
			}
			done <- err
		}()
		profiled = func() error { return <-done }
	}
	var last ManagerState
	err = wait.PollUntilContextTimeout(ctx, pollEvery, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.err(); err != nil {
			return false, err
		}
		text, err := c.scrape(ctx)
		if err != nil {
			return false, nil // not serving yet
		}
		if last, err = ParseManagerState(text, podsetcontroller.Name); err != nil {
			return false, err
		}
		if s.firstPass == 0 && last.Passes > 0 {
			s.firstPass = time.Since(start)
		}
		if last.LookedAtAll(sh.sets) {
			s.allSets = time.Since(start)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		b.Fatalf("F2 %s restart: waiting for a pass of every set (last %+v): %v; its log: %s\n%s", sh, last, err, c.log, tail(c.log, 20))
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := r.restartConverged(ctx, ns, sh, stale)
		return n == sh.sets, errorsOf(err, c.err())
	})
	if err != nil {
		b.Fatalf("F2 %s restart: waiting for the stale statuses: %v", sh, err)
	}
	s.staleFixed = time.Since(start)
	after, err := r.quiesce(ctx, podSets)
	if err != nil {
		b.Fatal(err)
	}
	if err := profiled(); err != nil {
		b.Fatal(err)
	}
	st, err := c.state(ctx)
	if err != nil {
		b.Fatal(err)
	}
	s.restartPasses, s.heapRestart = st.Passes, st.HeapInuse
	window := after.Sub(before)
	s.restart = window.Controller(podSets.resource(), 0)
	now, err := r.setVersions(ctx, ns)
	if err != nil {
		b.Fatal(err)
	}
	s.staleChanged, s.freshChanged = ChangedSets(versions, now, stale)
	b.Logf("F2 %s restart: first pass %s s, every set %s s, stale statuses right %s s; writes %+v; sets written: %d of %d stale, %d others; %g passes; heap in use %s MiB; window %v",
		sh, seconds(s.firstPass), seconds(s.allSets), seconds(s.staleFixed), s.restart, s.staleChanged, s.stale, s.freshChanged,
		s.restartPasses, mib(s.heapRestart), window.ByResource(Request.IsWrite))
	if err := c.stop(); err != nil {
		b.Fatal(err)
	}
}

// note tells a long run's stderr where it is: b.Logf prints only
// once the benchmark ends.
func note(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().UTC().Format("15:04:05 ")+format+"\n", args...)
}

// errorsOf returns the first non-nil error.
func errorsOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// state reads the podset controller's progress and the process's memory
// from tend's metrics.
func (c *controller) state(ctx context.Context) (ManagerState, error) {
	text, err := c.scrape(ctx)
	if err != nil {
		return ManagerState{}, err
	}
	return ParseManagerState(text, podsetcontroller.Name)
}

// peakHeap reads tend's heap in use each second until the returned
// function is called, which returns the most it saw.
func (c *controller) peakHeap() func() float64 {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu   sync.Mutex
		peak float64
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			if st, err := c.state(ctx); err == nil {
				mu.Lock()
				peak = max(peak, st.HeapInuse)
				mu.Unlock()
			}
			return false, nil
		})
	})
	return func() float64 {
		cancel()
		wg.Wait()
		return peak
	}
}

// heapAfterGC has tend collect its garbage (its heap profile with gc=1
// runs a full GC first; kept as <phase>-podset-tend-heap.pprof with
// -profile) and returns its heap in use then.
func (r *rig) heapAfterGC(ctx context.Context, c *controller, phase string) (float64, error) {
	raw, err := loopback.Get(c.pprof + "/debug/pprof/heap?gc=1")
	if err != nil {
		return 0, fmt.Errorf("tend's heap profile: %w", err)
	}
	if *flagProfile != "" {
		if err := os.WriteFile(filepath.Join(*flagProfile, phase+"-podset-tend-heap.pprof"), []byte(raw), 0o644); err != nil {
			return 0, err
		}
	}
	st, err := c.state(ctx)
	return st.HeapInuse, err
}

// readyPodOf returns, for each of sets, one of its pods that is live and
// Ready, by set.
func (t *tracker) readyPodOf(sets []string) map[string]string {
	want := map[string]bool{}
	for _, s := range sets {
		want[s] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]string{}
	for _, p := range t.pods {
		if _, done := out[p.set]; want[p.set] && !done && p.live && p.ready {
			out[p.set] = p.name
		}
	}
	return out
}

// setVersions returns the resourceVersion of each PodSet in ns, by name.
func (r *rig) setVersions(ctx context.Context, ns string) (map[string]string, error) {
	var list appsv1alpha1.PodSetList
	if err := r.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing the PodSets: %w", err)
	}
	out := make(map[string]string, len(list.Items))
	for _, ps := range list.Items {
		out[ps.Name] = ps.ResourceVersion
	}
	return out, nil
}

// restartConverged counts the PodSets of ns whose status is right after
// the restart: every desired pod current, and every one Ready but the one
// turned unready in each stale set.
func (r *rig) restartConverged(ctx context.Context, ns string, sh shape, stale map[string]bool) (int, error) {
	var list appsv1alpha1.PodSetList
	if err := r.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	n := 0
	for _, ps := range list.Items {
		ready := int32(sh.pods)
		if stale[ps.Name] {
			ready--
		}
		if ps.Status.ObservedGeneration == ps.Generation && ps.Status.Replicas == int32(sh.pods) && ps.Status.ReadyReplicas == ready {
			n++
		}
	}
	return n, nil
}

// reportF2 prints F2's rows. Each cell is "median (min–max)" over the
// samples; a time goal is judged on the median, as B1's are; the heap and
// the write counts on every sample (the largest heap, any write).
func reportF2(b *testing.B, sh shape, samples []f2Sample, limit int64) {
	each := func(f func(f2Sample) float64) []float64 {
		out := make([]float64, len(samples))
		for i, s := range samples {
			out[i] = f(s)
		}
		return out
	}
	all := func(ok func(f2Sample) bool) bool {
		for _, s := range samples {
			if !ok(s) {
				return false
			}
		}
		return true
	}
	cells := func(f func(f2Sample) string) string {
		out := make([]string, len(samples))
		for i, s := range samples {
			out[i] = f(s)
		}
		return strings.Join(out, "; ")
	}
	toMiB := func(f func(f2Sample) float64) []float64 {
		return each(func(s f2Sample) float64 { return f(s) / (1 << 20) })
	}
	psReady := each(func(s f2Sample) float64 { return s.ps.ready.Seconds() })
	rawReady := each(func(s f2Sample) float64 { return s.raw.ready.Seconds() })
	readyRatio := each(func(s f2Sample) float64 { return s.ps.ready.Seconds() / s.raw.ready.Seconds() })
	heap := toMiB(func(s f2Sample) float64 { return s.heap })
	peak := toMiB(func(s f2Sample) float64 { return s.peak })
	idleWrites := each(func(s f2Sample) float64 { return s.idleWrites })
	podWrites := each(func(s f2Sample) float64 { return s.restart.Pods })
	statusWrites := each(func(s f2Sample) float64 { return s.restart.Status })
	firstPass := each(func(s f2Sample) float64 { return s.firstPass.Seconds() })
	allSets := each(func(s f2Sample) float64 { return s.allSets.Seconds() })
	b.ReportMetric(median(psReady), "PodSet-s")
	b.ReportMetric(median(rawReady), "raw-s")
	b.ReportMetric(median(readyRatio), "PodSet/raw")
	b.ReportMetric(slices.Max(heap), "heap-MiB")
	b.ReportMetric(slices.Max(idleWrites), "idle-writes")
	b.ReportMetric(slices.Max(podWrites), "restart-pod-writes")
	b.ReportMetric(slices.Max(statusWrites), "restart-status-writes")
	b.ReportMetric(median(firstPass), "first-pass-s")
	b.ReportMetric(median(allSets), "all-sets-s")

	name := "F2 " + sh.String()
	cond := unlimitedBudget.String()
	if limit > 0 {
		cond += fmt.Sprintf("; %s=%d (%s MiB), soft limit at tend's default %d%% of it", manager.MemoryLimitEnv, limit, mib(float64(limit)), manager.DefaultOptions().SoftMemoryLimitPercent)
	} else {
		cond += "; no memory limit"
	}
	if len(samples) > 1 {
		cond += fmt.Sprintf("; %d samples, median (min–max)", len(samples))
	} else {
		cond += "; 1 sample"
	}
	restartCond := fmt.Sprintf("%s; %d stale sets; from the new process's start, tend's metrics read every %s", cond, samples[0].stale, pollEvery)
	rows := []row{
		{
			bench: name, measure: "seconds to all Ready",
			podset: spread(psReady, "%.1f"), raw: spread(rawReady, "%.1f"), ratio: spread(readyRatio, "%.2f"),
			goal: fmt.Sprintf("PodSet ≤ %.1f × raw", f2Time), met: yes(median(readyRatio) <= f2Time),
			conditions: cond + "; PodSet/RS column: PodSet ÷ raw; raw: its own creates of as many pods, " + fmt.Sprint(*flagRawWorkers) + " at a time",
		},
		{
			bench: name, measure: "seconds until the last pod was created",
			podset:     spread(each(func(s f2Sample) float64 { return s.ps.created.Seconds() }), "%.1f"),
			raw:        spread(each(func(s f2Sample) float64 { return s.raw.created.Seconds() }), "%.1f"),
			ratio:      spread(each(func(s f2Sample) float64 { return s.ps.created.Seconds() / s.raw.created.Seconds() }), "%.2f"),
			conditions: cond + "; PodSet/RS column: PodSet ÷ raw",
		},
		{
			bench: name, measure: "API writes per pod; pods / status / events / other (409s), each sample",
			podset: spread(each(func(s f2Sample) float64 { return s.ps.writesPerPod() }), "%.3f") + "; " +
				cells(func(s f2Sample) string { return breakdown(s.ps.writes) }),
			conditions: cond,
		},
		{
			bench: name, measure: "machine CPU seconds to all Ready (busy share of its cores)",
			podset: spread(each(func(s f2Sample) float64 { return s.ps.machine.Seconds() }), "%.0f") +
				" (" + spread(each(func(s f2Sample) float64 { return s.ps.busy() }), "%.2f") + ")",
			raw: spread(each(func(s f2Sample) float64 { return s.raw.machine.Seconds() }), "%.0f") +
				" (" + spread(each(func(s f2Sample) float64 { return s.raw.busy() }), "%.2f") + ")",
			ratio:      spread(each(func(s f2Sample) float64 { return s.ps.machine.Seconds() / s.raw.machine.Seconds() }), "%.2f"),
			conditions: fmt.Sprintf("%s; every process on the machine (/proc/stat), %d cores; PodSet/RS column: PodSet ÷ raw", cond, runtime.NumCPU()),
		},
		{
			bench: name, measure: "controller CPU seconds to all Ready (kwok's)",
			podset: spread(each(func(s f2Sample) float64 { return s.ps.cpu.Seconds() }), "%.1f") +
				" (" + spread(each(func(s f2Sample) float64 { return s.ps.kwokCPU.Seconds() }), "%.1f") + ")",
			conditions: cond,
		},
		{
			bench: name, measure: "manager heap in use, MiB, every pod cached, settled",
			podset: spread(heap, "%.0f"), goal: fmt.Sprintf("≤ %d MiB", f2HeapMiB), met: yes(slices.Max(heap) <= f2HeapMiB),
			conditions: cond + "; tend's go_memstats_heap_inuse_bytes after the idle window; met on the largest sample",
		},
		{
			bench: name, measure: "manager heap in use after a forced GC / resident set, MiB",
			podset: spread(toMiB(func(s f2Sample) float64 { return s.heapGC }), "%.0f") + " / " +
				spread(toMiB(func(s f2Sample) float64 { return s.rss }), "%.0f"),
			conditions: cond + "; GC by tend's /debug/pprof/heap?gc=1; process_resident_memory_bytes",
		},
		{
			bench: name, measure: "manager heap in use, MiB: peak while scaling up / settled after the restart",
			podset: spread(peak, "%.0f") + " / " +
				spread(toMiB(func(s f2Sample) float64 { return s.heapRestart }), "%.0f"),
			goal: fmt.Sprintf("peak ≤ %d MiB", f2HeapMiB), met: yes(slices.Max(peak) <= f2HeapMiB),
			conditions: cond + "; peak of tend's metrics read each second; met on the largest sample",
		},
		{
			bench: name, measure: fmt.Sprintf("API writes at idle, all but kwok's, in %s", *flagF2Idle),
			podset: listCounts(idleWrites), goal: "0", met: yes(slices.Max(idleWrites) == 0),
			conditions: cond + fmt.Sprintf("; each sample; passes meanwhile: %s", listCounts(each(func(s f2Sample) float64 { return s.idlePasses }))),
		},
		{
			bench: name, measure: "restart: pod writes",
			podset: listCounts(podWrites), goal: "0", met: yes(slices.Max(podWrites) == 0),
			conditions: restartCond + "; each sample",
		},
		{
			bench: name, measure: "restart: status writes / stale sets (sets written: stale, others)",
			podset: cells(func(s f2Sample) string {
				return fmt.Sprintf("%.0f / %d (%d, %d)", s.restart.Status, s.stale, s.staleChanged, s.freshChanged)
			}),
			goal: "≤ 1 per stale set, 0 for the others",
			met: yes(all(func(s f2Sample) bool {
				return s.restart.Status <= float64(s.stale) && s.freshChanged == 0
			})),
			conditions: restartCond + "; each sample; sets written: resourceVersion moved",
		},
		{
			bench: name, measure: "restart: writes, pods / status / events / other (409s); passes",
			podset:     cells(func(s f2Sample) string { return fmt.Sprintf("%s; %.0f", breakdown(s.restart), s.restartPasses) }),
			conditions: restartCond + "; each sample",
		},
		{
			bench: name, measure: "restart: seconds to the first pass",
			podset: spread(firstPass, "%.1f"), conditions: restartCond + "; controller_runtime_reconcile_total > 0",
		},
		{
			bench: name, measure: "restart: seconds until every set was looked at",
			podset:     spread(allSets, "%.1f"),
			conditions: restartCond + "; passes ≥ sets with the queue empty and no pass running (ManagerState.LookedAtAll)",
		},
		{
			bench: name, measure: "restart: seconds until every stale status was right",
			podset:     spread(each(func(s f2Sample) float64 { return s.staleFixed.Seconds() }), "%.1f"),
			conditions: restartCond + "; the harness's PodSet list, every 500 ms after every set was looked at",
		},
	}
	record(b, rows...)
}
