package etcd

import (
	"fmt"
	"io"
	"time"
)

// sample is one measurement of B8 for one variant: one cluster created,
// scaled out, and one of its members replaced.
type sample struct {
	// create: the EtcdCluster created → Available=True.
	create time.Duration
	// createAll: the EtcdCluster created → every member a healthy voter.
	createAll time.Duration
	// scale: spec.replicas raised → every member a healthy voter, no
	// learner, Available.
	scale time.Duration
	// replace: a member's volume and pod deleted → the member back with a
	// new ID, every member a healthy voter, Available. It is the sum of
	// replaceNotice (until status showed the member unhealthy),
	// replaceThreshold (until Tend acted: the wait for
	// spec.memberReplacement.unhealthyFor) and replaceRest (removal, re-add
	// as a learner, catch-up, promotion).
	replace, replaceNotice, replaceThreshold, replaceRest time.Duration
	// floor is the members' election timeout.
	floor time.Duration
}

// figure is one line of the table and one b.ReportMetric unit.
type figure struct {
	label string
	unit  string
	of    func(sample) time.Duration
}

// figures are B8's, in the table's order; from and to are the sizes before
// and after the scale-out.
func figures(from, to int) []figure {
	return []figure{
		{fmt.Sprintf("create %d members → Available", from), "create_s", func(s sample) time.Duration { return s.create }},
		{fmt.Sprintf("create %d members → %d healthy voters", from, from), "create_all_s", func(s sample) time.Duration { return s.createAll }},
		{fmt.Sprintf("scale %d → %d → %d healthy voters, no learner", from, to, to), "scale_s", func(s sample) time.Duration { return s.scale }},
		{fmt.Sprintf("replace a failed member (volume and pod deleted) → new ID, %d/%d healthy voters", to, to), "replace_s", func(s sample) time.Duration { return s.replace }},
		{"… of which until status showed it unhealthy", "replace_notice_s", func(s sample) time.Duration { return s.replaceNotice }},
		{"… of which until Tend acted (the old pod gone, a new claim seen; a member that lost its data waits for no unhealthyFor)", "replace_threshold_s", func(s sample) time.Duration { return s.replaceThreshold }},
		{"… of which removal, re-add, catch-up, promotion", "replace_rest_s", func(s sample) time.Duration { return s.replaceRest }},
	}
}

// stats are one figure's mean, least and greatest over samples, in seconds.
type stats struct {
	n              int
	mean, min, max float64
}

func statsOf(samples []sample, of func(sample) time.Duration) stats {
	st := stats{n: len(samples)}
	for i, s := range samples {
		v := of(s).Seconds()
		st.mean += v / float64(len(samples))
		if i == 0 || v < st.min {
			st.min = v
		}
		if i == 0 || v > st.max {
			st.max = v
		}
	}
	return st
}

// String is the mean, with the range when there is more than one sample.
func (s stats) String() string {
	switch s.n {
	case 0:
		return "–"
	case 1:
		return fmt.Sprintf("%.1f", s.mean)
	}
	return fmt.Sprintf("%.1f (%.1f–%.1f)", s.mean, s.min, s.max)
}

// variant is one of B8's manager configurations and what it measured.
type variant struct {
	name string
	// interval is --etcdcluster-member-change-interval, "" for the
	// default.
	interval string
	samples  []sample
}

// writeTable writes B8's table, Markdown: each figure for tend and anchor,
// their ratio, and each as a multiple of the floor, etcd's election timeout.
func writeTable(w io.Writer, figs []figure, tend, anchor *variant) {
	floor := time.Duration(0)
	for _, v := range []*variant{tend, anchor} {
		if len(v.samples) > 0 && floor == 0 {
			floor = v.samples[0].floor
		}
	}
	fmt.Fprintf(w, "| figure, s | %s | %s | %s/%s | %s/floor | %s/floor |\n",
		tend.label(), anchor.label(), tend.name, anchor.name, tend.name, anchor.name)
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, f := range figs {
		t, a := statsOf(tend.samples, f.of), statsOf(anchor.samples, f.of)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", f.label, t, a,
			ratio(t, a.mean), ratio(t, floor.Seconds()), ratio(a, floor.Seconds()))
	}
	what := "the members' election timeout (set in spec.options)"
	if floor == defaultElectionTimeout {
		what = fmt.Sprintf("etcd's default election timeout (heartbeat %s)", defaultHeartbeat)
	}
	fmt.Fprintf(w, "\nfloor: %s, %s. Samples: %s %d, %s %d; with more than one, the mean (least–greatest).\n",
		what, floor, tend.name, len(tend.samples), anchor.name, len(anchor.samples))
}

// label names a variant's column: its name and its flag.
func (v *variant) label() string {
	if v.interval == "" {
		return v.name + " (default)"
	}
	return fmt.Sprintf("%s (%s=%s)", v.name, flagMemberChangeInterval, v.interval)
}

// ratio formats s's mean over d, or "–" when either is missing.
func ratio(s stats, d float64) string {
	if s.n == 0 || d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", s.mean/d)
}
