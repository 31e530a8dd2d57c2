package agent

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/etcd"
	"github.com/tend-dev/tend/internal/testing/etcdserver"
)

// BenchmarkB13Archive measures the continuous archive on a 3-member TLS
// cluster (the test harness's etcd, fsync off) with the archive on moto
// S3, in TEND_B13_SAMPLES samples (default 3):
//
//   - RPO: under a steady writer (TEND_B13_RATE writes/s, default 100, of
//     256-byte values, for TEND_B13_SECONDS, default 30), the delay from a
//     write's acknowledgement to the moment the archiver's state shows its
//     revision in a stored segment, with the product's default segment
//     limits (10 s, 8 MiB);
//   - cost: the same writer without the archiver and with it, side by
//     side in each sample: this process's CPU (writer, and archiver when
//     it runs) and the members' CPU, and the bytes stored per 1,000 writes;
//   - replay: a base backup and TEND_B13_REVISIONS revisions after it
//     (default 100,000) archived, then, per sample, the base restored into
//     a fresh etcd alone (etcdutl restore and start) against the same plus
//     the replay of every revision.
//
// It prints a table and reports figures; it never fails on time.
//
//	go test -run '^$' -bench B13 -benchtime 1x ./internal/agent
func BenchmarkB13Archive(b *testing.B) {
	samples := envInt(b, "TEND_B13_SAMPLES", 3)
	rate := envInt(b, "TEND_B13_RATE", 100)
	seconds := envInt(b, "TEND_B13_SECONDS", 30)
	revisions := envInt(b, "TEND_B13_REVISIONS", 100_000)
	for b.Loop() {
		live := startLive(b, 3, "root")
		live.put(b, "seed-", 1000, 256)
		var rows []b13Sample
		for i := range samples {
			rows = append(rows, b13RPO(b, live, i, rate, time.Duration(seconds)*time.Second))
		}
		replays := b13Replay(b, live, samples, revisions)
		table := b13Table(rows, replays, rate, seconds, revisions)
		fmt.Println(table)
		b.ReportMetric(medianOf(rows, func(s b13Sample) float64 { return s.p99.Seconds() }), "rpo-p99-s")
		b.ReportMetric(medianOf(replays, func(r b13ReplaySample) float64 { return r.rate() }), "replay-rev/s")
	}
}

// envInt reads a positive integer from the environment, or def.
func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	NewWithT(b).Expect(err).NotTo(HaveOccurred(), name)
	NewWithT(b).Expect(n).To(BeNumerically(">", 0), name)
	return n
}

// b13Sample is one RPO and cost sample.
type b13Sample struct {
	writes             int
	p50, p99, max      time.Duration
	selfCPU, selfBase  time.Duration // this process: with the archiver, and the writer alone
	membersCPU, memBas time.Duration // the members: with the archiver, and without
	bytes              int64
	segments           int
}

// b13RPO runs the writer alone, then the writer with the archiver.
func b13RPO(b *testing.B, live *liveCluster, i, rate int, d time.Duration) b13Sample {
	g := NewWithT(b)
	var s b13Sample
	cpu0, mem0 := processCPU(b), membersCPU(b, live.Cluster)
	steadyWriter(b, live, fmt.Sprintf("alone-%d-", i), rate, d, nil)
	s.selfBase, s.memBas = processCPU(b)-cpu0, membersCPU(b, live.Cluster)-mem0

	rev, err := withTimeout(stepCtx(b), func(ctx context.Context) (int64, error) {
		cli, err := etcd.New(ctx, live.Config)
		if err != nil {
			return 0, err
		}
		defer cli.Close()
		return cli.CurrentRevision(ctx)
	})
	g.Expect(err).NotTo(HaveOccurred())
	o := ArchiveOptions{
		Etcd: live.Config, To: "s3://" + newBucket(b) + "/archive", S3: s3Opts(), Owner: "bench", BaseRevision: rev,
		Compression: Zstd, MaxAge: 10 * time.Second, MaxBytes: 8 << 20,
	}
	a, err := NewArchiver(o)
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cpu0, mem0 = processCPU(b), membersCPU(b, live.Cluster)
	go func() { done <- a.Run(ctx) }()

	// When each revision became durable, as the state shows it (polled
	// every 10 ms: the figures are at most that late).
	var mu sync.Mutex
	durableAt := map[int64]time.Time{}
	stopPoll := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var seen int64
		for {
			select {
			case <-stopPoll:
				return
			case <-time.After(10 * time.Millisecond):
			}
			last, now := a.State().LastRevision, time.Now()
			mu.Lock()
			for r := max(seen+1, rev+1); r <= last; r++ {
				durableAt[r] = now
			}
			mu.Unlock()
			seen = max(seen, last)
		}
	})
	acked := map[int64]time.Time{}
	lastRev := steadyWriter(b, live, fmt.Sprintf("archived-%d-", i), rate, d, acked)
	s.selfCPU, s.membersCPU = processCPU(b)-cpu0, membersCPU(b, live.Cluster)-mem0
	g.Eventually(func() int64 { return a.State().LastRevision }).WithTimeout(time.Minute).Should(BeNumerically(">=", lastRev))
	close(stopPoll)
	wg.Wait()
	cancel()
	g.Expect(<-done).To(Succeed())

	var delays []time.Duration
	for r, at := range acked {
		delays = append(delays, durableAt[r].Sub(at))
	}
	slices.Sort(delays)
	st := a.State()
	s.writes, s.bytes, s.segments = len(delays), st.Bytes, st.Segments
	s.p50, s.p99, s.max = delays[len(delays)/2], delays[len(delays)*99/100], delays[len(delays)-1]
	return s
}

// steadyWriter puts one key every 1/rate seconds for d, and records each
// write's acknowledgement by revision in acked (when not nil). It returns
// the last revision.
func steadyWriter(b *testing.B, live *liveCluster, prefix string, rate int, d time.Duration, acked map[int64]time.Time) int64 {
	g := NewWithT(b)
	value := strings.Repeat("v", 256)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.Now().Add(d)
	var last int64
	for i := 0; time.Now().Before(end); i++ {
		<-tick.C
		resp, err := live.cli.Put(stepCtx(b), fmt.Sprintf("%s%06d", prefix, i), value)
		g.Expect(err).NotTo(HaveOccurred())
		last = resp.Header.Revision
		if acked != nil {
			acked[last] = time.Now()
		}
	}
	return last
}

// membersCPU is the CPU time the cluster's etcd processes have used.
func membersCPU(b *testing.B, c *etcdserver.Cluster) time.Duration {
	var sum time.Duration
	for _, m := range c.Members() {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.PID()))
		NewWithT(b).Expect(err).NotTo(HaveOccurred())
		// After the command's closing parenthesis: state is field 3, utime
		// and stime fields 14 and 15, in clock ticks (100 per second).
		fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
		for _, f := range fields[11:13] {
			ticks, err := strconv.ParseInt(f, 10, 64)
			NewWithT(b).Expect(err).NotTo(HaveOccurred())
			sum += time.Duration(ticks) * 10 * time.Millisecond
		}
	}
	return sum
}

// b13ReplaySample is one restore of the base alone and with the replay.
type b13ReplaySample struct {
	baseAlone, withReplay time.Duration
	replay                time.Duration // the replay's own time, from a started etcd
	revisions             int64
}

func (r b13ReplaySample) rate() float64 { return float64(r.revisions) / r.replay.Seconds() }

// b13Replay archives revisions writes after a base backup, then restores
// the base into a fresh etcd, alone and with the replay, samples times.
func b13Replay(b *testing.B, live *liveCluster, samples, revisions int) []b13ReplaySample {
	g := NewWithT(b)
	bucket := newBucket(b)
	base := baseBackup(b, live, bucket)
	uri := "s3://" + bucket + "/archive"
	a, err := NewArchiver(ArchiveOptions{
		Etcd: live.Config, To: uri, S3: s3Opts(), Owner: "bench", BaseRevision: base.result.Snapshot.Revision,
		Compression: Zstd, MaxAge: 10 * time.Second, MaxBytes: 8 << 20,
	})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	// Eight writers: the revisions come faster than one client's round
	// trips allow.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last int64
	per := revisions / 8
	value := strings.Repeat("r", 256)
	for w := range 8 {
		wg.Go(func() {
			for i := range per {
				resp, err := live.cli.Put(stepCtx(b), fmt.Sprintf("replay-%d-%06d", w, i%5000), value)
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				last = max(last, resp.Header.Revision)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	g.Eventually(func() int64 { return a.State().LastRevision }).WithTimeout(5 * time.Minute).Should(BeNumerically(">=", last))
	cancel()
	g.Expect(<-done).To(Succeed())

	var out []b13ReplaySample
	for range samples {
		var s b13ReplaySample
		start := time.Now()
		local := startReplayEtcd(b, base.snapshot)
		_, err := waitReady(stepCtx(b), local.URL)
		g.Expect(err).NotTo(HaveOccurred())
		s.baseAlone = time.Since(start)

		start = time.Now()
		local = startReplayEtcd(b, base.snapshot)
		_, err = waitReady(stepCtx(b), local.URL)
		g.Expect(err).NotTo(HaveOccurred())
		rctx, rcancel := context.WithTimeout(context.Background(), time.Hour)
		replayStart := time.Now()
		r, err := Replay(rctx, ReplayOptions{From: uri, S3: s3Opts(), Owner: "bench", Local: local.URL})
		rcancel()
		g.Expect(err).NotTo(HaveOccurred())
		s.replay, s.withReplay = time.Since(replayStart), time.Since(start)
		s.revisions = r.Replayed.Revisions
		g.Expect(r.Replayed.Reached).To(Equal(last))
		out = append(out, s)
	}
	return out
}

// waitReady waits until the etcd at url answers, and returns its revision.
func waitReady(ctx context.Context, url string) (int64, error) {
	for {
		rev, err := func() (int64, error) {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			cli, err := etcd.New(cctx, etcd.Config{Endpoints: []string{url}})
			if err != nil {
				return 0, err
			}
			defer cli.Close()
			return cli.CurrentRevision(cctx)
		}()
		if err == nil {
			return rev, nil
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// medianOf is the median of f over rows.
func medianOf[T any](rows []T, f func(T) float64) float64 {
	v := make([]float64, 0, len(rows))
	for _, r := range rows {
		v = append(v, f(r))
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// spreadOf prints least / median / greatest of f over rows.
func spreadOf[T any](rows []T, f func(T) float64, format string) string {
	v := make([]float64, 0, len(rows))
	for _, r := range rows {
		v = append(v, f(r))
	}
	slices.Sort(v)
	return fmt.Sprintf(format+" / "+format+" / "+format, v[0], v[len(v)/2], v[len(v)-1])
}

func b13Table(rows []b13Sample, replays []b13ReplaySample, rate, seconds, revisions int) string {
	col := func(f func(b13Sample) float64, format string) string { return spreadOf(rows, f, format) }
	rcol := func(f func(b13ReplaySample) float64, format string) string { return spreadOf(replays, f, format) }
	per1000 := func(d time.Duration, s b13Sample) float64 { return d.Seconds() * 1000 / float64(s.writes) * 1000 }
	var sb strings.Builder
	fmt.Fprintf(&sb, "B13 archive: a 3-member cluster (TLS, fsync off), the archive on moto S3 (Zstd, segments of at most 10s or 8 MiB), %d samples.\n\n", len(rows))
	fmt.Fprintf(&sb, "RPO and cost under a steady writer (%d writes/s of 256 B for %ds), without the archiver and with it:\n\n", rate, seconds)
	sb.WriteString("| figure | least / median / greatest |\n|---|---|\n")
	fmt.Fprintf(&sb, "| writes archived per sample | %s |\n", col(func(s b13Sample) float64 { return float64(s.writes) }, "%.0f"))
	fmt.Fprintf(&sb, "| RPO p50, s (acknowledged → in a stored segment) | %s |\n", col(func(s b13Sample) float64 { return s.p50.Seconds() }, "%.2f"))
	fmt.Fprintf(&sb, "| RPO p99, s | %s |\n", col(func(s b13Sample) float64 { return s.p99.Seconds() }, "%.2f"))
	fmt.Fprintf(&sb, "| RPO max, s | %s |\n", col(func(s b13Sample) float64 { return s.max.Seconds() }, "%.2f"))
	fmt.Fprintf(&sb, "| archiver CPU per 1,000 writes, ms (this process with it less without) | %s |\n", col(func(s b13Sample) float64 { return per1000(s.selfCPU-s.selfBase, s) }, "%.0f"))
	fmt.Fprintf(&sb, "| members' CPU per 1,000 writes, ms, without the archiver | %s |\n", col(func(s b13Sample) float64 { return per1000(s.memBas, s) }, "%.0f"))
	fmt.Fprintf(&sb, "| members' CPU per 1,000 writes, ms, with it | %s |\n", col(func(s b13Sample) float64 { return per1000(s.membersCPU, s) }, "%.0f"))
	fmt.Fprintf(&sb, "| bytes stored per 1,000 writes | %s |\n", col(func(s b13Sample) float64 { return float64(s.bytes) * 1000 / float64(s.writes) }, "%.0f"))
	fmt.Fprintf(&sb, "| segments per sample | %s |\n", col(func(s b13Sample) float64 { return float64(s.segments) }, "%.0f"))
	fmt.Fprintf(&sb, "\nRestore of a base backup into a fresh etcd, alone and with the replay of %d revisions after it (%d samples):\n\n", revisions, len(replays))
	sb.WriteString("| figure | least / median / greatest |\n|---|---|\n")
	fmt.Fprintf(&sb, "| revisions replayed | %s |\n", rcol(func(r b13ReplaySample) float64 { return float64(r.revisions) }, "%.0f"))
	fmt.Fprintf(&sb, "| base alone: restore and start, s | %s |\n", rcol(func(r b13ReplaySample) float64 { return r.baseAlone.Seconds() }, "%.2f"))
	fmt.Fprintf(&sb, "| base and replay: restore, start, replay, s | %s |\n", rcol(func(r b13ReplaySample) float64 { return r.withReplay.Seconds() }, "%.1f"))
	fmt.Fprintf(&sb, "| the replay alone, s | %s |\n", rcol(func(r b13ReplaySample) float64 { return r.replay.Seconds() }, "%.1f"))
	fmt.Fprintf(&sb, "| replay rate, revisions/s | %s |\n", rcol(func(r b13ReplaySample) float64 { return r.rate() }, "%.0f"))
	sb.WriteString("\nAnchors (configured periods, not measured): a backup schedule's period, 1 h by default, and etcd-druid's delta-snapshot period, 20 s by default.\n")
	sb.WriteString("The RPO goal is p99 within the segment age limit plus 2 s: 12 s.\n")
	return sb.String()
}
