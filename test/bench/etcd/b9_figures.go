package etcd

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// B9's figures: each is a set of samples, printed as least, median and
// greatest, and, where an anchor ran beside it, as the ratio of its median
// to the anchor's.

// dist is the least, the median and the greatest of n samples.
type dist struct {
	n             int
	min, med, max float64
}

// distOf returns the distribution of xs; the median of an even number of
// samples is the mean of the middle two.
func distOf(xs []float64) dist {
	if len(xs) == 0 {
		return dist{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	d := dist{n: len(s), min: s[0], max: s[len(s)-1]}
	if mid := len(s) / 2; len(s)%2 == 1 {
		d.med = s[mid]
	} else {
		d.med = (s[mid-1] + s[mid]) / 2
	}
	return d
}

// b9Row is one line of a B9 table.
type b9Row struct {
	label string
	// unit of the samples: "MB/s" (10^6 bytes a second) or "s".
	unit    string
	samples []float64
	// vs, when not nil, are the anchor's samples: the row shows its
	// median over the anchor's.
	vs []float64
	// goal, when above zero, is the least that ratio should be.
	goal float64
	// metric, when set, is the b.ReportMetric unit of the median.
	metric string
}

// ratio is the row's median over its anchor's, and whether there is one.
func (r b9Row) ratio() (float64, bool) {
	if r.vs == nil {
		return 0, false
	}
	d, a := distOf(r.samples), distOf(r.vs)
	if d.n == 0 || a.n == 0 || a.med == 0 {
		return 0, false
	}
	return d.med / a.med, true
}

// writeB9Table writes rows as a Markdown table under a title line.
func writeB9Table(w io.Writer, title string, rows []b9Row) {
	fmt.Fprintf(w, "\n%s\n\n", title)
	fmt.Fprintln(w, "| figure | unit | n | min | median | max | median ÷ anchor's | goal |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		d := distOf(r.samples)
		cells := []string{r.label, r.unit, fmt.Sprint(d.n), "–", "–", "–", "", ""}
		if d.n > 0 {
			cells[3], cells[4], cells[5] = num(d.min), num(d.med), num(d.max)
		}
		ratio, ok := r.ratio()
		if ok {
			cells[6] = fmt.Sprintf("%.2f", ratio)
		} else if r.vs != nil {
			cells[6] = "–"
		}
		if r.goal > 0 {
			switch {
			case !ok:
				cells[7] = fmt.Sprintf("≥ %.2f: not measured", r.goal)
			case ratio >= r.goal:
				cells[7] = fmt.Sprintf("≥ %.2f: met", r.goal)
			default:
				cells[7] = fmt.Sprintf("≥ %.2f: missed", r.goal)
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

// num formats a figure with three significant digits or more.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// mbPerSecond is a rate in MB/s (10^6 bytes a second, as etcdctl counts).
func mbPerSecond(bytes int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / seconds
}

// rotation is the order of the variants in round i: each round starts one
// further along, so that no variant always runs first (on a cold cache) or
// always right after the same other one.
func rotation[T any](variants []T, round int) []T {
	n := len(variants)
	out := make([]T, 0, n)
	for j := range n {
		out = append(out, variants[(round+j)%n])
	}
	return out
}

// b9Size is a database size that B9 measures at.
type b9Size struct {
	// label is as given: "100MB".
	label string
	bytes int64
}

// parseB9Sizes reads a comma-separated list of sizes in MB or GB (10^6 and
// 10^9 bytes), such as "100MB,1GB", each at least 1 MB.
func parseB9Sizes(s string) ([]b9Size, error) {
	var sizes []b9Size
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		var n float64
		var unit string
		if _, err := fmt.Sscanf(f, "%g%s", &n, &unit); err != nil {
			return nil, fmt.Errorf("size %q: want a number and MB or GB, such as 100MB", f)
		}
		var scale float64
		switch strings.ToUpper(unit) {
		case "MB":
			scale = 1e6
		case "GB":
			scale = 1e9
		default:
			return nil, fmt.Errorf("size %q: the unit is MB or GB", f)
		}
		if n*scale < 1e6 {
			return nil, fmt.Errorf("size %q: at least 1MB", f)
		}
		sizes = append(sizes, b9Size{label: f, bytes: int64(n * scale)})
	}
	return sizes, nil
}

// b9Compressions are the compressions tend backup is measured with, in
// the tables' order.
var b9Compressions = []string{"None", "Gzip", "Zstd"}

// b9Goal is the goal: tend backup at least 90% of the rate of a
// direct etcdctl snapshot save from the same member.
const b9Goal = 0.9

// b9Figures are what B9 measured at one database size.
type b9Figures struct {
	size b9Size
	// dbBytes is the member's database size; snapshotBytes the size of
	// its snapshot, as etcdutl snapshot status gives it.
	dbBytes, snapshotBytes int64
	// measured is set once the size's samples are taken.
	measured bool

	// Throughput, MB/s: etcdctl snapshot save (the anchor), tend backup
	// per compression as a whole (its Result's durationSeconds) and its
	// stream alone (snapshot, compression, SHA-256, upload; its log).
	etcdctl []float64
	tend    map[string][]float64
	stream  map[string][]float64
	// stored is the stored size over the snapshot's, per compression.
	stored map[string]float64
	// file is tend backup --compression=None to a file beside etcdctl's:
	// the agent without S3. motoUp and motoDown are moto's own rates for
	// as many bytes, from this machine: the ceiling of a backup to it.
	file, fileStream, motoUp, motoDown []float64

	// Verification, seconds: from the backup's Result to verify's (the
	// kubelet's stamps); the agent's own Verification.durationSeconds;
	// and its parts.
	verify, verifyAgent, verifyFetch, verifyRestore, verifyStep []float64

	// Restore, seconds: etcdutl snapshot restore of every member's data
	// at once (the anchor) and each one's; a new EtcdCluster from the
	// backup until Available, until Restored, and the parts of each
	// restore Job.
	etcdutl, etcdutlEach                                                          []float64
	restore, restored, restoreFetch, restoreEtcdutl, restoreInstall, restoreStart []float64
	// members of the restored clusters.
	members int
}

func newB9Figures(size b9Size) *b9Figures {
	return &b9Figures{size: size, tend: map[string][]float64{}, stream: map[string][]float64{}, stored: map[string]float64{}}
}

// throughputRows are the rows of the backup throughput table.
func (f *b9Figures) throughputRows() []b9Row {
	rows := []b9Row{{label: "etcdctl snapshot save → a file on the node (anchor; its own \"took\")", unit: "MB/s",
		samples: f.etcdctl, metric: "etcdctl_MB/s"}}
	for _, c := range b9Compressions {
		lc := strings.ToLower(c)
		stored := ""
		if s, ok := f.stored[c]; ok && c != "None" {
			stored = fmt.Sprintf(", stored %.0f%% of the snapshot", 100*s)
		}
		rows = append(rows,
			b9Row{label: fmt.Sprintf("tend backup --compression=%s → S3, read back, SHA-256 checked (Result durationSeconds%s)", c, stored),
				unit: "MB/s", samples: f.tend[c], vs: f.etcdctl, goal: b9Goal, metric: "tend_" + lc + "_MB/s"},
			b9Row{label: "… its stream alone: snapshot → " + c + " → SHA-256 → multipart upload (its log)",
				unit: "MB/s", samples: f.stream[c], vs: f.etcdctl})
	}
	return append(rows,
		b9Row{label: "tend backup --compression=None → a file on the node, as etcdctl writes (the agent without S3; Result durationSeconds)",
			unit: "MB/s", samples: f.file, vs: f.etcdctl, metric: "tend_file_MB/s"},
		b9Row{label: "… its stream alone: snapshot → SHA-256 → file, fsync (its log)", unit: "MB/s", samples: f.fileStream, vs: f.etcdctl},
		b9Row{label: "S3 multipart upload of as many random bytes from the host, 8 MiB parts, 4 at once (moto's ceiling, no etcd)",
			unit: "MB/s", samples: f.motoUp, vs: f.etcdctl, metric: "moto_put_MB/s"},
		b9Row{label: "… their download (what a read-back costs)", unit: "MB/s", samples: f.motoDown, metric: "moto_get_MB/s"})
}

// verifyRows are the rows of the verification table.
func (f *b9Figures) verifyRows() []b9Row {
	return []b9Row{
		{label: "verification: backup's Result → verify's Result (kubelet's stamps)", unit: "s", samples: f.verify, metric: "verify_s"},
		{label: "… as the agent reports it (Verification.durationSeconds, whole seconds)", unit: "s", samples: f.verifyAgent},
		{label: "… tend fetch: download, SHA-256 (Result durationSeconds)", unit: "s", samples: f.verifyFetch},
		{label: "… etcdutl snapshot restore (its log, kubelet's stamps)", unit: "s", samples: f.verifyRestore},
		{label: "… tend verify: local etcd up, HashKV and key counts of both (Result durationSeconds)", unit: "s", samples: f.verifyStep},
	}
}

// restoreRows are the rows of the restore table.
func (f *b9Figures) restoreRows() []b9Row {
	n := f.members
	return []b9Row{
		{label: fmt.Sprintf("etcdutl snapshot restore of the %d members' data at once (anchor; its log, kubelet's stamps)", n),
			unit: "s", samples: f.etcdutl, metric: "etcdutl_s"},
		{label: fmt.Sprintf("… each member's, while %d run", n), unit: "s", samples: f.etcdutlEach},
		{label: fmt.Sprintf("new %d-member EtcdCluster, spec.bootstrap.restore.source: create → Available", n),
			unit: "s", samples: f.restore, vs: f.etcdutl, metric: "restore_s"},
		{label: "… create → Restored=True: volumes, a restore Job per member", unit: "s", samples: f.restored, vs: f.etcdutl},
		{label: "… each Job's tend fetch (Result durationSeconds)", unit: "s", samples: f.restoreFetch},
		{label: "… each Job's etcdutl snapshot restore (its log)", unit: "s", samples: f.restoreEtcdutl},
		{label: "… each Job's tend restore install (Result durationSeconds)", unit: "s", samples: f.restoreInstall},
		{label: "… Restored=True → Available: StatefulSet, members start", unit: "s", samples: f.restoreStart},
	}
}

// write writes the size's tables.
func (f *b9Figures) write(w io.Writer) {
	what := fmt.Sprintf("database %.0f MB, snapshot %.0f MB", float64(f.dbBytes)/1e6, float64(f.snapshotBytes)/1e6)
	writeB9Table(w, fmt.Sprintf("B9 %s: backup throughput, MB/s (10^6 bytes of the uncompressed snapshot a second; higher is better); %s",
		f.size.label, what), f.throughputRows())
	if len(f.verify) > 0 {
		writeB9Table(w, fmt.Sprintf("B9 %s: verification of a --compression=None backup, seconds; %s", f.size.label, what), f.verifyRows())
	}
	if len(f.restore) > 0 || len(f.etcdutl) > 0 {
		writeB9Table(w, fmt.Sprintf("B9 %s: restore from a --compression=None backup, seconds (lower is better); %s", f.size.label, what), f.restoreRows())
	}
}

// metrics are the medians that b.ReportMetric reports, by unit, with the
// ratios of the rows that have an anchor and a metric.
func (f *b9Figures) metrics() map[string]float64 {
	out := map[string]float64{}
	for _, rows := range [][]b9Row{f.throughputRows(), f.verifyRows(), f.restoreRows()} {
		for _, r := range rows {
			if r.metric == "" || len(r.samples) == 0 {
				continue
			}
			out[r.metric] = distOf(r.samples).med
			if ratio, ok := r.ratio(); ok {
				out[strings.TrimSuffix(strings.TrimSuffix(r.metric, "_MB/s"), "_s")+"_ratio"] = ratio
			}
		}
	}
	return out
}
