package etcdcluster

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcd"
)

// on is member m with its pod on the current revision, made at t0.
func on(m memberView) rollMember { return rollMember{memberView: m, Updated: true, PodCreated: t0} }

// off is member m with its pod on an older revision.
func off(m memberView) rollMember { return rollMember{memberView: m, PodCreated: t0.Add(-time.Hour)} }

// podGone is member m whose pod was deleted (or not made again yet).
func podGone(m memberView) rollMember {
	r := rollMember{memberView: m, PodGone: true}
	r.Answered, r.Healthy, r.Leader = false, false, 0
	return r
}

// behind is m, healthy but trailing the leader's index 100 by lag.
func behind(m memberView, lag uint64) memberView {
	m.RaftAppliedIndex = 0
	if lag < 100 {
		m.RaftAppliedIndex = 100 - lag
	}
	m.RaftIndex = 100
	return m
}

// atIndex is m with its committed and applied index at i.
func atIndex(m memberView, i uint64) memberView {
	m.RaftIndex, m.RaftAppliedIndex = i, i
	return m
}

func TestPlanRoll(t *testing.T) {
	now := t0.Add(time.Minute)
	leaderAt := func(i int) memberView { return member(i, i) }
	cases := []struct {
		name    string
		members []rollMember
		inHand  string
		since   time.Time
		kind    rollActionKind
		subject string // the member acted on or waited for
		to      etcd.MemberID
	}{
		{name: "every member updated and caught up: done",
			members: []rollMember{on(member(0, 0)), on(member(1, 0)), on(member(2, 0))}, kind: rollDone},
		{name: "followers first, the highest ordinal first",
			members: []rollMember{off(member(0, 0)), off(member(1, 0)), off(member(2, 0))}, kind: rollRestart, subject: "main-2"},
		{name: "the leader is not picked while a follower waits",
			members: []rollMember{off(member(0, 2)), off(member(1, 2)), off(leaderAt(2))}, kind: rollRestart, subject: "main-1"},
		{name: "an unhealthy member goes before healthy ones",
			members: []rollMember{off(member(0, 0)), off(sick(1, t0)), off(member(2, 0))}, kind: rollRestart, subject: "main-1"},
		{name: "an updated member that is unhealthy is waited for before the next restart",
			members: []rollMember{off(member(0, 0)), on(member(1, 0)), off(member(2, 0)), on(sick(3, t0)), on(member(4, 0))},
			since:   t0, kind: rollWait, subject: "main-3"},
		{name: "a restarted member must catch up first",
			members: []rollMember{off(atIndex(member(0, 0), 10_000)), off(member(1, 0)), on(member(2, 0))},
			inHand:  "main-2", since: t0, kind: rollWait, subject: "main-2"},
		{name: "a restarted member within the slack counts as caught up",
			members: []rollMember{off(member(0, 0)), off(member(1, 0)), on(behind(member(2, 0), 10))},
			kind:    rollRestart, subject: "main-1"},
		{name: "a member whose pod is gone is waited for",
			members: []rollMember{off(member(0, 0)), off(member(1, 0)), podGone(member(2, 0))},
			inHand:  "main-2", since: t0, kind: rollWait, subject: "main-2"},
		{name: "past the timeout the roll stalls on it",
			members: []rollMember{off(member(0, 0)), off(member(1, 0)), {memberView: sick(2, t0), Updated: true, PodCreated: now.Add(-6 * time.Minute)}},
			inHand:  "main-2", since: now.Add(-5 * time.Minute), kind: rollStalled, subject: "main-2"},
		{name: "the timeout runs from the later of the restart and the pod",
			members: []rollMember{off(member(0, 0)), off(member(1, 0)), {memberView: sick(2, t0), Updated: true, PodCreated: now.Add(-time.Minute)}},
			inHand:  "main-2", since: now.Add(-time.Hour), kind: rollWait, subject: "main-2"},
		{name: "only the leader is left: the leadership moves to an updated member",
			members: []rollMember{off(leaderAt(0)), on(member(1, 0)), on(member(2, 0))},
			kind:    rollMoveLeader, subject: "main-0", to: 0x101},
		{name: "the leadership goes to the member furthest along",
			members: []rollMember{off(leaderAt(0)), on(behind(member(1, 0), 20)), on(member(2, 0))},
			kind:    rollMoveLeader, subject: "main-0", to: 0x102},
		{name: "after the move the old leader is a follower and restarts",
			members: []rollMember{off(member(0, 1)), on(leaderAt(1)), on(member(2, 1))},
			kind:    rollRestart, subject: "main-0"},
		{name: "no leader: wait",
			members: func() []rollMember {
				ms := []rollMember{off(member(0, 0)), off(member(1, 0)), off(member(2, 0))}
				for i := range ms {
					ms[i].Leader = 0
				}
				return ms
			}(), kind: rollWait},
		{name: "an alarm holds the roll",
			members: func() []rollMember {
				ms := []rollMember{off(member(0, 0)), off(member(1, 0)), off(member(2, 0))}
				ms[0].Errors = []string{"memberID:256 alarm:NOSPACE"}
				return ms
			}(), kind: rollWait},
		{name: "a learner holds the roll",
			members: []rollMember{off(member(0, 0)), off(member(1, 0)), off(learnerAt(2, true, 100))}, kind: rollWait, subject: "main-2"},
		{name: "two of three unhealthy: an unhealthy one may not restart without a quorum",
			members: []rollMember{off(member(0, 0)), off(sick(1, t0)), off(sick(2, t0))}, kind: rollWait, subject: "main-2"},
		{name: "a lone member restarts: nothing else can lead",
			members: []rollMember{off(leaderAt(0))}, kind: rollRestart, subject: "main-0"},
		{name: "of two, the follower restarts when both are healthy",
			members: []rollMember{off(leaderAt(0)), off(member(1, 0))}, kind: rollRestart, subject: "main-1"},
		{name: "spec corrected after a stall: the stalled member, now outdated and unhealthy, restarts first",
			members: []rollMember{off(member(0, 0)), off(member(1, 0)), off(sick(2, t0))},
			inHand:  "main-2", since: now.Add(-time.Hour), kind: rollRestart, subject: "main-2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := planRoll(rollInput{members: tc.members, inHand: tc.inHand, inHandSince: tc.since, timeout: 5 * time.Minute, now: now})
			g.Expect(got.kind).To(Equal(tc.kind), got.message)
			if tc.subject != "" {
				g.Expect(got.member.Name).To(Equal(tc.subject), got.message)
			}
			g.Expect(got.to).To(Equal(tc.to))
			if tc.kind != rollDone {
				g.Expect(got.message).NotTo(BeEmpty())
			}
		})
	}
}

// TestPlanRollOneLeaderMove runs a whole roll of three members through
// planRoll, acting as the cluster would, and counts the leader moves.
func TestPlanRollOneLeaderMove(t *testing.T) {
	g := NewWithT(t)
	ms := []rollMember{off(member(0, 1)), off(member(1, 1)), off(member(2, 1))}
	leader := 1
	moves, restarts := 0, []string{}
	for range 20 {
		for i := range ms {
			ms[i].Leader = etcd.MemberID(0x100 + leader)
		}
		a := planRoll(rollInput{members: ms, timeout: time.Minute, now: t0})
		if a.kind == rollDone {
			break
		}
		switch a.kind {
		case rollRestart:
			restarts = append(restarts, a.member.Name)
			ms[a.member.Ordinal].Updated = true // it comes back healthy
		case rollMoveLeader:
			moves++
			leader = int(a.to - 0x100)
		default:
			t.Fatalf("unexpected %v: %s", a.kind, a.message)
		}
	}
	g.Expect(moves).To(Equal(1))
	g.Expect(restarts).To(Equal([]string{"main-2", "main-0", "main-1"}))
}

func TestCheckUpgradePath(t *testing.T) {
	cases := []struct {
		from, to string
		auth     bool
		wantErr  string // a part of the message; empty for allowed
	}{
		{from: "v3.6.16", to: "v3.6.17"},
		{from: "v3.6.16", to: "v3.6.10"}, // a patch goes back: allowed
		{from: "v3.5.35", to: "v3.6.16"},
		{from: "v3.5.32", to: "v3.6.0"},
		{from: "v3.5.31", to: "v3.6.16", wantErr: "upgrade to v3.5.32 or later first"},
		{from: "v3.5.20", to: "v3.6.16", wantErr: "etcd.io/docs/v3.6/upgrades/upgrade_3_6"},
		{from: "v3.4.30", to: "v3.6.16", wantErr: "upgrade to v3.5 first"},
		{from: "v3.4.30", to: "v3.5.35"},
		{from: "v3.4.30", to: "v3.5.35", auth: true, wantErr: "authentication"},
		{from: "v3.6.16", to: "v3.5.35", wantErr: "cannot downgrade"},
		{from: "v3.6.16", to: "v3.7.0", wantErr: "does not know the upgrade from v3.6 to v3.7"},
		{from: "v3.6.16", to: "v4.0.0", wantErr: "major"},
		{from: "3.6", to: "v3.6.1", wantErr: "cannot read"},
	}
	for _, tc := range cases {
		t.Run(tc.from+"→"+tc.to, func(t *testing.T) {
			g := NewWithT(t)
			err := checkUpgradePath(tc.from, tc.to, tc.auth)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func TestRollSlots(t *testing.T) {
	g := NewWithT(t)
	var s rollSlots
	a, b, cl, d := types.NamespacedName{Namespace: "x", Name: "a"}, types.NamespacedName{Namespace: "y", Name: "a"},
		types.NamespacedName{Namespace: "x", Name: "c"}, types.NamespacedName{Namespace: "x", Name: "d"}
	g.Expect(s.acquire(a, 1)).To(BeTrue())
	g.Expect(s.acquire(a, 1)).To(BeTrue(), "a cluster keeps its own slot")
	g.Expect(s.acquire(b, 1)).To(BeFalse(), "one at a time")
	s.keep(cl) // a roll under way after a restart keeps going
	g.Expect(s.acquire(b, 2)).To(BeFalse(), "the bound counts it")
	s.release(a)
	s.release(cl)
	g.Expect(s.acquire(b, 1)).To(BeTrue())
	g.Expect(s.acquire(d, 0)).To(BeFalse(), "a bound below one means one")
}

func TestAStalledRollHoldsNoSlot(t *testing.T) {
	degraded := func(reason string) []metav1.Condition {
		return []metav1.Condition{{Type: etcdv1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: reason}}
	}
	for _, tc := range []struct {
		name  string
		cause etcdv1alpha1.UpdateCause
		conds []metav1.Condition
		want  bool
	}{
		{"an operator roll under way", etcdv1alpha1.UpdateCauseOperator, nil, true},
		{"a roll of the cluster's own spec takes no slot", etcdv1alpha1.UpdateCauseSpec, nil, false},
		{"a stalled member", etcdv1alpha1.UpdateCauseOperator, degraded(etcdv1alpha1.ReasonUpdateStalled), false},
		{"a failed check", etcdv1alpha1.UpdateCauseOperator, degraded(etcdv1alpha1.ReasonUpdateCheckFailed), false},
		{"another warning", etcdv1alpha1.UpdateCauseOperator, degraded(etcdv1alpha1.ReasonMembersUnhealthy), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &etcdv1alpha1.EtcdCluster{}
			c.Status.Conditions = tc.conds
			NewWithT(t).Expect(keepsRollSlot(c, &etcdv1alpha1.UpdateStatus{Cause: tc.cause})).To(Equal(tc.want))
		})
	}
}
