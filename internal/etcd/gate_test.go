package etcd

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tend-dev/tend/internal/fence"
	"github.com/tend-dev/tend/internal/testing/etcdserver"
)

// lostLease is a Gate of a process that lost its Lease: it refuses, as the
// manager's does, with an error wrapping fence.ErrNotLeader, and counts
// the calls that asked it.
type lostLease struct{ asked atomic.Int32 }

func (g *lostLease) Allow(context.Context) error {
	g.asked.Add(1)
	return fmt.Errorf("%w: the Lease tend-system/tend.tend.dev is held by %q", fence.ErrNotLeader, "tend-manager-b")
}

type gateFunc func(context.Context) error

func (f gateFunc) Allow(ctx context.Context) error { return f(ctx) }

// TestIsReadRPC: the RPCs that pass no Gate are the reads; every change,
// those that the package makes and those that it may make later, passes
// it.
func TestIsReadRPC(t *testing.T) {
	g := NewWithT(t)
	for _, m := range []string{
		pb.KV_Range_FullMethodName, pb.KV_RangeStream_FullMethodName, pb.Watch_Watch_FullMethodName,
		pb.Cluster_MemberList_FullMethodName, pb.Maintenance_Status_FullMethodName,
		pb.Maintenance_HashKV_FullMethodName, pb.Maintenance_Snapshot_FullMethodName,
		pb.Auth_AuthStatus_FullMethodName, pb.Auth_Authenticate_FullMethodName,
	} {
		g.Expect(isRead(m, nil)).To(BeTrue(), m)
	}
	g.Expect(isRead(pb.Maintenance_Alarm_FullMethodName, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})).To(BeTrue())
	for _, m := range []string{
		pb.Cluster_MemberAdd_FullMethodName, pb.Cluster_MemberRemove_FullMethodName,
		pb.Cluster_MemberPromote_FullMethodName, pb.Cluster_MemberUpdate_FullMethodName,
		pb.Maintenance_MoveLeader_FullMethodName, pb.Maintenance_Defragment_FullMethodName,
		pb.Maintenance_Downgrade_FullMethodName, pb.KV_Put_FullMethodName, pb.KV_DeleteRange_FullMethodName,
		pb.KV_Txn_FullMethodName, pb.KV_Compact_FullMethodName, pb.Lease_LeaseGrant_FullMethodName,
		pb.Lease_LeaseKeepAlive_FullMethodName, pb.Auth_AuthEnable_FullMethodName, pb.Auth_AuthDisable_FullMethodName,
		pb.Auth_UserAdd_FullMethodName, pb.Auth_UserChangePassword_FullMethodName,
		pb.Auth_UserGrantRole_FullMethodName, pb.Auth_RoleAdd_FullMethodName,
		"/v3electionpb.Election/Campaign", "/v3lockpb.Lock/Lock", "",
	} {
		g.Expect(isRead(m, nil)).To(BeFalse(), m)
	}
	for _, a := range []pb.AlarmRequest_AlarmAction{pb.AlarmRequest_ACTIVATE, pb.AlarmRequest_DEACTIVATE} {
		g.Expect(isRead(pb.Maintenance_Alarm_FullMethodName, &pb.AlarmRequest{Action: a})).To(BeFalse(), a.String())
	}
	g.Expect(isRead(pb.Maintenance_Alarm_FullMethodName, nil)).To(BeFalse())
}

// TestGateRefusesChangesToTheCluster: with a Gate that refuses, as the
// manager's does once its Lease is lost, no call that changes the cluster
// reaches it: each returns the Gate's error, and the cluster is as it was
// (the same members, learner and leader, no auth, no root user, no new key,
// no compaction, the alarm still raised). Reads go through without asking
// the Gate.
func TestGateRefusesChangesToTheCluster(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 3})
	admin := clientOf(t, cluster)
	gate := &lostLease{}
	fenced := newClient(t, Config{Endpoints: cluster.ClientURLs(), Gate: gate})
	ctx := callCtx(t)

	leader, ok := Leader(allHealthy(t, admin, 3))
	g.Expect(ok).To(BeTrue())
	members, err := admin.Members(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var follower Member
	for _, m := range members {
		if m.ID != leader {
			follower = m
		}
	}
	// A learner that never starts, for Promote to refuse. etcd takes a
	// member change only once its leader has been in touch with a quorum
	// for 5s.
	var learner Member
	spare := cluster.NewMember(t).PeerURL
	g.Eventually(func() error {
		learner, err = admin.AddLearner(timeoutCtx(t, 5*time.Second), spare)
		return err
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	put, err := admin.cli.Put(ctx, "kept", "1")
	g.Expect(err).NotTo(HaveOccurred())
	rev := put.Header.Revision
	_, err = pb.NewMaintenanceClient(admin.cli.ActiveConnection()).Alarm(ctx, &pb.AlarmRequest{
		Action: pb.AlarmRequest_ACTIVATE, MemberID: uint64(follower.ID), Alarm: pb.AlarmType_NOSPACE,
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_, _ = admin.cli.AlarmDisarm(callCtx(t), &clientv3.AlarmMember{MemberID: uint64(follower.ID), Alarm: pb.AlarmType_NOSPACE})
	})
	before, err := admin.Members(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	changes := []struct {
		name string
		call func() error
	}{
		{"Remove", func() error { return fenced.Remove(ctx, follower.ID) }},
		{"MoveLeader", func() error { return fenced.MoveLeader(ctx, follower.ID) }},
		{"AddLearner", func() error {
			_, err := fenced.AddLearner(ctx, cluster.NewMember(t).PeerURL)
			return err
		}},
		{"Promote", func() error { return fenced.Promote(ctx, learner.ID) }},
		{"EnableAuth", func() error { return fenced.EnableAuth(ctx, "secret") }},
		{"SetRootPassword", func() error { return fenced.SetRootPassword(ctx, "secret") }},
		{"DisableAuth", func() error { return fenced.DisableAuth(ctx) }},
		{"Put", func() error {
			_, err := fenced.cli.Put(ctx, "fenced", "1")
			return err
		}},
		{"Compact", func() error { return fenced.Compact(ctx, rev) }},
		{"Defragment", func() error {
			_, err := fenced.Defragment(ctx, follower.ClientURLs[0])
			return err
		}},
		{"DisarmNoSpace", func() error {
			_, err := fenced.DisarmNoSpace(ctx)
			return err
		}},
	}
	for _, c := range changes {
		g.Expect(c.call()).To(MatchError(fence.ErrNotLeader), c.name)
	}
	g.Expect(gate.asked.Load()).To(BeEquivalentTo(len(changes)), "each change asked the Gate once")

	// The cluster is as it was.
	after, err := admin.Members(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after).To(Equal(before), "no member added, promoted or removed")
	statuses, err := admin.Status(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	now, ok := Leader(statuses)
	g.Expect(ok).To(BeTrue())
	g.Expect(now).To(Equal(leader), "the leadership did not move")
	g.Expect(admin.AuthEnabled(ctx)).To(BeFalse())
	_, err = admin.cli.UserGet(ctx, RootUser)
	g.Expect(err).To(MatchError(rpctypes.ErrUserNotFound))
	got, err := admin.cli.Get(ctx, "fenced")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Kvs).To(BeEmpty())
	_, err = admin.cli.Get(ctx, "kept", clientv3.WithRev(rev-1))
	g.Expect(err).NotTo(HaveOccurred(), "not compacted")
	alarms, err := admin.cli.AlarmList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alarms.Alarms).To(ContainElement(HaveField("MemberID", uint64(follower.ID))))

	// Reads are not fenced.
	g.Expect(fenced.Members(ctx)).To(Equal(before))
	_, err = fenced.Status(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fenced.AuthEnabled(ctx)).To(BeFalse())
	_, err = fenced.cli.Get(ctx, "kept")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = fenced.cli.AlarmList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gate.asked.Load()).To(BeEquivalentTo(len(changes)), "reads do not ask the Gate")
}

// TestGateLetsTheLeaderChange: a Gate that allows lets the changes through.
func TestGateLetsTheLeaderChange(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 1})
	var asked atomic.Int32
	fenced := newClient(t, Config{Endpoints: cluster.ClientURLs(), Gate: gateFunc(func(context.Context) error {
		asked.Add(1)
		return nil
	})})
	ctx := callCtx(t)
	learner, err := fenced.AddLearner(ctx, cluster.NewMember(t).PeerURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fenced.Members(ctx)).To(ContainElement(HaveField("ID", learner.ID)))
	g.Expect(fenced.Remove(ctx, learner.ID)).To(Succeed())
	members, err := fenced.Members(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(members).To(HaveLen(1))
	g.Expect(asked.Load()).To(BeNumerically(">=", 2), "each change asked the Gate")
}
