package etcd

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/testing/etcdserver"
)

// TestMoveLeader moves the leadership with a client that knows one follower
// only: MoveLeader must find the leader and send the request there.
func TestMoveLeader(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 3})
	all := clientOf(t, cluster)
	ctx := callCtx(t)

	members, err := all.Members(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	statuses := allHealthy(t, all, 3)
	leader, ok := Leader(statuses)
	g.Expect(ok).To(BeTrue())
	var follower Member
	for _, m := range members {
		if m.ID != leader {
			follower = m
		}
	}
	one := clientOf(t, cluster, follower.ClientURLs[0])

	to, err := NextLeader(members, statuses, leader)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(to).NotTo(Equal(leader))
	g.Expect(one.MoveLeader(ctx, to)).To(Succeed())

	g.Eventually(func(g Gomega) {
		statuses, err := all.Status(timeoutCtx(t, 5*time.Second))
		g.Expect(err).NotTo(HaveOccurred())
		for _, s := range statuses {
			g.Expect(s.Leader).To(Equal(to), "member %s", s.Member)
		}
		g.Expect(statusOf(g, statuses, to).IsLeader()).To(BeTrue())
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	g.Expect(CanRemove(members, allHealthy(t, all, 3), leader)).To(Succeed(), "the old leader may go now")

	// Moving it to the leader does nothing.
	g.Expect(one.MoveLeader(ctx, to)).To(Succeed())
	leaderNow, ok := Leader(allHealthy(t, all, 3))
	g.Expect(ok).To(BeTrue())
	g.Expect(leaderNow).To(Equal(to))

	err = one.MoveLeader(ctx, 0x1234)
	g.Expect(err).To(MatchError(ErrMemberNotFound))
	g.Expect(Classify(err)).To(Equal(NotFound))
}
