package etcd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// B10's figures: what the writer saw, and each sample's row.

// b10Write is one put of the writer: when it began and returned, and its
// error; nil means etcd acknowledged it.
type b10Write struct {
	start, end time.Time
	key, value string
	err        error
}

// b10LongestGap is the longest time between two consecutive acknowledged
// writes during [from, to]: from the last acknowledgement at or before
// from (from itself when there is none) through those in between to the
// first at or after to (to itself when there is none). at is where the
// gap began.
func b10LongestGap(writes []b10Write, from, to time.Time) (gap time.Duration, at time.Time) {
	prev := from
	for _, w := range writes {
		if w.err != nil {
			continue
		}
		if !w.end.After(from) {
			prev = w.end
			continue
		}
		if d := w.end.Sub(prev); d > gap {
			gap, at = d, prev
		}
		prev = w.end
		if !w.end.Before(to) {
			return gap, at
		}
	}
	if d := to.Sub(prev); d > gap {
		gap, at = d, prev
	}
	return gap, at
}

// b10Failed counts the writes that returned an error.
func b10Failed(writes []b10Write) int {
	n := 0
	for _, w := range writes {
		if w.err != nil {
			n++
		}
	}
	return n
}

// b10Span is a run of consecutive failed writes, for the log.
type b10Span struct {
	from, to time.Time
	n        int
	last     error
}

// b10FailedSpans groups the failed writes into runs of consecutive ones.
func b10FailedSpans(writes []b10Write) []b10Span {
	var out []b10Span
	inRun := false
	for _, w := range writes {
		if w.err == nil {
			inRun = false
			continue
		}
		if !inRun {
			out = append(out, b10Span{from: w.start})
			inRun = true
		}
		s := &out[len(out)-1]
		s.to, s.n, s.last = w.end, s.n+1, w.err
	}
	return out
}

// b10Lost compares the acknowledged writes with what the cluster holds at
// the end (key: value): lost are the acknowledged keys it does not hold
// with their value; applied counts the failed writes that it holds all the
// same (a write cut short may have happened).
func b10Lost(writes []b10Write, held map[string]string) (lost []string, applied int) {
	for _, w := range writes {
		v, ok := held[w.key]
		switch {
		case w.err == nil && (!ok || v != w.value):
			lost = append(lost, w.key)
		case w.err != nil && ok && v == w.value:
			applied++
		}
	}
	return lost, applied
}

// b10Acked counts the acknowledged writes.
func b10Acked(writes []b10Write) int { return len(writes) - b10Failed(writes) }

// b10TermSample is a member's raft term and leader as a poll saw them.
type b10TermSample struct {
	at      time.Time
	member  string
	term    uint64
	leader  string
	version string
	err     error
}

// b10TermBefore is the highest raft term that any member reported before
// t, and whether any did.
func b10TermBefore(samples []b10TermSample, t time.Time) (uint64, bool) {
	var term uint64
	ok := false
	for _, s := range samples {
		if s.err != nil || !s.at.Before(t) {
			continue
		}
		if s.term > term {
			term = s.term
		}
		ok = true
	}
	return term, ok
}

// b10Leaders are the moments at which the polls first saw a new term or a
// new leader, for the timeline.
func b10Leaders(samples []b10TermSample) []mark {
	var out []mark
	var term uint64
	leader := ""
	for _, s := range samples {
		if s.err != nil || s.term < term || (s.term == term && s.leader == leader) || s.leader == "" {
			continue
		}
		term, leader = s.term, s.leader
		on := ""
		if s.version != "" {
			on = ", itself on " + s.version
		}
		out = append(out, mark{s.at, fmt.Sprintf("raft term %d, leader %s (as %s reports%s)", term, leader, s.member, on)})
	}
	return out
}

// b10Sample is one roll of one variant.
type b10Sample struct {
	variant string
	// backupWait: tend only, the spec's patch → the first restart.
	backupWait time.Duration
	// roll: the first restart → every member Ready on the new version.
	roll time.Duration
	// complete: tend only, the first restart → status.update cleared,
	// after the check Job (UpdateComplete).
	complete time.Duration
	// elections: the raft term after the roll less the term before the
	// first restart.
	elections int64
	// gap: the longest time without an acknowledged write during the
	// roll.
	gap time.Duration
	// failed: writes that returned an error, over the writer's whole run;
	// lost: acknowledged writes missing at the end; acked: acknowledged.
	failed, lost, acked int
	// restarts: each member's, its old pod going → its new pod Ready.
	restarts []time.Duration
	// electionTimeout is the members'.
	electionTimeout time.Duration
}

// b10Variants are the variants, in the table's order.
var b10Variants = []string{"tend", "anchor"}

// parseB10Variants reads -b10.variants: a comma-separated subset of
// b10Variants, kept in their order.
func parseB10Variants(s string) ([]string, error) {
	want := map[string]bool{}
	for _, v := range strings.Split(s, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if !slices.Contains(b10Variants, v) {
			return nil, fmt.Errorf("unknown variant %q: want some of %v", v, b10Variants)
		}
		want[v] = true
	}
	var out []string
	for _, v := range b10Variants {
		if want[v] {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no variant")
	}
	return out, nil
}

// b10Bound is the goal's bound on the longest write gap: the election
// timeout and one member restart, the anchor's median (deletion → Ready),
// or tend's when the anchor did not run. what says which.
func b10Bound(samples map[string][]b10Sample) (bound, restart, election time.Duration, what string) {
	for _, v := range []string{"anchor", "tend"} {
		var rs []float64
		for _, s := range samples[v] {
			for _, r := range s.restarts {
				rs = append(rs, r.Seconds())
			}
			if election == 0 {
				election = s.electionTimeout
			}
		}
		if len(rs) == 0 {
			continue
		}
		restart = time.Duration(distOf(rs).med * float64(time.Second))
		what = fmt.Sprintf("the %s's median member restart, old pod going → new pod Ready, over %d restarts", v, len(rs))
		break
	}
	if election == 0 {
		election = defaultElectionTimeout
	}
	return election + restart, restart, election, what
}

// b10Goals says which goals a sample missed, or "met".
func b10Goals(s b10Sample, bound time.Duration) string {
	var missed []string
	if s.elections != 1 {
		missed = append(missed, fmt.Sprintf("%d elections", s.elections))
	}
	if bound > 0 && s.gap > bound {
		missed = append(missed, "gap")
	}
	if s.lost > 0 {
		missed = append(missed, "lost writes")
	}
	if len(missed) == 0 {
		return "met"
	}
	return "missed: " + strings.Join(missed, ", ")
}

// b10Column is a numeric column of the table.
type b10Column struct {
	head string
	of   func(b10Sample) (float64, bool)
	// format renders a value.
	format func(float64) string
}

func b10Columns() []b10Column {
	secs := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	count := func(v float64) string {
		if v == float64(int64(v)) {
			return fmt.Sprintf("%d", int64(v))
		}
		return fmt.Sprintf("%.1f", v)
	}
	tendOnly := func(f func(b10Sample) time.Duration) func(b10Sample) (float64, bool) {
		return func(s b10Sample) (float64, bool) { return f(s).Seconds(), s.variant == "tend" }
	}
	return []b10Column{
		{"backup wait, s", tendOnly(func(s b10Sample) time.Duration { return s.backupWait }), secs},
		{"roll, s", func(s b10Sample) (float64, bool) { return s.roll.Seconds(), true }, secs},
		{"→ UpdateComplete, s", tendOnly(func(s b10Sample) time.Duration { return s.complete }), secs},
		{"elections", func(s b10Sample) (float64, bool) { return float64(s.elections), true }, count},
		{"longest write gap, ms", func(s b10Sample) (float64, bool) { return float64(s.gap.Milliseconds()), true }, count},
		{"failed writes", func(s b10Sample) (float64, bool) { return float64(s.failed), true }, count},
		{"lost writes", func(s b10Sample) (float64, bool) { return float64(s.lost), true }, count},
		{"acked writes", func(s b10Sample) (float64, bool) { return float64(s.acked), true }, count},
		{"member restart, s (median)", func(s b10Sample) (float64, bool) {
			var rs []float64
			for _, r := range s.restarts {
				rs = append(rs, r.Seconds())
			}
			return distOf(rs).med, len(rs) > 0
		}, secs},
	}
}

// b10Setup is what the table's header states.
type b10Setup struct {
	from, to              string
	interval, callTimeout time.Duration
	anchorTLS             bool
	took                  time.Duration
}

// writeB10Table writes B10's table, Markdown: a row per sample, then each
// variant's least, median and greatest, with the goals in the header.
func writeB10Table(w io.Writer, setup b10Setup, variants []string, samples map[string][]b10Sample) {
	bound, restart, election, what := b10Bound(samples)
	fmt.Fprintf(w, "\nB10: a %d-member upgrade %s → %s under a writer (a put every %s, %s timeout each, to every member), "+
		"tend (EtcdCluster spec.version) against the anchor (a StatefulSet, updateStrategy RollingUpdate).\n",
		b10Members, setup.from, setup.to, setup.interval, setup.callTimeout)
	if restart > 0 {
		fmt.Fprintf(w, "Goals: one leader election (raft term +1); longest write gap ≤ election timeout %d ms + one restart %.1f s (%s) = %.1f s; no lost writes.\n",
			election.Milliseconds(), restart.Seconds(), what, bound.Seconds())
	} else {
		fmt.Fprintf(w, "Goals: one leader election (raft term +1); longest write gap ≤ election timeout %d ms + one restart (none measured); no lost writes.\n",
			election.Milliseconds())
	}
	cols := b10Columns()
	heads := []string{"variant", "sample"}
	for _, c := range cols {
		heads = append(heads, c.head)
	}
	heads = append(heads, "goals")
	fmt.Fprintf(w, "\n| %s |\n|%s\n", strings.Join(heads, " | "), strings.Repeat("---|", len(heads)))
	for _, v := range variants {
		ss := samples[v]
		met := 0
		for i, s := range ss {
			cells := []string{v, fmt.Sprint(i + 1)}
			for _, c := range cols {
				if x, ok := c.of(s); ok {
					cells = append(cells, c.format(x))
				} else {
					cells = append(cells, "–")
				}
			}
			g := b10Goals(s, bound)
			if g == "met" {
				met++
			}
			cells = append(cells, g)
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		}
		if len(ss) == 0 {
			fmt.Fprintf(w, "| %s | – |%s not measured |\n", v, strings.Repeat(" – |", len(cols)))
			continue
		}
		for _, stat := range []string{"min", "median", "max"} {
			cells := []string{v, stat}
			for _, c := range cols {
				var xs []float64
				for _, s := range ss {
					if x, ok := c.of(s); ok {
						xs = append(xs, x)
					}
				}
				if len(xs) == 0 {
					cells = append(cells, "–")
					continue
				}
				d := distOf(xs)
				cells = append(cells, c.format(map[string]float64{"min": d.min, "median": d.med, "max": d.max}[stat]))
			}
			g := ""
			if stat == "median" {
				g = fmt.Sprintf("met in %d of %d", met, len(ss))
			}
			cells = append(cells, g)
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		}
	}
	tls := "plain http (-b10.anchor-tls=false)"
	if setup.anchorTLS {
		tls = "TLS as Tend's (client and peer certificates required)"
	}
	fmt.Fprintf(w, "\nroll: the first member restart (its pod going) → every member Ready on %s; elections: the raft term after the roll less the term before "+
		"its first restart (an election or a MoveLeader each add one); longest write gap: between two consecutive acknowledged writes during the roll; "+
		"failed writes: calls that returned an error, over the writer's whole run (tend's includes its backup and check Job); lost writes: acknowledged "+
		"but missing at the end. Backup wait: tend's spec patch → its first restart (the verified EtcdBackup). Anchor members: %s. "+
		"Each sample a fresh namespace and cluster; B10 took %.1f min.\n", setup.to, tls, setup.took.Minutes())
}

// b10Metrics are each variant's medians, by b.ReportMetric unit.
func b10Metrics(samples map[string][]b10Sample) map[string]float64 {
	out := map[string]float64{}
	units := map[string]string{
		"backup wait, s": "backup_s", "roll, s": "roll_s", "→ UpdateComplete, s": "complete_s", "elections": "elections",
		"longest write gap, ms": "gap_ms", "failed writes": "failed_writes", "lost writes": "lost_writes",
	}
	for v, ss := range samples {
		for _, c := range b10Columns() {
			unit, ok := units[c.head]
			if !ok {
				continue
			}
			var xs []float64
			for _, s := range ss {
				if x, ok := c.of(s); ok {
					xs = append(xs, x)
				}
			}
			if len(xs) > 0 {
				out[v+"_"+unit] = distOf(xs).med
			}
		}
	}
	return out
}

// b10RaftLines picks, from an etcd log fetched with the kubelet's stamps,
// the lines up to to about elections, leaders and peers, each as seconds
// after from, its message and its error.
func b10RaftLines(log string, from, to time.Time) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		stamp, text, _ := strings.Cut(l, " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil || at.After(to) {
			continue
		}
		var entry struct {
			Logger string `json:"logger"`
			Msg    string `json:"msg"`
			Error  string `json:"error"`
			Peer   string `json:"remote-peer-id"`
		}
		if json.Unmarshal([]byte(text), &entry) != nil {
			continue
		}
		keep := entry.Logger == "raft"
		for _, w := range []string{"peer became", "streaming connection", "prober detected", "leadership", "leader changed"} {
			keep = keep || strings.Contains(entry.Msg, w)
		}
		if !keep {
			continue
		}
		line := fmt.Sprintf("%+8.2fs %s", at.Sub(from).Seconds(), entry.Msg)
		if entry.Peer != "" {
			line += " (peer " + entry.Peer + ")"
		}
		if entry.Error != "" {
			line += ": " + entry.Error
		}
		out = append(out, line)
	}
	return out
}
