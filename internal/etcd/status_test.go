package etcd

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/testing/etcdserver"
)

func TestStatus(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 3})
	c := clientOf(t, cluster)
	put(t, c, 10)

	statuses := allHealthy(t, c, 3)
	leader, ok := Leader(statuses)
	g.Expect(ok).To(BeTrue())
	leaders := 0
	for i, s := range statuses {
		want := cluster.Members()[0]
		for _, m := range cluster.Members() {
			if m.Name == s.Name {
				want = m
			}
		}
		g.Expect(s.Name).To(Equal(want.Name))
		g.Expect(s.Endpoint).To(Equal(want.ClientURL))
		g.Expect(s.Answered).To(BeTrue())
		g.Expect(s.Leader).To(Equal(leader))
		g.Expect(s.Version).To(Equal("3.6.16"))
		g.Expect(s.RaftTerm).To(BeNumerically(">", 0))
		g.Expect(s.RaftIndex).To(BeNumerically(">=", 10))
		g.Expect(s.RaftAppliedIndex).To(BeNumerically(">=", 10))
		g.Expect(s.Revision).To(BeNumerically(">", 10), "every put is a revision")
		g.Expect(s.DBSize).To(BeNumerically(">", 0))
		g.Expect(s.DBSizeInUse).To(BeNumerically(">", 0))
		g.Expect(s.DBSizeInUse).To(BeNumerically("<=", s.DBSize))
		g.Expect(s.Errors).To(BeEmpty())
		if i > 0 {
			g.Expect(s.ID).To(BeNumerically(">", statuses[i-1].ID))
		}
		if s.IsLeader() {
			leaders++
		}
	}
	g.Expect(leaders).To(Equal(1))
}

// TestStatusWithMembersDown shows that Status reports a dead member at once
// and a hung one when its deadline passes, that the counts follow, and that
// the members are healthy again once back.
func TestStatusWithMembersDown(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 3})
	c := clientOf(t, cluster)
	members, err := c.Members(callCtx(t))
	g.Expect(err).NotTo(HaveOccurred())
	leader, ok := Leader(allHealthy(t, c, 3))
	g.Expect(ok).To(BeTrue())

	// The leader stays; the two followers go down in turn.
	var stay *etcdserver.Member
	var followers []*etcdserver.Member
	for _, m := range cluster.Members() {
		if named(g, members, m.Name).ID == leader {
			stay = m
		} else {
			followers = append(followers, m)
		}
	}
	dead, hung := followers[0], followers[1]
	deadID := named(g, members, dead.Name).ID

	dead.Kill()
	statuses, err := c.Status(timeoutCtx(t, 10*time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(statuses).To(HaveLen(3))
	for _, s := range statuses {
		if s.ID != deadID {
			g.Expect(s.Healthy).To(BeTrue(), "member %s: %v", s.Member, s.Err)
			continue
		}
		g.Expect(s.Healthy).To(BeFalse())
		g.Expect(s.Answered).To(BeFalse())
		g.Expect(s.Err).To(MatchError(ContainSubstring("connection refused")))
		g.Expect(s.Err).NotTo(MatchError(context.DeadlineExceeded), "a dead member fails fast")
		g.Expect(Classify(s.Err)).To(Equal(Transient))
	}
	g.Expect(HealthyQuorum(members, statuses)).To(BeTrue())
	g.Expect(CanRemove(members, statuses, deadID)).To(Succeed(), "a dead member may be replaced")
	g.Expect(CanAddLearner(members, statuses)).To(MatchError(ErrUnhealthy))

	// With the other follower hung too, the quorum is gone. A client that
	// knows only the leader lists the members from its copy; every probe
	// ends with the deadline at the latest.
	hung.Freeze(t)
	t.Cleanup(hung.Thaw)
	one := clientOf(t, cluster, stay.ClientURL)
	statuses, err = one.Status(timeoutCtx(t, 3*time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(statuses).To(HaveLen(3))
	for _, s := range statuses {
		g.Expect(s.Healthy).To(BeFalse(), "member %s", s.Member)
		g.Expect(Classify(s.Err)).To(Equal(Transient))
		switch s.Name {
		case hung.Name:
			g.Expect(s.Err).To(MatchError(context.DeadlineExceeded))
		case stay.Name:
			g.Expect(s.Answered).To(BeTrue(), "it answers, but cannot read linearizably")
		}
	}
	g.Expect(HealthyQuorum(members, statuses)).To(BeFalse())
	g.Expect(CanRemove(members, statuses, deadID)).To(MatchError(ErrQuorumAtRisk))
	_, err = one.Members(timeoutCtx(t, 2*time.Second))
	g.Expect(err).To(MatchError(context.DeadlineExceeded), "a linearizable list needs the quorum")
	g.Expect(Classify(err)).To(Equal(Transient))

	hung.Thaw()
	dead.Restart(t)
	allHealthy(t, c, 3)
}
