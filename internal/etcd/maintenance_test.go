package etcd

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tend-dev/tend/internal/testing/etcdserver"
)

// TestCompact: history before the revision is gone on every member, the
// keys' latest values stay, and compacting again there says ErrCompacted.
func TestCompact(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 3})
	c := clientOf(t, cluster)
	ctx := callCtx(t)
	var revs []int64
	for i := range 10 {
		resp, err := c.cli.Put(ctx, "k", fmt.Sprint(i))
		g.Expect(err).NotTo(HaveOccurred())
		revs = append(revs, resp.Header.Revision)
	}

	g.Expect(c.Compact(ctx, revs[5])).To(Succeed())
	for _, m := range cluster.Members() {
		member := clientOf(t, cluster, m.ClientURL)
		_, err := member.cli.Get(ctx, "k", clientv3.WithRev(revs[4]), clientv3.WithSerializable())
		g.Expect(err).To(MatchError(rpctypes.ErrCompacted), "member %s dropped the history", m.Name)
		got, err := member.cli.Get(ctx, "k", clientv3.WithRev(revs[5]), clientv3.WithSerializable())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(got.Kvs[0].Value)).To(Equal("5"))
	}
	got, err := c.cli.Get(ctx, "k")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(got.Kvs[0].Value)).To(Equal("9"))

	g.Expect(c.Compact(ctx, revs[3])).To(MatchError(ErrCompacted))
	err = c.Compact(ctx, revs[9]+100)
	g.Expect(err).To(MatchError(rpctypes.ErrFutureRev))
	g.Expect(Classify(err)).To(Equal(Terminal))
}

// TestDefragmentShrinks: overwritten and compacted data leaves free pages;
// a follower's defragmentation gives them back, and the sizes it reports
// are the member's own.
func TestDefragmentShrinks(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 3})
	c := clientOf(t, cluster)
	rev := fill(t, c, 2, 8<<20)
	g.Expect(c.Compact(callCtx(t), rev)).To(Succeed())

	// The freed pages count as free once a later write has committed
	// (bbolt frees a transaction's pages when the next one begins).
	var follower MemberStatus
	g.Eventually(func(g Gomega) {
		put(t, c, 1)
		for _, s := range allHealthy(t, c, 3) {
			if !s.IsLeader() {
				follower = s
			}
		}
		g.Expect(follower.DBSize-follower.DBSizeInUse).To(BeNumerically(">", 3<<20), "about half of the file is free")
	}).WithTimeout(10 * time.Second).Should(Succeed())

	d, err := c.Defragment(callCtx(t), follower.Endpoint)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Before).To(BeNumerically(">=", follower.DBSize))
	g.Expect(d.After).To(BeNumerically("<", d.Before/2))
	g.Expect(d.After).To(BeNumerically(">=", d.InUse*9/10))
	g.Expect(d.Took).To(BeNumerically(">", 0))
	after := statusOf(g, allHealthy(t, c, 3), follower.ID)
	g.Expect(after.DBSize).To(Equal(d.After))
}

// TestNoSpaceRecovery: a small quota fills, etcd raises NOSPACE and takes
// no more writes; compaction, defragmentation of every member and the
// disarm let it write again.
func TestNoSpaceRecovery(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 1, QuotaBackendBytes: 4 << 20})
	c := clientOf(t, cluster)
	ctx := callCtx(t)
	value := strings.Repeat("x", 64<<10)
	var err error
	for i := 0; err == nil; i++ {
		g.Expect(i).To(BeNumerically("<", 1000), "the quota never filled")
		_, err = c.cli.Put(ctx, fmt.Sprintf("k%d", i%8), value)
	}
	g.Expect(err).To(MatchError(rpctypes.ErrNoSpace))
	statuses := allHealthy(t, c, 1)
	g.Expect(noSpace(statuses)).To(BeTrue())

	n, err := c.DisarmNoSpace(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))
	_, err = c.cli.Put(ctx, "k0", value)
	g.Expect(err).To(MatchError(rpctypes.ErrNoSpace), "disarmed over the quota, the next write raises it again")

	g.Expect(c.Compact(ctx, statuses[0].Revision)).To(Succeed())
	d, err := c.Defragment(ctx, statuses[0].Endpoint)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.After).To(BeNumerically("<", 4<<20))
	n, err = c.DisarmNoSpace(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))
	g.Expect(noSpace(allHealthy(t, c, 1))).To(BeFalse())
	_, err = c.cli.Put(ctx, "k0", "small")
	g.Expect(err).NotTo(HaveOccurred())
}

// noSpace tells whether a member reports the NOSPACE alarm.
func noSpace(statuses []MemberStatus) bool {
	return slices.ContainsFunc(statuses, func(s MemberStatus) bool { return slices.ContainsFunc(s.Errors, IsNoSpaceAlarm) })
}

// fill writes about size bytes, rounds times over the same keys, and
// returns the revision of the last write: all but the last round are
// history that a compaction frees.
func fill(t *testing.T, c *Client, rounds, size int) int64 {
	t.Helper()
	g := NewWithT(t)
	value := strings.Repeat("v", 16<<10)
	keys := size / rounds / len(value)
	var rev int64
	for r := range rounds {
		for k := range keys {
			resp, err := c.cli.Put(callCtx(t), fmt.Sprintf("fill-%04d", k), value[r:])
			g.Expect(err).NotTo(HaveOccurred())
			rev = resp.Header.Revision
		}
	}
	return rev
}
