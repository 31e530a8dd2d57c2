package etcd

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// B12's figures: the defragmentation of a 3-member cluster by Tend against
// the anchor (etcdctl defrag --cluster: every member at once in turn, the
// leader wherever it falls), and the recovery from NOSPACE. Each is a set
// of samples, printed as least, median and greatest (writeB9Table).

// b12Figures are what B12 measured.
type b12Figures struct {
	// size is the database written before each defragmentation, half of
	// it history that a compaction frees; quota the NOSPACE cluster's.
	size, quota int64
	took        time.Duration

	// Per variant (tend, anchor): elections (the raft term's rise less the
	// planned leadership moves), the longest time without an acknowledged
	// write during the defragmentation, its total time, and the members'
	// database sizes summed, before and after.
	tendElections, anchorElections []float64
	tendGap, anchorGap             []float64
	tendTotal, anchorTotal         []float64
	tendAfterMB, anchorAfterMB     []float64
	tendBeforeMB, anchorBeforeMB   []float64
	// noSpace is the time from the write that etcd refused with NOSPACE
	// to the first write it accepted again (Auto).
	noSpace []float64
	// A volume migration of migrateSize bytes to another class: its total
	// time, elections, longest write gap and acknowledged writes lost.
	migrateSize                                             int64
	migrateTotal, migrateElections, migrateGap, migrateLost []float64
}

// rows are the table's rows, in order.
func (f *b12Figures) rows() []b9Row {
	return []b9Row{
		{label: "elections during the defragmentation (raft term rise less planned leadership moves): Tend", unit: "n", samples: f.tendElections, metric: "tend_elections"},
		{label: "… anchor, etcdctl defrag --cluster", unit: "n", samples: f.anchorElections, metric: "anchor_elections"},
		{label: "longest gap between acknowledged writes: Tend", unit: "s", samples: f.tendGap, vs: f.anchorGap, metric: "tend_gap_s"},
		{label: "… anchor", unit: "s", samples: f.anchorGap, metric: "anchor_gap_s"},
		{label: "total time, request → every member done: Tend", unit: "s", samples: f.tendTotal, vs: f.anchorTotal, metric: "tend_total_s"},
		{label: "… anchor", unit: "s", samples: f.anchorTotal, metric: "anchor_total_s"},
		{label: "members' databases summed, before: Tend", unit: "MB", samples: f.tendBeforeMB},
		{label: "… after: Tend", unit: "MB", samples: f.tendAfterMB, vs: f.anchorAfterMB, metric: "tend_after_mb"},
		{label: "… after: anchor", unit: "MB", samples: f.anchorAfterMB, metric: "anchor_after_mb"},
		{label: fmt.Sprintf("NOSPACE (quota %d MB, noSpace Auto): refused write → accepted write", f.quota/1e6), unit: "s", samples: f.noSpace, metric: "nospace_s"},
		{label: fmt.Sprintf("volume migration of 3 members (%d MB, class change): spec → Completed, backup included", f.migrateSize/1e6), unit: "s", samples: f.migrateTotal, metric: "migrate_s"},
		{label: "… elections (raft term rise less planned leadership moves)", unit: "n", samples: f.migrateElections, metric: "migrate_elections"},
		{label: "… longest gap between acknowledged writes", unit: "s", samples: f.migrateGap, metric: "migrate_gap_s"},
		{label: "… acknowledged writes lost", unit: "n", samples: f.migrateLost, metric: "migrate_lost"},
	}
}

// goals says whether Tend met B12's goals: no election, and a longest
// write gap below the anchor's and under a second.
func (f *b12Figures) goals() string {
	var out []string
	e, g, a := distOf(f.tendElections), distOf(f.tendGap), distOf(f.anchorGap)
	switch {
	case e.n == 0:
		out = append(out, "elections 0: not measured")
	case e.max == 0:
		out = append(out, "elections 0: met")
	default:
		out = append(out, fmt.Sprintf("elections 0: missed (max %.0f)", e.max))
	}
	switch {
	case g.n == 0 || a.n == 0:
		out = append(out, "write gap below the anchor's and under 1 s: not measured")
	case g.max < 1 && g.med < a.med:
		out = append(out, "write gap below the anchor's and under 1 s: met")
	default:
		out = append(out, fmt.Sprintf("write gap below the anchor's and under 1 s: missed (Tend max %.2f s, median %.2f s; anchor median %.2f s)", g.max, g.med, a.med))
	}
	switch m, l := distOf(f.migrateElections), distOf(f.migrateLost); {
	case m.n == 0:
		out = append(out, "migration: not measured")
	case m.max <= 1 && l.max == 0:
		out = append(out, "migration with at most 1 election and 0 writes lost: met")
	default:
		out = append(out, fmt.Sprintf("migration with at most 1 election and 0 writes lost: missed (elections max %.0f, lost max %.0f)", m.max, l.max))
	}
	return strings.Join(out, "; ")
}

// write writes B12's table, the goals and the setup under it.
func (f *b12Figures) write(w io.Writer) {
	writeB9Table(w, fmt.Sprintf("B12: storage maintenance of a 3-member EtcdCluster, %d MB written (half of it history, compacted) under a steady writer", f.size/1e6), f.rows())
	fmt.Fprintf(w, "\nGoals: %s.\n", f.goals())
	fmt.Fprintf(w, "Samples (Tend, anchor, NOSPACE, migration): %d, %d, %d, %d, a new cluster each, in an order that rotates; B12 took %.1f min.\n",
		len(f.tendTotal), len(f.anchorTotal), len(f.noSpace), len(f.migrateTotal), f.took.Minutes())
}

// metrics are the medians that b.ReportMetric reports, by unit.
func (f *b12Figures) metrics() map[string]float64 {
	out := map[string]float64{}
	for _, r := range f.rows() {
		if r.metric != "" && len(r.samples) > 0 {
			out[r.metric] = distOf(r.samples).med
		}
	}
	return out
}
