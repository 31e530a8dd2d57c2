package etcd

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// B11's figures, in seconds: each a set of samples, printed as least,
// median and greatest (writeB9Table), the in-place restore's also as its
// median over the anchor's.

// b11Figures are what B11 measured.
type b11Figures struct {
	// keys the cluster held when it was backed up; backupRevision and
	// backupBytes are the backup's revision and file size.
	keys           int
	backupRevision int64
	backupBytes    int64
	// after is the measured cluster's spec.quorumLoss.after.
	after time.Duration
	// took is the whole run's time, setup included.
	took time.Duration

	// Quorum loss, from the deletion of two members' volume claims and
	// pods: until status showed Available=False (notice), until
	// status.recovery named the survivor (acted), until Available=True
	// again (available: the survivor alone), until status.recovery was
	// Complete (complete), and until 3 healthy voters (all).
	qlNotice, qlActed, qlAvailable, qlComplete, qlAll []float64
	// In-place EtcdRestore, from its create: until Complete=True
	// (restoreComplete), and until the cluster was Available with 3
	// healthy voters and its status.recovery Complete (restoreAll).
	restoreComplete, restoreAll []float64
	// The anchor, from the delete of the EtcdCluster: until it and its
	// volume claims were gone (anchorGone); from the create of the new
	// one until it was Available with 3 healthy voters (anchorCreate);
	// and the whole (anchorAll).
	anchorGone, anchorCreate, anchorAll []float64
}

// rows are the table's rows, in order.
func (f *b11Figures) rows() []b9Row {
	return []b9Row{
		{label: fmt.Sprintf("(i) quorum loss, 2 of 3 members' volume claims and pods deleted, spec.quorumLoss Auto after %s: → Available, 3 healthy voters", f.after),
			unit: "s", samples: f.qlAll, metric: "quorum_loss_s"},
		{label: "… → Available=False (Tend saw the loss)", unit: "s", samples: f.qlNotice},
		{label: "… → status.recovery from the survivor (Tend acted)", unit: "s", samples: f.qlActed},
		{label: "… → Available=True again (the survivor alone, --force-new-cluster)", unit: "s", samples: f.qlAvailable, metric: "quorum_loss_available_s"},
		{label: "… → status.recovery Complete", unit: "s", samples: f.qlComplete},
		{label: "(ii) in-place EtcdRestore of the 3 members from the backup: create → Complete=True", unit: "s",
			samples: f.restoreComplete, vs: f.anchorAll, metric: "restore_complete_s"},
		{label: "(ii) in-place EtcdRestore: create → Available, 3 healthy voters, status.recovery Complete", unit: "s",
			samples: f.restoreAll, vs: f.anchorAll, metric: "restore_s"},
		{label: "(iii) anchor: delete the EtcdCluster (deletionPolicy Delete), create it anew with spec.bootstrap.restore from the backup: delete → Available, 3 healthy voters",
			unit: "s", samples: f.anchorAll, metric: "anchor_s"},
		{label: "… delete → the EtcdCluster and its volume claims gone", unit: "s", samples: f.anchorGone},
		{label: "… create → Available, 3 healthy voters", unit: "s", samples: f.anchorCreate},
	}
}

// write writes B11's table, with the ratio (ii)/(iii) and the setup under
// it.
func (f *b11Figures) write(w io.Writer) {
	writeB9Table(w, fmt.Sprintf("B11: recovery of a 3-member EtcdCluster, seconds (lower is better); the backup holds %d keys at revision %d, %.1f MB",
		f.keys, f.backupRevision, float64(f.backupBytes)/1e6), f.rows())
	ratio := "not measured"
	for _, r := range f.rows() {
		if r.metric == "restore_s" {
			if v, ok := r.ratio(); ok {
				ratio = fmt.Sprintf("%.2f", v)
			}
		}
	}
	fmt.Fprintf(w, "\n(ii)/(iii), the in-place restore's median (create → Available) over the anchor's (delete → Available): %s\n", ratio)
	var n []string
	for _, s := range [][]float64{f.qlAll, f.restoreAll, f.anchorAll} {
		n = append(n, fmt.Sprint(len(s)))
	}
	fmt.Fprintf(w, "Samples of (i), (ii), (iii): %s, one cluster taking them in turn, in an order that rotates; Available as the watch received it; B11 took %.1f min.\n",
		strings.Join(n, ", "), f.took.Minutes())
}

// metrics are the medians that b.ReportMetric reports, by unit, with the
// ratios of the rows that have an anchor.
func (f *b11Figures) metrics() map[string]float64 {
	out := map[string]float64{}
	for _, r := range f.rows() {
		if r.metric == "" || len(r.samples) == 0 {
			continue
		}
		out[r.metric] = distOf(r.samples).med
		if ratio, ok := r.ratio(); ok {
			out[strings.TrimSuffix(r.metric, "_s")+"_ratio"] = ratio
		}
	}
	return out
}
