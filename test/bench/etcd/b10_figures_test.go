package etcd

import (
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// b10At is a moment ms milliseconds after a fixed origin.
func b10At(ms int) time.Time {
	return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
}

// b10Writes are writes that each end at the given milliseconds; a negative
// one failed (and ended at its absolute value).
func b10Writes(ends ...int) []b10Write {
	var out []b10Write
	for i, e := range ends {
		w := b10Write{key: string(rune('a' + i)), value: "v"}
		if e < 0 {
			e, w.err = -e, errors.New("no leader")
		}
		w.start, w.end = b10At(e-10), b10At(e)
		out = append(out, w)
	}
	return out
}

func TestB10LongestGap(t *testing.T) {
	for _, tc := range []struct {
		name     string
		writes   []b10Write
		from, to int
		want     time.Duration
		wantAt   int
	}{
		{"steady", b10Writes(0, 50, 100, 150, 200, 250), 60, 190, 50 * time.Millisecond, 50},
		{"a gap inside", b10Writes(0, 50, 100, 1400, 1450), 60, 1420, 1300 * time.Millisecond, 100},
		{"failed writes are no acknowledgement", b10Writes(0, 50, -100, -900, 1000, 1050), 60, 1020, 950 * time.Millisecond, 50},
		{"the gap that spans the window's start counts", b10Writes(0, 800, 850), 500, 820, 800 * time.Millisecond, 0},
		{"the gap that spans the window's end counts", b10Writes(0, 50, 900), 40, 60, 850 * time.Millisecond, 50},
		{"none after the end: up to the end", b10Writes(0, 50), 40, 500, 450 * time.Millisecond, 50},
		{"none before the start: from the start", b10Writes(600, 650), 100, 640, 500 * time.Millisecond, 100},
		{"none at all", nil, 100, 400, 300 * time.Millisecond, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			gap, at := b10LongestGap(tc.writes, b10At(tc.from), b10At(tc.to))
			g.Expect(gap).To(Equal(tc.want))
			g.Expect(at).To(Equal(b10At(tc.wantAt)))
		})
	}
}

func TestB10FailedLostAcked(t *testing.T) {
	g := NewWithT(t)
	writes := b10Writes(0, -50, -100, 150, -200, 250)
	g.Expect(b10Failed(writes)).To(Equal(3))
	g.Expect(b10Acked(writes)).To(Equal(3))
	spans := b10FailedSpans(writes)
	g.Expect(spans).To(HaveLen(2))
	g.Expect(spans[0]).To(Equal(b10Span{from: b10At(40), to: b10At(100), n: 2, last: writes[2].err}))
	g.Expect(spans[1].n).To(Equal(1))

	// a, d, f acknowledged; b, c, e failed.
	held := map[string]string{"a": "v", "d": "other", "b": "v", "c": "x"}
	lost, applied := b10Lost(writes, held)
	g.Expect(lost).To(Equal([]string{"d", "f"}), "missing or with another value")
	g.Expect(applied).To(Equal(1), "b failed but holds its value")
}

func TestB10TermBeforeAndLeaders(t *testing.T) {
	g := NewWithT(t)
	samples := []b10TermSample{
		{at: b10At(0), member: "b10-0", term: 2, leader: "b10-1"},
		{at: b10At(0), member: "b10-1", term: 2, leader: "b10-1"},
		{at: b10At(500), member: "b10-2", err: errors.New("down")},
		{at: b10At(900), member: "b10-0", term: 3, leader: "b10-0"},
		{at: b10At(1000), member: "b10-1", term: 3, leader: "b10-0"},
		{at: b10At(1500), member: "b10-2", term: 2, leader: "b10-1"}, // a member that lags
		{at: b10At(2000), member: "b10-2", term: 4, leader: ""},      // an election under way
		{at: b10At(2500), member: "b10-2", term: 4, leader: "b10-2", version: "3.6.16"},
	}
	term, ok := b10TermBefore(samples, b10At(900))
	g.Expect(ok).To(BeTrue())
	g.Expect(term).To(Equal(uint64(2)))
	term, _ = b10TermBefore(samples, b10At(901))
	g.Expect(term).To(Equal(uint64(3)))
	_, ok = b10TermBefore(samples, b10At(0))
	g.Expect(ok).To(BeFalse(), "nothing before the first poll")

	var got []string
	for _, m := range b10Leaders(samples) {
		got = append(got, m.what)
	}
	g.Expect(got).To(Equal([]string{
		"raft term 2, leader b10-1 (as b10-0 reports)",
		"raft term 3, leader b10-0 (as b10-0 reports)",
		"raft term 4, leader b10-2 (as b10-2 reports, itself on 3.6.16)",
	}))
}

func TestParseB10Variants(t *testing.T) {
	g := NewWithT(t)
	v, err := parseB10Variants("anchor, tend")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal([]string{"tend", "anchor"}), "in the table's order")
	v, err = parseB10Variants("anchor")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal([]string{"anchor"}))
	_, err = parseB10Variants("druid")
	g.Expect(err).To(MatchError(ContainSubstring(`unknown variant "druid"`)))
	_, err = parseB10Variants(" , ")
	g.Expect(err).To(HaveOccurred())
}

func b10TestSamples() map[string][]b10Sample {
	s := func(v string, roll, gap time.Duration, elections int64, restarts ...time.Duration) b10Sample {
		return b10Sample{variant: v, roll: roll, gap: gap, elections: elections, acked: 1000, restarts: restarts,
			electionTimeout: time.Second, backupWait: 20 * time.Second, complete: roll + 5*time.Second}
	}
	return map[string][]b10Sample{
		"tend": {
			s("tend", 40*time.Second, 300*time.Millisecond, 1, 10*time.Second, 11*time.Second, 12*time.Second),
			s("tend", 42*time.Second, 400*time.Millisecond, 1, 10*time.Second),
			s("tend", 44*time.Second, 20*time.Second, 2, 10*time.Second),
		},
		"anchor": {
			s("anchor", 30*time.Second, 2*time.Second, 2, 6*time.Second, 7*time.Second, 8*time.Second),
			s("anchor", 31*time.Second, 3*time.Second, 3, 9*time.Second),
		},
	}
}

func TestB10BoundAndGoals(t *testing.T) {
	g := NewWithT(t)
	samples := b10TestSamples()
	bound, restart, election, what := b10Bound(samples)
	g.Expect(restart).To(Equal(7500*time.Millisecond), "the anchor's median restart: of 6, 7, 8, 9 s")
	g.Expect(election).To(Equal(time.Second))
	g.Expect(bound).To(Equal(8500 * time.Millisecond))
	g.Expect(what).To(ContainSubstring("anchor's median member restart"))
	g.Expect(what).To(ContainSubstring("over 4 restarts"))

	delete(samples, "anchor")
	_, restart, _, what = b10Bound(samples)
	g.Expect(restart).To(Equal(10 * time.Second))
	g.Expect(what).To(ContainSubstring("tend's"))

	_, restart, election, _ = b10Bound(nil)
	g.Expect(restart).To(BeZero())
	g.Expect(election).To(Equal(defaultElectionTimeout))

	g.Expect(b10Goals(b10Sample{elections: 1, gap: time.Second}, 2*time.Second)).To(Equal("met"))
	g.Expect(b10Goals(b10Sample{elections: 2, gap: 3 * time.Second, lost: 1}, 2*time.Second)).To(Equal("missed: 2 elections, gap, lost writes"))
}

func TestWriteB10Table(t *testing.T) {
	g := NewWithT(t)
	var b strings.Builder
	writeB10Table(&b, b10Setup{from: "v3.5.35", to: "v3.6.16", interval: 50 * time.Millisecond, callTimeout: 2 * time.Second,
		anchorTLS: true, took: 30 * time.Minute}, []string{"tend", "anchor"}, b10TestSamples())
	out := b.String()
	g.Expect(out).To(ContainSubstring("upgrade v3.5.35 → v3.6.16"))
	g.Expect(out).To(ContainSubstring("election timeout 1000 ms + one restart 7.5 s"))
	g.Expect(out).To(ContainSubstring("= 8.5 s"))
	g.Expect(out).To(ContainSubstring("| tend | 1 | 20.0 | 40.0 | 45.0 | 1 | 300 | 0 | 0 | 1000 | 11.0 | met |"))
	g.Expect(out).To(ContainSubstring("| tend | 3 | 20.0 | 44.0 | 49.0 | 2 | 20000 | 0 | 0 | 1000 | 10.0 | missed: 2 elections, gap |"))
	g.Expect(out).To(ContainSubstring("| tend | median | 20.0 | 42.0 | 47.0 | 1 | 400 | 0 | 0 | 1000 | 10.0 | met in 2 of 3 |"))
	g.Expect(out).To(ContainSubstring("| anchor | 1 | – | 30.0 | – | 2 |"), "no backup for the anchor")
	g.Expect(out).To(ContainSubstring("| anchor | median | – | 30.5 | – | 2.5 |"))
	g.Expect(out).To(ContainSubstring("TLS as Tend's"))
	lines := strings.Split(out, "\n")
	var rows int
	for _, l := range lines {
		if strings.HasPrefix(l, "| ") {
			rows++
			g.Expect(strings.Count(l, "|")).To(Equal(13), l)
		}
	}
	g.Expect(rows).To(Equal(1+3+3+2+3), "head, tend's 3 samples and 3 statistics, anchor's 2 and 3")

	b.Reset()
	writeB10Table(&b, b10Setup{from: "v3.5.35", to: "v3.6.16"}, []string{"tend", "anchor"}, map[string][]b10Sample{})
	g.Expect(b.String()).To(ContainSubstring("one restart (none measured)"))
	g.Expect(b.String()).To(ContainSubstring("| anchor | – |"))
	g.Expect(b.String()).To(ContainSubstring("plain http"))
}

func TestB10Metrics(t *testing.T) {
	g := NewWithT(t)
	m := b10Metrics(b10TestSamples())
	g.Expect(m).To(HaveKeyWithValue("tend_roll_s", 42.0))
	g.Expect(m).To(HaveKeyWithValue("tend_backup_s", 20.0))
	g.Expect(m).To(HaveKeyWithValue("tend_elections", 1.0))
	g.Expect(m).To(HaveKeyWithValue("anchor_gap_ms", 2500.0))
	g.Expect(m).NotTo(HaveKey("anchor_backup_s"))
	g.Expect(m).To(HaveKey("anchor_lost_writes"))
}

func TestB10RaftLines(t *testing.T) {
	g := NewWithT(t)
	log := strings.Join([]string{
		b10At(-3000).Format(time.RFC3339Nano) + ` {"level":"info","logger":"raft","msg":"a became follower at term 2"}`,
		b10At(500).Format(time.RFC3339Nano) + ` {"level":"info","msg":"recognized and used environment variable","variable-name":"ETCD_INITIAL_ADVERTISE_PEER_URLS"}`,
		b10At(1000).Format(time.RFC3339Nano) + ` {"level":"info","logger":"raft","msg":"a is starting a new election at term 2"}`,
		b10At(1500).Format(time.RFC3339Nano) + ` {"level":"warn","msg":"prober detected unhealthy status","remote-peer-id":"b","error":"no such host"}`,
		b10At(9000).Format(time.RFC3339Nano) + ` {"level":"info","logger":"raft","msg":"a became leader at term 3"}`,
		"not a stamped line",
		"",
	}, "\n")
	g.Expect(b10RaftLines(log, b10At(0), b10At(5000))).To(Equal([]string{
		"   -3.00s a became follower at term 2",
		"   +1.00s a is starting a new election at term 2",
		"   +1.50s prober detected unhealthy status (peer b): no such host",
	}))
}
