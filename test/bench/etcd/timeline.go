package etcd

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// observation is one state of the EtcdCluster as the benchmark's watch
// received it. at is the moment of receipt, on this process's monotonic
// clock, so that it compares with the moments the benchmark acted.
type observation struct {
	at         time.Time
	generation int64
	deleted    bool
	status     etcdv1alpha1.EtcdClusterStatus
}

// event is one Event about the EtcdCluster, as the watch received it; a
// repeated Event (its count went up) is one more event.
type event struct {
	at      time.Time
	typ     string
	reason  string
	message string
}

// Events that mark the controller's actions on membership (contract).
const (
	eventMemberAdded     = "MemberAdded"
	eventMemberPromoted  = "MemberPromoted"
	eventMemberRemoved   = "MemberRemoved"
	eventReplacingMember = "ReplacingMember"
)

// mark is a moment of the measurement that the timeline shows among the
// states and Events: an action of the benchmark, or the end of a step.
type mark struct {
	at   time.Time
	what string
}

// renderTimeline renders every state, Event and mark, one a line, in the
// order received, each as seconds after origin.
func renderTimeline(origin time.Time, obs []observation, evs []event, marks []mark) string {
	type line struct {
		at   time.Time
		text string
	}
	var lines []line
	for i := range obs {
		lines = append(lines, line{obs[i].at, "status  " + summary(&obs[i])})
	}
	for _, e := range evs {
		lines = append(lines, line{e.at, fmt.Sprintf("event   %s %s: %s", e.typ, e.reason, e.message)})
	}
	for _, m := range marks {
		lines = append(lines, line{m.at, "bench   " + m.what})
	}
	slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%+8.2fs %s\n", l.at.Sub(origin).Seconds(), l.text)
	}
	return b.String()
}

// findMember returns the member called name in st, or nil.
func findMember(st *etcdv1alpha1.EtcdClusterStatus, name string) *etcdv1alpha1.Member {
	for i := range st.Members {
		if st.Members[i].Name == name {
			return &st.Members[i]
		}
	}
	return nil
}

// available says whether st has Available=True.
func available(st *etcdv1alpha1.EtcdClusterStatus) bool {
	return meta.IsStatusConditionTrue(st.Conditions, etcdv1alpha1.ConditionAvailable)
}

// healthyVoters counts the healthy members that are not learners.
func healthyVoters(st *etcdv1alpha1.EtcdClusterStatus) int {
	n := 0
	for _, m := range st.Members {
		if m.Healthy && !m.Learner {
			n++
		}
	}
	return n
}

// converged says whether st shows exactly n members, all healthy voters,
// and Available=True: the end of every measured step.
func converged(st *etcdv1alpha1.EtcdClusterStatus, n int) bool {
	return available(st) && len(st.Members) == n && healthyVoters(st) == n && int(st.ReadyMembers) == n
}

// stable says whether o shows n healthy voters, Available, and no work in
// progress for the spec's generation gen: where each step starts from.
func stable(o *observation, n int, gen int64) bool {
	st := &o.status
	return converged(st, n) && st.ObservedGeneration >= gen &&
		meta.IsStatusConditionFalse(st.Conditions, etcdv1alpha1.ConditionProgressing)
}

// replaced says whether st shows member name back as a healthy voter with
// an ID other than oldID, among n healthy voters: the end of a replacement.
func replaced(st *etcdv1alpha1.EtcdClusterStatus, name, oldID string, n int) bool {
	m := findMember(st, name)
	return m != nil && m.ID != "" && m.ID != oldID && converged(st, n)
}

// firstAfter returns the first observation received at or after t0 for
// which pred holds.
func firstAfter(obs []observation, t0 time.Time, pred func(*observation) bool) (*observation, bool) {
	for i := range obs {
		if !obs[i].at.Before(t0) && pred(&obs[i]) {
			return &obs[i], true
		}
	}
	return nil, false
}

// memberSteps is when one member that a scale-out added reached each step,
// as seconds after the scale began; zero when never seen.
type memberSteps struct {
	name     string
	listed   time.Duration // first in status.members (a learner, usually)
	voter    time.Duration // first listed as a voter
	healthy  time.Duration // first listed as a healthy voter
	seenOnce bool
}

// scaleSteps returns the steps of each of names from t0 until end.
func scaleSteps(obs []observation, t0, end time.Time, names []string) []memberSteps {
	out := make([]memberSteps, len(names))
	for i, name := range names {
		s := memberSteps{name: name}
		for j := range obs {
			o := &obs[j]
			if o.at.Before(t0) || o.at.After(end) {
				continue
			}
			m := findMember(&o.status, name)
			if m == nil {
				continue
			}
			d := o.at.Sub(t0)
			if !s.seenOnce {
				s.seenOnce, s.listed = true, d
			}
			if !m.Learner && s.voter == 0 {
				s.voter = d
			}
			if !m.Learner && m.Healthy && s.healthy == 0 {
				s.healthy = d
			}
		}
		out[i] = s
	}
	return out
}

// replaceTimes splits a replacement, from the moment its member's volume
// and pod were deleted (t0) to the moment status showed it back (done):
//
//   - unhealthy: the first status after t0 in which the member is not a
//     healthy voter with its old ID (Tend noticed);
//   - acted: the first sign that Tend acted on it: a ReplacingMember or
//     MemberRemoved Event, or a status without the member or with another ID.
//
// The wait for spec.memberReplacement.unhealthyFor lies between the two.
type replaceTimes struct {
	unhealthy, acted, done time.Time
	// unhealthySince is the member's unhealthySince, Tend's own clock
	// (second resolution), as first reported after t0; zero if none.
	unhealthySince time.Time
}

func replaceTimeline(obs []observation, evs []event, t0, done time.Time, name, oldID string) replaceTimes {
	r := replaceTimes{done: done}
	for i := range obs {
		o := &obs[i]
		if o.at.Before(t0) || o.at.After(done) {
			continue
		}
		m := findMember(&o.status, name)
		gone := m == nil || m.ID != oldID
		if r.unhealthy.IsZero() && (gone || !m.Healthy || m.Learner) {
			r.unhealthy = o.at
		}
		if r.unhealthySince.IsZero() && m != nil && m.UnhealthySince != nil {
			r.unhealthySince = m.UnhealthySince.Time
		}
		if r.acted.IsZero() && gone {
			r.acted = o.at
		}
	}
	for _, e := range evs {
		if e.at.Before(t0) || e.at.After(done) || (e.reason != eventReplacingMember && e.reason != eventMemberRemoved) {
			continue
		}
		if r.acted.IsZero() || e.at.Before(r.acted) {
			r.acted = e.at
		}
		break
	}
	// A replacement faster than the watch can tell apart still orders its
	// parts: noticed, then acted on, then done.
	if r.acted.IsZero() || r.acted.After(done) {
		r.acted = done
	}
	if r.unhealthy.IsZero() || r.unhealthy.After(r.acted) {
		r.unhealthy = r.acted
	}
	return r
}

// summary renders a status on one line, for the benchmark's timeline:
// phase, the conditions' statuses and reasons, ready voters, and each
// member as name(id, flags): L leader, l learner, ! unhealthy.
func summary(o *observation) string {
	if o.deleted {
		return "deleted"
	}
	st := &o.status
	var b strings.Builder
	fmt.Fprintf(&b, "gen %d/%d %s", st.ObservedGeneration, o.generation, orDash(st.Phase))
	for _, t := range []string{etcdv1alpha1.ConditionAvailable, etcdv1alpha1.ConditionProgressing, etcdv1alpha1.ConditionDegraded} {
		if c := meta.FindStatusCondition(st.Conditions, t); c != nil {
			fmt.Fprintf(&b, " %s=%s/%s", t, c.Status, c.Reason)
		}
	}
	fmt.Fprintf(&b, " ready %d/%d:", st.ReadyMembers, len(st.Members))
	for _, m := range st.Members {
		flags := ""
		if m.Leader {
			flags += "L"
		}
		if m.Learner {
			flags += "l"
		}
		if !m.Healthy {
			flags += "!"
		}
		id := m.ID
		if len(id) > 6 {
			id = id[len(id)-6:]
		}
		fmt.Fprintf(&b, " %s(%s%s)", m.Name, orDash(id), prefixed(",", flags))
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

// cameBackUnreplaced returns an error when member name, after t0, was seen
// unhealthy and then has been a healthy voter with its old ID for longer
// than twice unhealthyFor, plus 30 s, by now: it rejoined without being
// replaced, so the replacement that the benchmark waits for will not come.
func cameBackUnreplaced(obs []observation, t0, now time.Time, name, oldID string, unhealthyFor time.Duration) error {
	healthyOld := func(o *observation) bool {
		m := findMember(&o.status, name)
		return m != nil && m.ID == oldID && m.Healthy && !m.Learner
	}
	// since is when the last unbroken run of healthy-with-the-old-ID
	// states began; it counts only if a state before it, after t0, was not.
	var since time.Time
	for i := len(obs) - 1; i >= 0 && !obs[i].at.Before(t0); i-- {
		if !healthyOld(&obs[i]) {
			if i == len(obs)-1 {
				return nil
			}
			since = obs[i+1].at
			break
		}
	}
	if since.IsZero() || now.Sub(since) <= 2*unhealthyFor+30*time.Second {
		return nil
	}
	return fmt.Errorf("%s was unhealthy after its volume and pod were deleted, then healthy again with its old ID %s for %.0f s: "+
		"it rejoined without being replaced (with the data of a volume that was not deleted?)", name, oldID, now.Sub(since).Seconds())
}
