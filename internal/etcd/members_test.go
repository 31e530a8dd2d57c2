package etcd

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/testing/etcdserver"
)

func TestMemberIDRoundTrip(t *testing.T) {
	tests := []struct {
		in      string
		want    MemberID
		wantErr bool
	}{
		{in: "8e9e05c52164694d", want: 0x8e9e05c52164694d},
		{in: "1", want: 1},
		{in: "ffffffffffffffff", want: 0xffffffffffffffff},
		{in: "0", wantErr: true},
		{in: "", wantErr: true},
		{in: "xyz", wantErr: true},
		{in: "1ffffffffffffffff", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			g := NewWithT(t)
			id, err := ParseMemberID(tt.in)
			if tt.wantErr {
				g.Expect(err).To(MatchError(ErrInvalid))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(id).To(Equal(tt.want))
			g.Expect(id.String()).To(Equal(tt.in))
		})
	}
}

func TestInitialCluster(t *testing.T) {
	g := NewWithT(t)
	members := []Member{
		{ID: 1, Name: "etcd-0", PeerURLs: []string{"https://etcd-0.etcd:2380"}},
		{ID: 2, Name: "etcd-1", PeerURLs: []string{"https://etcd-1.etcd:2380", "https://10.0.0.2:2380"}},
		{ID: 3, PeerURLs: []string{"https://etcd-2.etcd:2380"}, IsLearner: true},
	}
	g.Expect(InitialCluster(members, 3, "etcd-2")).To(Equal(
		"etcd-0=https://etcd-0.etcd:2380,etcd-1=https://etcd-1.etcd:2380,etcd-1=https://10.0.0.2:2380,etcd-2=https://etcd-2.etcd:2380"))
}

func TestAddLearnerRejectsBadURLs(t *testing.T) {
	c := newClient(t, Config{Endpoints: []string{nowhere}})
	for _, u := range []string{"127.0.0.1:2380", "http://127.0.0.1", "unix://x:1", "http://127.0.0.1:2380/path", "http://127.0.0.1:2380?x=1", "http://[::1"} {
		t.Run(u, func(t *testing.T) {
			g := NewWithT(t)
			// The endpoint is dead: only a refusal before sending returns
			// before the deadline with ErrInvalid.
			_, err := c.AddLearner(callCtx(t), u)
			g.Expect(err).To(MatchError(ErrInvalid))
			g.Expect(Classify(err)).To(Equal(Terminal))
		})
	}
}

func TestMembers(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 3})
	c := clientOf(t, cluster)

	members, err := c.Members(callCtx(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(members).To(HaveLen(3))
	for _, want := range cluster.Members() {
		m := named(g, members, want.Name)
		g.Expect(m.ID).NotTo(BeZero())
		g.Expect(m.PeerURLs).To(Equal([]string{want.PeerURL}))
		g.Expect(m.ClientURLs).To(Equal([]string{want.ClientURL}))
		g.Expect(m.IsLearner).To(BeFalse())
		g.Expect(m.Started()).To(BeTrue())
	}
	g.Expect(members[0].ID).To(BeNumerically("<", members[1].ID))
	g.Expect(members[1].ID).To(BeNumerically("<", members[2].ID))
}

// TestScaleOutWithALearner goes the way the controller scales out: add one
// learner, start it, promote it once it has caught up, asking the checks
// before each step.
func TestScaleOutWithALearner(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 1})
	c := clientOf(t, cluster)
	ctx := callCtx(t)
	put(t, c, 300) // something for the learner to catch up on

	members, err := c.Members(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(CanAddLearner(members, allHealthy(t, c, 1))).To(Succeed())

	joiner := cluster.NewMember(t)
	added := time.Now()
	learner, err := c.AddLearner(ctx, joiner.PeerURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(learner.ID).NotTo(BeZero())
	g.Expect(learner.IsLearner).To(BeTrue())
	g.Expect(learner.PeerURLs).To(Equal([]string{joiner.PeerURL}))
	g.Expect(learner.Started()).To(BeFalse())

	// A retry of an add whose answer was lost finds the same learner.
	again, err := c.AddLearner(ctx, joiner.PeerURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.ID).To(Equal(learner.ID))
	// The peer URL of a voter is refused.
	_, err = c.AddLearner(ctx, cluster.Members()[0].PeerURL)
	g.Expect(err).To(MatchError(ErrPeerURLInUse))
	g.Expect(err).To(MatchError(ContainSubstring("member m0 (")))
	g.Expect(Classify(err)).To(Equal(Terminal))

	// One learner at a time: the check says so, and so does etcd.
	members, err = c.Members(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	statuses, err := c.Status(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(CanAddLearner(members, statuses)).To(MatchError(ErrLearnerPending))
	_, err = c.AddLearner(ctx, cluster.NewMember(t).PeerURL)
	g.Expect(err).To(MatchError(ErrLearnerPending))
	g.Expect(Classify(err)).To(Equal(Transient))

	// It has not started: Status says so, and it cannot be promoted.
	s := statusOf(g, statuses, learner.ID)
	g.Expect(s.Healthy).To(BeFalse())
	g.Expect(s.Err).To(MatchError(ErrNotStarted))
	g.Expect(CanPromote(members, statuses, learner.ID)).To(MatchError(ErrLearnerNotReady))
	err = c.Promote(ctx, learner.ID)
	g.Expect(err).To(MatchError(ErrLearnerNotReady))
	g.Expect(Classify(err)).To(Equal(Transient))

	joined := time.Now()
	joiner.Join(t, InitialCluster(members, learner.ID, joiner.Name))

	// Poll as the controller's requeues would: promote once the checks
	// allow it, and again while etcd says it is not ready yet.
	checks, promotes := 0, 0
	g.Eventually(func(g Gomega) {
		ctx := timeoutCtx(t, 5*time.Second)
		statuses, err := c.Status(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		checks++
		g.Expect(CanPromote(members, statuses, learner.ID)).To(Succeed())
		promotes++
		g.Expect(c.Promote(ctx, learner.ID)).To(Succeed())
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	t.Logf("Learner added to promoted in %s (started to promoted in %s): %d status polls, %d promote calls",
		time.Since(added).Round(time.Millisecond), time.Since(joined).Round(time.Millisecond), checks, promotes)

	members, err = c.Members(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(members).To(HaveLen(2))
	g.Expect(members).To(HaveEach(HaveField("IsLearner", false)))
	g.Expect(named(g, members, joiner.Name).ID).To(Equal(learner.ID))
	// A retry of a promotion whose answer was lost succeeds.
	g.Expect(c.Promote(ctx, learner.ID)).To(Succeed())

	statuses = allHealthy(t, c, 2)
	g.Expect(HealthyQuorum(members, statuses)).To(BeTrue())
	g.Expect(CanAddLearner(members, statuses)).To(Succeed())
	// The new member has the data: it serves a linearizable read of it.
	one := clientOf(t, cluster, joiner.ClientURL)
	resp, err := one.cli.Get(ctx, "key-0299")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Kvs).To(HaveLen(1))
	g.Expect(resp.Header.MemberId).To(BeEquivalentTo(learner.ID))
}

// TestRemove removes a follower the way the controller scales in.
func TestRemove(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 3})
	c := clientOf(t, cluster)
	ctx := callCtx(t)

	members, err := c.Members(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	statuses := allHealthy(t, c, 3)
	leader, ok := Leader(statuses)
	g.Expect(ok).To(BeTrue())
	g.Expect(CanRemove(members, statuses, leader)).To(MatchError(ErrIsLeader))

	var victim Member
	for _, m := range members {
		if m.ID != leader {
			victim = m
		}
	}
	g.Expect(CanRemove(members, statuses, victim.ID)).To(Succeed())
	// etcd's strict reconfiguration check counts only the peers that have
	// been connected for 5 s; until then, it refuses. Retry as the
	// controller's requeue would.
	g.Eventually(func() error {
		err := c.Remove(timeoutCtx(t, 5*time.Second), victim.ID)
		if err != nil && !errors.Is(err, ErrQuorumAtRisk) {
			return StopTrying("Remove failed for another reason").Wrap(err)
		}
		return err
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

	members, err = c.Members(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(members).To(HaveLen(2))
	g.Expect(members).NotTo(ContainElement(HaveField("ID", victim.ID)))
	// The removed member learns it and stops.
	for _, m := range cluster.Members() {
		if m.Name == victim.Name {
			g.Eventually(m.Running).WithTimeout(30 * time.Second).Should(BeFalse())
		}
	}

	// A second removal finds nothing to remove: done, for the controller.
	err = c.Remove(ctx, victim.ID)
	g.Expect(err).To(MatchError(ErrMemberNotFound))
	g.Expect(Classify(err)).To(Equal(NotFound))
	g.Expect(CanRemove(members, allHealthy(t, c, 2), victim.ID)).To(MatchError(ErrMemberNotFound))
}
