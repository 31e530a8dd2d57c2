package etcd

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestWriteB11Table(t *testing.T) {
	g := NewWithT(t)
	f := &b11Figures{
		keys: 1000, backupRevision: 1002, backupBytes: 1_500_000, after: 10 * time.Second, took: 90 * time.Second,
		qlNotice: []float64{2, 1, 3}, qlActed: []float64{12, 11, 13}, qlAvailable: []float64{20, 21, 22},
		qlComplete: []float64{25, 24, 26}, qlAll: []float64{60, 50, 70},
		restoreComplete: []float64{30, 35, 40}, restoreAll: []float64{32, 36, 44},
		anchorGone: []float64{10, 12, 11}, anchorCreate: []float64{40, 38, 42}, anchorAll: []float64{50, 48, 54},
	}
	var b strings.Builder
	f.write(&b)
	g.Expect(b.String()).To(Equal(`
B11: recovery of a 3-member EtcdCluster, seconds (lower is better); the backup holds 1000 keys at revision 1002, 1.5 MB

| figure | unit | n | min | median | max | median ÷ anchor's | goal |
|---|---|---|---|---|---|---|---|
| (i) quorum loss, 2 of 3 members' volume claims and pods deleted, spec.quorumLoss Auto after 10s: → Available, 3 healthy voters | s | 3 | 50.0 | 60.0 | 70.0 |  |  |
| … → Available=False (Tend saw the loss) | s | 3 | 1.00 | 2.00 | 3.00 |  |  |
| … → status.recovery from the survivor (Tend acted) | s | 3 | 11.0 | 12.0 | 13.0 |  |  |
| … → Available=True again (the survivor alone, --force-new-cluster) | s | 3 | 20.0 | 21.0 | 22.0 |  |  |
| … → status.recovery Complete | s | 3 | 24.0 | 25.0 | 26.0 |  |  |
| (ii) in-place EtcdRestore of the 3 members from the backup: create → Complete=True | s | 3 | 30.0 | 35.0 | 40.0 | 0.70 |  |
| (ii) in-place EtcdRestore: create → Available, 3 healthy voters, status.recovery Complete | s | 3 | 32.0 | 36.0 | 44.0 | 0.72 |  |
| (iii) anchor: delete the EtcdCluster (deletionPolicy Delete), create it anew with spec.bootstrap.restore from the backup: delete → Available, 3 healthy voters | s | 3 | 48.0 | 50.0 | 54.0 |  |  |
| … delete → the EtcdCluster and its volume claims gone | s | 3 | 10.0 | 11.0 | 12.0 |  |  |
| … create → Available, 3 healthy voters | s | 3 | 38.0 | 40.0 | 42.0 |  |  |

(ii)/(iii), the in-place restore's median (create → Available) over the anchor's (delete → Available): 0.72
Samples of (i), (ii), (iii): 3, 3, 3, one cluster taking them in turn, in an order that rotates; Available as the watch received it; B11 took 1.5 min.
`))
}

func TestB11Metrics(t *testing.T) {
	g := NewWithT(t)
	f := &b11Figures{qlAll: []float64{60, 50, 70}, restoreAll: []float64{32, 36, 44}, anchorAll: []float64{50, 48, 54}}
	got := f.metrics()
	g.Expect(got).To(HaveLen(4))
	g.Expect(got).To(HaveKeyWithValue("quorum_loss_s", 60.0))
	g.Expect(got).To(HaveKeyWithValue("restore_s", 36.0))
	g.Expect(got).To(HaveKeyWithValue("anchor_s", 50.0))
	g.Expect(got["restore_ratio"]).To(BeNumerically("~", 0.72, 1e-9))

	// Without the anchor there is no ratio, and the table says so.
	f.anchorAll = nil
	g.Expect(f.metrics()).NotTo(HaveKey("restore_ratio"))
	var b strings.Builder
	f.write(&b)
	g.Expect(b.String()).To(ContainSubstring("(delete → Available): not measured\n"))
}
