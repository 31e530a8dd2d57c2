package etcd

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestDistOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want dist
	}{
		{"none", nil, dist{}},
		{"one", []float64{2}, dist{n: 1, min: 2, med: 2, max: 2}},
		{"odd, unsorted", []float64{3, 1, 2}, dist{n: 3, min: 1, med: 2, max: 3}},
		{"even: the mean of the middle two", []float64{4, 1, 3, 2}, dist{n: 4, min: 1, med: 2.5, max: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			in := append([]float64(nil), tc.in...)
			g.Expect(distOf(tc.in)).To(Equal(tc.want))
			g.Expect(tc.in).To(Equal(in), "distOf must not sort its input")
		})
	}
}

func TestB9RowRatio(t *testing.T) {
	for _, tc := range []struct {
		name   string
		row    b9Row
		want   float64
		wantOK bool
	}{
		{"no anchor", b9Row{samples: []float64{1}}, 0, false},
		{"anchor without samples", b9Row{samples: []float64{1}, vs: []float64{}}, 0, false},
		{"row without samples", b9Row{vs: []float64{1}}, 0, false},
		{"medians", b9Row{samples: []float64{90, 80, 100}, vs: []float64{100, 200, 50}}, 0.9, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, ok := tc.row.ratio()
			g.Expect(ok).To(Equal(tc.wantOK))
			g.Expect(got).To(BeNumerically("~", tc.want, 1e-9))
		})
	}
}

func TestWriteB9Table(t *testing.T) {
	g := NewWithT(t)
	anchor := []float64{200, 210, 190}
	var b strings.Builder
	writeB9Table(&b, "B9 backup, 1 GB", []b9Row{
		{label: "etcdctl (anchor)", unit: "MB/s", samples: anchor},
		{label: "tend None", unit: "MB/s", samples: []float64{185, 181, 189}, vs: anchor, goal: 0.9},
		{label: "tend Gzip", unit: "MB/s", samples: []float64{50, 60, 55}, vs: anchor, goal: 0.9},
		{label: "tend Zstd", unit: "MB/s", vs: anchor, goal: 0.9},
		{label: "… read back", unit: "s", samples: []float64{1.234}},
	})
	g.Expect(b.String()).To(Equal(`
B9 backup, 1 GB

| figure | unit | n | min | median | max | median ÷ anchor's | goal |
|---|---|---|---|---|---|---|---|
| etcdctl (anchor) | MB/s | 3 | 190 | 200 | 210 |  |  |
| tend None | MB/s | 3 | 181 | 185 | 189 | 0.93 | ≥ 0.90: met |
| tend Gzip | MB/s | 3 | 50.0 | 55.0 | 60.0 | 0.28 | ≥ 0.90: missed |
| tend Zstd | MB/s | 0 | – | – | – | – | ≥ 0.90: not measured |
| … read back | s | 1 | 1.23 | 1.23 | 1.23 |  |  |
`))
}

func TestMBPerSecond(t *testing.T) {
	g := NewWithT(t)
	g.Expect(mbPerSecond(250_000_000, 2.5)).To(BeNumerically("~", 100, 1e-9))
	g.Expect(mbPerSecond(1, 0)).To(BeZero())
}

func TestRotation(t *testing.T) {
	g := NewWithT(t)
	v := []string{"etcdctl", "None", "Gzip", "Zstd"}
	g.Expect(rotation(v, 0)).To(Equal(v))
	g.Expect(rotation(v, 1)).To(Equal([]string{"None", "Gzip", "Zstd", "etcdctl"}))
	g.Expect(rotation(v, 5)).To(Equal([]string{"None", "Gzip", "Zstd", "etcdctl"}))
	// Over as many rounds as variants, each variant runs in each place once.
	for pos := range v {
		var seen []string
		for round := range v {
			seen = append(seen, rotation(v, round)[pos])
		}
		g.Expect(seen).To(ConsistOf(v))
	}
}

func TestEtcdctlTook(t *testing.T) {
	g := NewWithT(t)
	log := `{"level":"info","ts":"2026-11-23T10:20:30.000001Z","caller":"snapshot/v3_snapshot.go:83","msg":"created temporary db file","path":"/scratch/x.db.part"}
{"level":"info","ts":"2026-11-23T10:20:30.100000Z","caller":"snapshot/v3_snapshot.go:96","msg":"fetching snapshot","endpoint":"https://b9-0:2379"}
{"level":"info","ts":"2026-11-23T10:20:35.100000Z","caller":"snapshot/v3_snapshot.go:111","msg":"fetched snapshot","endpoint":"https://b9-0:2379","size":"1.1 GB","took":"5.012345678s","etcd-version":"3.6.0"}
Snapshot saved at /scratch/x.db
`
	took, err := etcdctlTook(log)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(took).To(Equal(5012345678 * time.Nanosecond))

	// With the kubelet's timestamps in front, too.
	took, err = etcdctlTook(`2026-11-23T10:20:35.2Z {"msg":"fetched snapshot","took":"800ms"}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(took).To(Equal(800 * time.Millisecond))

	_, err = etcdctlTook(`{"msg":"fetching snapshot"}`)
	g.Expect(err).To(MatchError(ContainSubstring(`no "fetched snapshot" line`)))
	_, err = etcdctlTook(`{"msg":"fetched snapshot","took":"soon"}`)
	g.Expect(err).To(MatchError(ContainSubstring(`took "soon"`)))
}

func TestStampedSpan(t *testing.T) {
	g := NewWithT(t)
	log := "2026-11-23T10:20:30.500000000Z 2026-11-23T10:20:30Z\tinfo\tsnapshot/v3_snapshot.go:305\trestoring snapshot\t{\"path\": \"/scratch/snapshot.db\"}\n" +
		"2026-11-23T10:20:31.000000000Z 2026-11-23T10:20:31Z\tinfo\tmembership/store.go:141\tTrimming membership information from the backend...\n" +
		"2026-11-23T10:20:33.750000000Z 2026-11-23T10:20:33Z\tinfo\tsnapshot/v3_snapshot.go:333\trestored snapshot\t{\"path\": \"/scratch/snapshot.db\"}\n"
	start, end, err := stampedSpan(log, etcdutlRestoring, etcdutlRestored)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(end.Sub(start)).To(Equal(3250 * time.Millisecond))
	g.Expect(start.UTC().Format(time.RFC3339Nano)).To(Equal("2026-11-23T10:20:30.5Z"))

	// The end must come after the start.
	_, _, err = stampedSpan(log, etcdutlRestored, etcdutlRestoring)
	g.Expect(err).To(MatchError(ContainSubstring(`no line with "restored snapshot" followed by one with "restoring snapshot"`)))
	_, _, err = stampedSpan("soon restoring snapshot\n", etcdutlRestoring, etcdutlRestored)
	g.Expect(err).To(MatchError(ContainSubstring("no kubelet timestamp")))
}

func TestAgentLogSeconds(t *testing.T) {
	g := NewWithT(t)
	log := `{"level":"info","msg":"Taking a snapshot","member":"b9-0"}
{"level":"info","msg":"Stored the snapshot","member":"b9-0","dbSizeBytes":1000,"seconds":4.25}
`
	s, ok := agentLogSeconds(log, "Stored the snapshot")
	g.Expect(ok).To(BeTrue())
	g.Expect(s).To(Equal(4.25))
	_, ok = agentLogSeconds(log, "Taking a snapshot")
	g.Expect(ok).To(BeFalse(), "a line without seconds")
	_, ok = agentLogSeconds("", "Stored the snapshot")
	g.Expect(ok).To(BeFalse())
}

func TestLastStamp(t *testing.T) {
	g := NewWithT(t)
	at, err := lastStamp("2026-11-23T10:20:30.5Z {\"msg\":\"x\"}\n2026-11-23T10:20:31.25Z {\"op\":\"backup\"}\n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(at.UTC().Format(time.RFC3339Nano)).To(Equal("2026-11-23T10:20:31.25Z"))
	_, err = lastStamp("")
	g.Expect(err).To(MatchError(ContainSubstring("no kubelet timestamp")))
}

func TestSnapshotStatusSize(t *testing.T) {
	g := NewWithT(t)
	size, err := snapshotStatusSize("Deprecated: Use `etcdutl snapshot status` instead.\n\n" +
		`{"hash":3854571231,"revision":40012,"totalKey":40001,"totalSize":1073741824,"version":"3.6.0"}` + "\n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(size).To(Equal(int64(1073741824)))
	_, err = snapshotStatusSize("{}\n")
	g.Expect(err).To(MatchError(ContainSubstring("no JSON line with a totalSize")))
}

func TestParseB9Sizes(t *testing.T) {
	g := NewWithT(t)
	sizes, err := parseB9Sizes("100MB, 1GB,1.5gb")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sizes).To(Equal([]b9Size{{"100MB", 100_000_000}, {"1GB", 1_000_000_000}, {"1.5gb", 1_500_000_000}}))
	for _, bad := range []string{"", "100", "100KB", "MB", "0.5MB"} {
		_, err := parseB9Sizes(bad)
		g.Expect(err).To(HaveOccurred(), bad)
	}
}

func TestB9FiguresTablesAndMetrics(t *testing.T) {
	g := NewWithT(t)
	f := newB9Figures(b9Size{label: "1GB", bytes: 1e9})
	f.dbBytes, f.snapshotBytes, f.members = 1_100_000_000, 1_050_000_000, 3
	f.etcdctl = []float64{200, 210, 190}
	f.tend["None"] = []float64{180, 185, 190}
	f.stream["None"] = []float64{300, 310, 320}
	f.tend["Gzip"] = []float64{100, 110, 90}
	f.stored["Gzip"] = 0.52
	f.verify = []float64{10, 11, 12}
	f.verifyAgent = []float64{10, 11, 12}
	f.etcdutl = []float64{4, 5, 6}
	f.restore = []float64{30, 25, 35}
	f.restored = []float64{20, 18, 22}

	var b strings.Builder
	f.write(&b)
	out := b.String()
	g.Expect(out).To(ContainSubstring("B9 1GB: backup throughput, MB/s (10^6 bytes of the uncompressed snapshot a second; higher is better); database 1100 MB, snapshot 1050 MB"))
	g.Expect(out).To(ContainSubstring("| tend backup --compression=None → S3, read back, SHA-256 checked (Result durationSeconds) | MB/s | 3 | 180 | 185 | 190 | 0.93 | ≥ 0.90: met |"))
	g.Expect(out).To(ContainSubstring("| … its stream alone: snapshot → None → SHA-256 → multipart upload (its log) | MB/s | 3 | 300 | 310 | 320 | 1.55 |  |"))
	g.Expect(out).To(ContainSubstring("| tend backup --compression=Gzip → S3, read back, SHA-256 checked (Result durationSeconds, stored 52% of the snapshot) | MB/s | 3 | 90.0 | 100 | 110 | 0.50 | ≥ 0.90: missed |"))
	g.Expect(out).To(ContainSubstring("| tend backup --compression=Zstd → S3, read back, SHA-256 checked (Result durationSeconds) | MB/s | 0 | – | – | – | – | ≥ 0.90: not measured |"))
	g.Expect(out).To(ContainSubstring("B9 1GB: verification of a --compression=None backup, seconds"))
	g.Expect(out).To(ContainSubstring("| new 3-member EtcdCluster, spec.bootstrap.restore.source: create → Available | s | 3 | 25.0 | 30.0 | 35.0 | 6.00 |  |"))

	g.Expect(f.metrics()).To(Equal(map[string]float64{
		"etcdctl_MB/s": 200, "tend_none_MB/s": 185, "tend_none_ratio": 0.925, "tend_gzip_MB/s": 100, "tend_gzip_ratio": 0.5,
		"verify_s": 11, "etcdutl_s": 5, "restore_s": 30, "restore_ratio": 6,
	}))

	// A size without verification or restores prints the throughput only.
	f = newB9Figures(b9Size{label: "100MB", bytes: 1e8})
	b.Reset()
	f.write(&b)
	g.Expect(b.String()).NotTo(ContainSubstring("verification"))
	g.Expect(b.String()).NotTo(ContainSubstring("restore from"))
}
