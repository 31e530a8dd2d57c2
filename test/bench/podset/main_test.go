package podset

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// The sizes of the benchmarks; the defaults are the issue's, scaled where
// the doc comment of the benchmark says so.
var (
	flagNodes      = flag.Int("nodes", 10, "fake Nodes that kwok runs; pods are spread over them by the template's nodeName")
	flagB1Full     = flag.Bool("b1.full", false, "B1: also run 100 sets × 100 at the equal budget (QPS 20 takes ≥ 500 s per controller)")
	flagB1Samples  = flag.Int("b1.samples", 3, "B1: samples per case (each: raw, PodSet, ReplicaSet); cells print median (min–max)")
	flagB1Scale    = flag.Float64("b1.scale", 1, "B1: multiplies the pods per set, for a quick run (0.1: 1 × 100 and 100 × 10)")
	flagB1Workers  = flag.Int("b1.workers", 0, "B1: workers of both controllers instead of 5, kube-controller-manager's default (to see what concurrency bounds)")
	flagRawWorkers = flag.Int("raw.workers", 128, "B1: concurrent creates of the raw client")
	flagRawPods    = flag.Int("raw.pods", 3000, "B1: the most pods the raw client creates to measure its rate")
	flagB3Sets     = flag.Int("b3.sets", 20, "B3: sets churned")
	flagB3Pods     = flag.Int("b3.pods", 50, "B3: pods per set")
	flagB3Churn    = flag.Duration("b3.churn", 10*time.Second, "B3: how long pod statuses are churned")
	flagB3Churners = flag.Int("b3.churners", 4, "B3: concurrent status writers")
	flagB3Rate     = flag.Float64("b3.rate", 100, "B3: status writes per second, over all writers")
	flagB4Sets     = flag.Int("b4.sets", 1000, "B4: converged PodSets left idle")
	flagB4Idle     = flag.Duration("b4.idle", 30*time.Second, "B4: how long they are left idle; writes are given per minute")
	flagB6Small    = flag.Int("b6.small", 1000, "B6: pods cached at the first measurement")
	flagB6Large    = flag.Int("b6.large", 5000, "B6: pods cached at the second measurement")
	flagB6Noise    = flag.Int("b6.noise", 1000, "B6: pods without the PodSet label, which Tend's cache must not hold")
	flagProfile    = flag.String("profile", "", "B1 and F2: a directory; each phase writes CPU profiles of the apiserver and (PodSet) of tend there, taken from the sets' creation for -profile.seconds")
	flagProfileFor = flag.Duration("profile.seconds", 20*time.Second, "B1: how long each phase's CPU profiles run")
)

func TestMain(m *testing.M) {
	flag.Parse()
	if *flagProfile != "" {
		// Made before anything runs: a profile is first written minutes
		// into a benchmark.
		if err := os.MkdirAll(*flagProfile, 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "-profile: %v\n", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	if err := stopRig(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the benchmark's cluster: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	printTable(os.Stdout)
	os.Exit(code)
}

// row is one line of the summary table: a measure of one benchmark, for
// each side. Cells are preformatted; "" prints as "–".
type row struct {
	bench, measure             string
	podset, replicaset, ratio  string
	raw, goal, met, conditions string
}

var (
	rowsMu sync.Mutex
	rows   []row
)

// record adds rows to the summary and logs them to b.
func record(b *testing.B, rs ...row) {
	rowsMu.Lock()
	rows = append(rows, rs...)
	rowsMu.Unlock()
	var sb strings.Builder
	writeRows(&sb, rs)
	b.Log("\n" + sb.String())
}

// printTable writes the summary of every benchmark that ran, as Markdown.
func printTable(w io.Writer) {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nPodSet benchmarks (test/bench/podset):")
	writeRows(w, rows)
}

func writeRows(w io.Writer, rs []row) {
	fmt.Fprintln(w, "| bench | measure | PodSet | ReplicaSet | PodSet/RS | raw client | goal | met | conditions |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	dash := func(s string) string {
		if s == "" {
			return "–"
		}
		return s
	}
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.bench, r.measure,
			dash(r.podset), dash(r.replicaset), dash(r.ratio), dash(r.raw), dash(r.goal), dash(r.met), dash(r.conditions))
	}
}

// ratio formats a/b, or "" when b is zero.
func ratio(a, b float64) string {
	if b == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", a/b)
}

// yes formats a goal check.
func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}
