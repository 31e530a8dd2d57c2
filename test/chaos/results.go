//go:build e2e

package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// row is one scenario's counted results. A count that does not apply to
// the scenario stays -1 and prints as "-".
type row struct {
	Scenario   string
	Runs       int
	Kills      int
	Duplicates int // PodSet: the most pods seen above the spec at any moment; roll: member pods re-created more than once; backup: snapshot Jobs made more than once; defragmentation: members defragmented at the same time
	Orphans    int // pods without a controller, or volumes of no member
	Acked      int // acknowledged etcd writes
	Lost       int // acknowledged etcd writes that did not read back
	QuorumLoss int // members removed while that broke quorum
	Takeovers  []time.Duration
	Refused    int
	Accepted   int
	Restarts   int // manager container restarts
	Writes     string
	Result     string
	Duration   time.Duration
}

func newRow(scenario string) *row {
	return &row{Scenario: scenario, Duplicates: -1, Orphans: -1, Acked: -1, Lost: -1, QuorumLoss: -1, Refused: -1, Accepted: -1, Restarts: -1, Writes: "-", Result: "not run"}
}

// results holds the rows of the run, in the order the scenarios ran.
var results struct {
	sync.Mutex
	rows []*row
}

func record(r *row) {
	results.Lock()
	defer results.Unlock()
	results.rows = append(results.rows, r)
}

func count(n int) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// takeovers prints the takeover times as min / median / max seconds.
func takeovers(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return fmt.Sprintf("%.1f/%.1f/%.1f", s[0].Seconds(), s[len(s)/2].Seconds(), s[len(s)-1].Seconds())
}

// writeTable prints the run's table.
func writeTable(w io.Writer, header string) {
	results.Lock()
	defer results.Unlock()
	fmt.Fprintln(w, header)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	cols := []string{"scenario", "runs", "kills", "duplicates", "orphans", "acked writes", "writes lost", "quorum-breaking removals", "takeover s min/med/max", "fuzz refused", "fuzz accepted", "mgr restarts", "mgr writes/min", "time", "result"}
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	for _, r := range results.rows {
		fmt.Fprintln(tw, strings.Join([]string{
			r.Scenario, fmt.Sprint(r.Runs), fmt.Sprint(r.Kills), count(r.Duplicates), count(r.Orphans),
			count(r.Acked), count(r.Lost), count(r.QuorumLoss), takeovers(r.Takeovers),
			count(r.Refused), count(r.Accepted), count(r.Restarts), r.Writes,
			r.Duration.Round(time.Second).String(), r.Result,
		}, "\t"))
	}
	_ = tw.Flush()
}
