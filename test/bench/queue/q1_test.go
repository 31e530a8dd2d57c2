package queue

import (
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
	queuecontroller "github.com/tend-dev/tend/internal/controller/queue"
)

// The run's size. Pass them after -args when running this package alone.
var (
	flagQueues  = flag.Int("q1.queues", 1000, "Q1: how many Queues")
	flagPeriods = flag.Int("q1.periods", 3, "Q1: poll periods measured at steady state, per variant")
	flagVictims = flag.Int("q1.victims", 100, "Q1: SQS queues deleted out of band, per variant")
)

const (
	// poll is every Queue's pollInterval: the CRD's floor, so that a run of
	// minutes spans several polls. Figures per queue-hour scale from it.
	poll = 30 * time.Second
	// maxPoll is the longest poll the Reconciler's ±10% jitter allows: the
	// repair-time goal.
	maxPoll = poll + poll/10
	// defaultPoll is the CRD's default pollInterval, for the figures that
	// the default settings imply.
	defaultPoll = 5 * time.Minute
	// callsPerObserve is what docs/queue.md says a steady pass costs
	// (GetQueueAttributes and ListQueueTags). It only sizes the bucket; the
	// run measures what a pass really costs.
	callsPerObserve = 2
	// headroom is how much larger than the steady demand the bucket is, so
	// that random clumps of polls fit.
	headroom = 1.5
	// maxWarmUp bounds the wait for steady state after a manager starts.
	maxWarmUp = 4 * poll
)

// bucketFor sizes the bucket for n Queues: the steady demand times headroom,
// and a burst of twice the rate, as the defaults have (20 for 10 QPS).
func bucketFor(n int) (qps float64, burst int) {
	qps = math.Ceil(float64(n) * callsPerObserve / poll.Seconds() * headroom)
	return qps, int(qps) * tendaws.DefaultBurst / tendaws.DefaultQPS
}

// BenchmarkQ1 is issue 5's Q1: many Queues against moto, the real Reconciler
// as Tend runs it (±10% jitter, one bucket per endpoint) against the same
// Reconciler made naive (no jitter, no limit), in one run on the same
// Queues, apiserver and moto. See doc.go for what it measures.
func BenchmarkQ1(b *testing.B) {
	r := newRig(b)
	for b.Loop() {
		runQ1(b, r)
	}
}

func runQ1(b *testing.B, r *rig) {
	start := time.Now()
	n := *flagQueues
	qps, burst := bucketFor(n)
	ns := r.kube.Namespace(b)
	queues := newQueues(ns, n, poll)

	// Setup: the Queues and their SQS queues, with an unlimited bucket, so
	// that setup takes as long as moto and the apiserver need and no more.
	if err := r.createAll(queues); err != nil {
		b.Fatalf("creating %d Queues: %v", n, err)
	}
	// More workers than Tend's default: setup is not measured, only waited for.
	stopSetup := r.startManager(b, ns, variant{name: "setup", qps: 1e6, burst: 1e6, workers: 16}, unlimited(b))
	setup := r.waitReady(b, ns, n, 10*time.Minute)
	stopSetup()
	b.Logf("Setup: %d Queues and their SQS queues Ready in %s", n, setup.Round(time.Second))

	ceiling := r.motoCeiling(b, queueURLs(b, r, ns), []int{4, 16}, 5*time.Second)
	victims := pick(queues, *flagVictims)

	// Tend as it runs, then the same Reconciler made naive, each from a
	// manager start over the same Ready Queues: a start is when every Queue
	// is due at once, the moment that jitter and the limiter exist for.
	tend := r.runVariant(b, ns, n, victims, variant{name: "tend", qps: qps, burst: burst})
	naive := r.runVariant(b, ns, n, victims, variant{
		name: "naive", qps: 1e6, burst: 1e6,
		jitter: func(d time.Duration) time.Duration { return d },
	})

	rep := q1Report{
		queues: n, qps: qps, burst: burst, tend: tend, naive: naive,
		ceiling: ceiling, setup: setup, motoRSS: motoRSS(r.moto.Pid()), run: time.Since(start),
	}
	rep.metrics(b)
	// To standard output, beside the benchmark's result line: on success, go
	// test keeps only the first lines of a benchmark's log.
	fmt.Print("\n" + rep.table() + "\n")
}

// queueURLs returns the SQS URLs that the Queues' status records.
func queueURLs(b *testing.B, r *rig, ns string) []string {
	var list sqsv1alpha1.QueueList
	if err := r.kube.Client.List(r.ctx, &list, client.InNamespace(ns)); err != nil {
		b.Fatalf("listing Queues: %v", err)
	}
	urls := make([]string, 0, len(list.Items))
	for _, q := range list.Items {
		urls = append(urls, q.Status.QueueURL)
	}
	return urls
}

// pick chooses k of the queues' SQS names, the same ones on every run, so
// that both variants repair the same queues.
func pick(queues []*sqsv1alpha1.Queue, k int) []string {
	rng := rand.New(rand.NewPCG(5, 1))
	idx := rng.Perm(len(queues))[:min(k, len(queues))]
	names := make([]string, len(idx))
	for i, j := range idx {
		names[i] = queues[j].SQSName()
	}
	return names
}

// result is what one variant's run measured.
type result struct {
	v       variant
	startup window // from the manager's start to steady state
	steady  window
	// whole spans startup, steady state and the repairs: the window over
	// which "never above the bucket" is held.
	whole   window
	series  Series
	repairs []time.Duration
	// heap is the process's heap in use at the end of steady state, after
	// a collection: the manager's cache of every Queue, and the rig.
	heap uint64
}

// runVariant starts a manager configured as v over the namespace's Ready
// Queues, waits for steady state, measures it for the flagged number of
// polls, then measures the repair of the victims deleted out of band.
func (r *rig) runVariant(b *testing.B, ns string, n int, victims []string, v variant) result {
	b.Helper()
	limiters, err := tendaws.NewLimiters(tendaws.LimiterOptions{QPS: v.qps, Burst: v.burst})
	if err != nil {
		b.Fatal(err)
	}
	s := r.startSampler()
	begin := r.snap(b, s, ns, limiters)
	stop := r.startManager(b, ns, v, limiters)
	warm := r.warmUp(limiters)
	from := r.snap(b, s, ns, limiters)
	time.Sleep(time.Duration(*flagPeriods) * poll)
	to := r.snap(b, s, ns, limiters)
	b.Logf("%s: steady state after %s; measured for %s", v.name, warm.Round(time.Second), (to.at - from.at).Round(time.Second))
	runtime.GC()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)

	repairs := r.repair(b, ns, victims, poll, 3*maxPoll)
	// Every Queue back to Ready, so that the next variant starts from the
	// same state.
	r.waitReady(b, ns, n, 3*maxPoll)
	end := r.snap(b, s, ns, limiters)
	stop()
	return result{
		v: v, startup: between(begin, from), steady: between(from, to), whole: between(begin, end),
		series: s.close(), repairs: repairs, heap: mem.HeapInuse,
	}
}

// warmUp waits until a whole poll period has passed without the limiter
// refusing a call, and at least one period since the start, so that every
// Queue has had its first pass and the bucket keeps up: steady state. It
// gives up after maxWarmUp and measures anyway; refusals then show in the
// steady figures.
func (r *rig) warmUp(limiters *tendaws.Limiters) time.Duration {
	start := time.Now()
	lastRefusal, refused := start, limiters.Stats(r.endpoint).Refused
	for {
		time.Sleep(time.Second)
		now := time.Now()
		if st := limiters.Stats(r.endpoint); st.Refused != refused {
			lastRefusal, refused = now, st.Refused
		}
		if now.Sub(lastRefusal) >= poll || now.Sub(start) >= maxWarmUp {
			return now.Sub(start)
		}
	}
}

// q1Report turns two results into figures.
type q1Report struct {
	queues      int
	qps         float64
	burst       int
	tend, naive result
	ceiling     map[int]float64
	setup, run  time.Duration
	motoRSS     float64
}

// figures are one variant's numbers.
type figures struct {
	perQueueHour    float64
	observesPerPoll float64
	callsPerObserve float64
	other           int
	rate            Summary // calls per second in the steady window
	peakWhole       float64 // highest calls in one second, whole run
	burstSteady     float64 // burst needed at the bucket's QPS
	burstWhole      float64
	repair          Summary // seconds
	k8sSteady       float64
	changedSteady   int
	k8sStartup      float64
	refusedStartup  uint64
	refusedSteady   uint64
}

func (q q1Report) figures(res result) figures {
	st := res.steady
	polls := st.length().Seconds() / poll.Seconds()
	observes := float64(st.calls["GetQueueAttributes"])
	f := figures{
		perQueueHour:    PerQueueHour(st.total, q.queues, st.length()),
		observesPerPoll: observes / float64(q.queues) / polls,
		other:           st.otherCalls(),
		rate:            Summarize(toFloats(res.series.PerSecond(st.from, st.to))),
		peakWhole:       Summarize(toFloats(res.series.PerSecond(res.whole.from, res.whole.to))).Max,
		burstSteady:     res.series.BurstNeeded(st.from, st.to, q.qps),
		burstWhole:      res.series.BurstNeeded(res.whole.from, res.whole.to, q.qps),
		k8sSteady:       st.k8sWrites(),
		changedSteady:   st.changed,
		k8sStartup:      res.startup.k8sWrites(),
		refusedStartup:  res.startup.refused,
		refusedSteady:   st.refused,
	}
	if observes > 0 {
		f.callsPerObserve = float64(st.total) / observes
	}
	secs := make([]float64, len(res.repairs))
	for i, d := range res.repairs {
		secs[i] = d.Seconds()
	}
	f.repair = Summarize(secs)
	return f
}

// metrics reports the figures through the benchmark, for benchstat.
func (q q1Report) metrics(b *testing.B) {
	b.ReportMetric(float64(q.queues), "queues")
	b.ReportMetric(q.qps, "bucket-qps")
	b.ReportMetric(float64(q.burst), "bucket-burst")
	b.ReportMetric(maxCeiling(q.ceiling), "moto-ceiling-calls/s")
	b.ReportMetric(q.run.Seconds(), "run-s")
	for _, res := range []result{q.tend, q.naive} {
		f, p := q.figures(res), res.v.name+"-"
		b.ReportMetric(f.perQueueHour, p+"calls/queue-hour")
		b.ReportMetric(f.observesPerPoll, p+"observes/queue-poll")
		b.ReportMetric(float64(f.other), p+"other-calls")
		b.ReportMetric(f.rate.Mean, p+"mean-calls/s")
		b.ReportMetric(f.rate.Max, p+"peak-calls/s")
		b.ReportMetric(f.peakWhole, p+"peak-calls/s-whole")
		b.ReportMetric(f.burstWhole, p+"burst-needed")
		b.ReportMetric(f.repair.P50, p+"repair-p50-s")
		b.ReportMetric(f.repair.P90, p+"repair-p90-s")
		b.ReportMetric(f.repair.P99, p+"repair-p99-s")
		b.ReportMetric(f.repair.Max, p+"repair-max-s")
		b.ReportMetric(f.k8sSteady, p+"k8s-writes-steady")
		b.ReportMetric(mib(res.heap), p+"heap-MiB")
	}
}

// table renders the figures as the Markdown table of docs/benchmarks.md.
func (q q1Report) table() string {
	t, nv := q.figures(q.tend), q.figures(q.naive)
	var sb strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&sb, format+"\n", args...) }
	row := func(name string, tend, naive any, goal string) { w("| %s | %v | %v | %s |", name, tend, naive, goal) }
	pair := func(format string, a, b any) string { return fmt.Sprintf(format, a, b) }
	dist := func(s Summary) string { return fmt.Sprintf("%.1f / %.1f / %.1f / %.1f", s.P50, s.P90, s.P99, s.Max) }
	cpu := func(u usage) string { return fmt.Sprintf("%.2f / %.2f", u.self, u.moto) }
	machine := func(u usage) string { return fmt.Sprintf("%.0f%% / %.1f", 100*u.busy, u.load) }
	ts, ns := q.tend.steady, q.naive.steady

	w("Q1: %d Queues, pollInterval %s, %d workers; Tend's bucket %.0f QPS, burst %d; steady state measured for %s per variant; run %s (setup %s).",
		q.queues, poll, queuecontroller.DefaultOptions().Workers, q.qps, q.burst,
		ts.length().Round(time.Second), q.run.Round(time.Second), q.setup.Round(time.Second))
	w("")
	w("| figure | Tend (±10%% jitter, bucket) | naive (no jitter, no limit) | goal |")
	w("|---|---|---|---|")
	row("SQS calls per queue-hour, steady", f1(t.perQueueHour), f1(nv.perQueueHour),
		fmt.Sprintf("%.0f: one observe per poll", callsPerObserve*time.Hour.Seconds()/poll.Seconds()))
	row("observes per Queue per poll, steady", f2(t.observesPerPoll), f2(nv.observesPerPoll), "1")
	row("calls per observe, steady", f2(t.callsPerObserve), f2(nv.callsPerObserve), "2")
	row("calls other than observes, steady", t.other, nv.other, "0")
	row("calls per second, steady: mean / peak", pair("%.1f / %.0f", t.rate.Mean, t.rate.Max),
		pair("%.1f / %.0f", nv.rate.Mean, nv.rate.Max), fmt.Sprintf("mean ≤ %.0f", q.qps))
	row("peak / mean calls per second, steady", f1(ratio(t.rate.Max, t.rate.Mean)), f1(ratio(nv.rate.Max, nv.rate.Mean)), "")
	row("peak calls in one second, whole run", f0(t.peakWhole), f0(nv.peakWhole),
		fmt.Sprintf("≤ %.0f (QPS × 1 s + burst)", q.qps+float64(q.burst)))
	row(fmt.Sprintf("burst a %.0f QPS bucket needs for the calls sent: steady / whole run", q.qps),
		pair("%.0f / %.0f", t.burstSteady, t.burstWhole), pair("%.0f / %.0f", nv.burstSteady, nv.burstWhole),
		fmt.Sprintf("≤ %d: never above the bucket", q.burst))
	row("calls refused by the limiter: startup / steady", pair("%d / %d", t.refusedStartup, t.refusedSteady),
		pair("%d / %d", nv.refusedStartup, nv.refusedSteady), "0 steady")
	row("Kubernetes writes, steady (objects changed)", pair("%.0f (%d)", t.k8sSteady, t.changedSteady),
		pair("%.0f (%d)", nv.k8sSteady, nv.changedSteady), "0")
	row("Kubernetes writes, startup", f0(t.k8sStartup), f0(nv.k8sStartup), "")
	row(fmt.Sprintf("repair after an out-of-band delete, s: p50 / p90 / p99 / max (n=%d)", t.repair.N),
		dist(t.repair), dist(nv.repair), fmt.Sprintf("≤ %.0f (poll + 10%%)", maxPoll.Seconds()))
	row("manager start to steady state, s", f0(q.tend.startup.length().Seconds()), f0(q.naive.startup.length().Seconds()), "")
	row("heap in use, this process (manager and benchmark), end of steady state, MiB", f0(mib(q.tend.heap)), f0(mib(q.naive.heap)), "≤ 512")
	row("CPU cores, this process / moto: startup", cpu(q.tend.startup.cpu), cpu(q.naive.startup.cpu), "")
	row("CPU cores, this process / moto: steady", cpu(ts.cpu), cpu(ns.cpu), "")
	row("machine busy (both cores, anyone) / load average: steady", machine(ts.cpu), machine(ns.cpu), "")
	w("")
	w("Ratios naive / Tend: peak calls per second %.1f× steady, %.1f× whole run; burst needed %.1f×; calls per queue-hour %.2f×.",
		ratio(nv.rate.Max, t.rate.Max), ratio(nv.peakWhole, t.peakWhole), ratio(nv.burstWhole, t.burstWhole),
		ratio(nv.perQueueHour, t.perQueueHour))
	w("moto_server's ceiling through the proxy, observe calls per second: %s; the most it served in one second of the run: %.0f; its memory at the end: %.0f MiB.",
		ceilingText(q.ceiling), max(t.peakWhole, nv.peakWhole), q.motoRSS)
	w("Calls per second over one steady poll period, Tend:  %v", firstPeriod(q.tend))
	w("Calls per second over one steady poll period, naive: %v", firstPeriod(q.naive))
	// What the measured cost of an observe means at the default settings.
	per := t.callsPerObserve
	w("At the defaults (pollInterval %s, %d QPS, burst %d): %.0f calls per queue-hour; 1000 Queues need %.1f calls/s, %.0f%% of the bucket; one endpoint's bucket sustains %.0f Queues; a deleted queue is back within %s.",
		defaultPoll, tendaws.DefaultQPS, tendaws.DefaultBurst,
		per*time.Hour.Seconds()/defaultPoll.Seconds(),
		1000*per/defaultPoll.Seconds(), 100*1000*per/defaultPoll.Seconds()/tendaws.DefaultQPS,
		tendaws.DefaultQPS*defaultPoll.Seconds()/per, defaultPoll+defaultPoll/10)
	return sb.String()
}

// firstPeriod returns the calls in each second of the first poll period of
// the steady window: the shape that the figures summarize.
func firstPeriod(res result) []int {
	return res.series.PerSecond(res.steady.from, min(res.steady.to, res.steady.from+poll))
}

func f0(x float64) string { return fmt.Sprintf("%.0f", x) }

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
func f1(x float64) string  { return fmt.Sprintf("%.1f", x) }
func f2(x float64) string  { return fmt.Sprintf("%.2f", x) }

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.Inf(1)
	}
	return a / b
}

func toFloats(xs []int) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

func maxCeiling(c map[int]float64) float64 {
	m := 0.0
	for _, v := range c {
		m = max(m, v)
	}
	return m
}

func ceilingText(c map[int]float64) string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%.0f with %d callers", c[n], n))
	}
	return strings.Join(parts, ", ")
}
