package etcdcluster

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

func TestPlanRecovery(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	healthy := func(name string) voter {
		return voter{Name: name, Healthy: true, Answered: true, Running: true, Revision: 100, RaftIndex: 200}
	}
	// A member that answers but has no quorum behind it.
	alone := func(name string, rev int64) voter {
		return voter{Name: name, Answered: true, Running: true, Revision: rev, RaftIndex: uint64(rev) + 100}
	}
	gone := func(name string) voter { return voter{Name: name} }
	lostData := func(name string) voter { return voter{Name: name, Running: true, DataLost: true} }
	silent := func(name string) voter { return voter{Name: name, Running: true} } // runs, does not answer
	auto, manual := etcdv1alpha1.QuorumLossAuto, etcdv1alpha1.QuorumLossManual

	tests := []struct {
		name     string
		in       recoveryInput
		decision recoveryDecision
		survivor string
		backup   string
		reason   string
		contains []string
	}{
		{name: "a healthy quorum", decision: recoverNone,
			in: recoveryInput{voters: []voter{healthy("a"), healthy("b"), gone("c")}, policy: auto}},
		{name: "two of three pods gone: the survivor, after the wait", decision: recoverFromMember, survivor: "a",
			in:       recoveryInput{voters: []voter{alone("a", 90), gone("b"), gone("c")}, policy: auto, lostSince: t0, now: t0.Add(time.Minute), after: time.Minute, backup: "nightly"},
			contains: []string{"member is a (revision 90)", "EtcdBackup nightly"}},
		{name: "too soon", decision: recoverWait, survivor: "a", reason: etcdv1alpha1.ReasonRecoveryPlanned,
			in:       recoveryInput{voters: []voter{alone("a", 90), gone("b"), gone("c")}, policy: auto, lostSince: t0, now: t0.Add(59 * time.Second), after: time.Minute},
			contains: []string{"at 2026-11-23T12:01:00Z"}},
		{name: "a member whose pod is being deleted is no survivor, though it answers", decision: recoverFromMember, survivor: "b",
			in: recoveryInput{voters: []voter{{Name: "a", Answered: true, Going: true, Revision: 95, RaftIndex: 195}, alone("b", 90), gone("c")},
				policy: auto, lostSince: t0, now: t0.Add(time.Hour), after: time.Minute},
			contains: []string{"member is b (revision 90)"}},
		{name: "lost data cannot vote", decision: recoverFromMember, survivor: "a",
			in: recoveryInput{voters: []voter{alone("a", 90), lostData("b"), lostData("c")}, policy: auto, lostSince: t0, now: t0.Add(time.Hour), after: time.Minute}},
		{name: "members that run but do not answer may vote: a partition", decision: recoverBlocked, reason: etcdv1alpha1.ReasonRecoveryBlocked,
			in:       recoveryInput{voters: []voter{alone("a", 90), silent("b"), silent("c")}, policy: auto, lostSince: t0, now: t0.Add(time.Hour), after: time.Minute},
			contains: []string{"members a, b, c run", "may still form a quorum"}},
		{name: "one silent member and one gone of three: the silent one and the survivor could vote", decision: recoverBlocked,
			in: recoveryInput{voters: []voter{alone("a", 90), silent("b"), gone("c")}, policy: auto, lostSince: t0, now: t0.Add(time.Hour), after: time.Minute}},
		{name: "five members, two silent, three gone: no quorum of three can form", decision: recoverFromMember, survivor: "b",
			in: recoveryInput{voters: []voter{alone("a", 90), alone("b", 95), gone("c"), gone("d"), gone("e")}, policy: auto, lostSince: t0, now: t0.Add(time.Hour), after: time.Minute}},
		{name: "the most advanced survivor: revision, then raft index", decision: recoverFromMember, survivor: "b",
			in: recoveryInput{voters: []voter{{Name: "a", Answered: true, Running: true, Revision: 95, RaftIndex: 10}, {Name: "b", Answered: true, Running: true, Revision: 95, RaftIndex: 11}, gone("c"), gone("d"), gone("e")},
				policy: auto, lostSince: t0, now: t0.Add(time.Hour), after: time.Minute}},
		{name: "no survivor answers: the backup", decision: recoverFromBackup, backup: "nightly",
			in: recoveryInput{voters: []voter{gone("a"), lostData("b"), gone("c")}, policy: auto, lostSince: t0, now: t0.Add(time.Hour), after: time.Minute, backup: "nightly"}},
		{name: "nothing to recover from", decision: recoverBlocked, reason: etcdv1alpha1.ReasonRecoveryBlocked,
			in:       recoveryInput{voters: []voter{gone("a"), gone("b"), gone("c")}, policy: auto, lostSince: t0, now: t0.Add(time.Hour), after: time.Minute},
			contains: []string{"no verified backup", "EtcdRestore"}},
		{name: "Manual waits for an approval, with the plan", decision: recoverWait, survivor: "a", reason: etcdv1alpha1.ReasonRecoveryPlanned,
			in:       recoveryInput{voters: []voter{alone("a", 90), gone("b"), gone("c")}, policy: manual, lostSince: t0, now: t0.Add(time.Hour), after: time.Minute, namespace: "db", name: "kv"},
			contains: []string{"kubectl annotate etcdcluster -n db kv etcd.tend.dev/recover-from=member/a", "Plan: keep member a's data"}},
		{name: "Manual, approved for a member", decision: recoverFromMember, survivor: "a",
			in: recoveryInput{voters: []voter{alone("a", 90), gone("b"), gone("c")}, policy: manual, approval: "member/a", lostSince: t0, now: t0.Add(time.Hour), after: time.Minute}},
		{name: "Manual, approved before the wait is over", decision: recoverWait, survivor: "a",
			in: recoveryInput{voters: []voter{alone("a", 90), gone("b"), gone("c")}, policy: manual, approval: "member/a", lostSince: t0, now: t0.Add(time.Second), after: time.Minute}},
		{name: "Manual, approved for a backup", decision: recoverFromBackup, backup: "older",
			in: recoveryInput{voters: []voter{alone("a", 90), gone("b"), gone("c")}, policy: manual, approval: "backup/older", lostSince: t0, now: t0.Add(time.Hour), after: time.Minute, backup: "nightly"}},
		{name: "an approval naming a member that does not answer", decision: recoverBlocked,
			in:       recoveryInput{voters: []voter{alone("a", 90), gone("b"), gone("c")}, policy: manual, approval: "member/b", lostSince: t0, now: t0.Add(time.Hour), after: time.Minute},
			contains: []string{"set it to one of member/a"}},
		{name: "an approval does not override the guard", decision: recoverBlocked,
			in: recoveryInput{voters: []voter{alone("a", 90), silent("b"), silent("c")}, policy: manual, approval: "member/a", lostSince: t0, now: t0.Add(time.Hour), after: time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := planRecovery(tt.in)
			g.Expect(p.decision).To(Equal(tt.decision), p.message)
			g.Expect(p.survivor).To(Equal(tt.survivor))
			g.Expect(p.backup).To(Equal(tt.backup))
			if tt.reason != "" {
				g.Expect(p.reason).To(Equal(tt.reason))
			}
			for _, s := range tt.contains {
				g.Expect(p.message).To(ContainSubstring(s))
			}
		})
	}
}
