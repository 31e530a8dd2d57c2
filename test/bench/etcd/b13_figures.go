package etcd

import (
	"fmt"
	"io"
	"time"
)

// B13's cluster figures: a new 3-member EtcdCluster started from a base
// backup alone, against one started from the same base with the archive
// replayed onto it to a revision far past the base (each member's restore
// Job replays it; the three run side by side). Printed as least, median
// and greatest (writeB9Table).

// b13Figures are what B13's restore part measured.
type b13Figures struct {
	// revisions is how far past the base the target is; members the
	// restored cluster's size.
	revisions int64
	members   int
	took      time.Duration
	// alone and replayed are the times from the EtcdCluster's create to
	// Available; restored, of each replayed sample, to its Restored
	// condition (every member's data in place, the replays included).
	alone, replayed, restored []float64
}

// rows are the table's rows, in order.
func (f *b13Figures) rows() []b9Row {
	var cost, rate []float64
	for i := range min(len(f.alone), len(f.replayed)) {
		d := f.replayed[i] - f.alone[i]
		cost = append(cost, d)
		if d > 0 {
			rate = append(rate, float64(f.revisions)/d)
		}
	}
	return []b9Row{
		{label: fmt.Sprintf("new %d-member cluster from the base alone: create → Available", f.members), unit: "s", samples: f.alone, metric: "base_alone_s"},
		{label: fmt.Sprintf("… from the base and %d archived revisions replayed: create → Available", f.revisions), unit: "s", samples: f.replayed, vs: f.alone, metric: "base_and_replay_s"},
		{label: "… create → Restored (every member's data in place, the replays included)", unit: "s", samples: f.restored, metric: "restored_s"},
		{label: "the replay's cost: each round's difference of the two", unit: "s", samples: cost, metric: "replay_cost_s"},
		{label: "revisions replayed per second of that cost (every member replays at once)", unit: "rev/s", samples: rate, metric: "replay_rate"},
	}
}

// write writes the table and the setup under it.
func (f *b13Figures) write(w io.Writer) {
	writeB9Table(w, fmt.Sprintf("B13: restore to a point of a %d-member EtcdCluster, %d revisions past its base, on the local cluster", f.members, f.revisions), f.rows())
	fmt.Fprintf(w, "\nSamples: %d of each, a new cluster each, alternating; the archive on moto S3; B13's restore part took %.1f min.\n",
		len(f.alone), f.took.Minutes())
}

// metrics are the medians that b.ReportMetric reports, by unit.
func (f *b13Figures) metrics() map[string]float64 {
	out := map[string]float64{}
	for _, r := range f.rows() {
		if r.metric != "" && len(r.samples) > 0 {
			out[r.metric] = distOf(r.samples).med
		}
	}
	return out
}
