package etcd

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// MoveLeader hands the leadership to voting member to, and returns once
// the leader has handed it over. etcd takes the request only from the
// leader, so MoveLeader finds the leader and sends it to the leader's own
// client URL, whichever endpoints the client was given. When to already
// leads, it does nothing. A member that is not there gives
// ErrMemberNotFound; a learner, etcd's "bad leader transferee" (Terminal).
// A leader that changes meanwhile gives etcd's "not leader" (Transient):
// look again.
func (c *Client) MoveLeader(ctx context.Context, to MemberID) error {
	op := "moving the leadership to member " + to.String()
	members, err := c.Members(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if _, ok := find(members, to); !ok {
		return fmt.Errorf("%s: %w", op, ErrMemberNotFound)
	}
	var answer *pb.StatusResponse
	err = c.do(ctx, "finding the leader", func(ctx context.Context) error {
		var err error
		answer, err = clientv3.RetryMaintenanceClient(c.cli, c.cli.ActiveConnection()).Status(ctx, &pb.StatusRequest{})
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	leaderID := MemberID(answer.Leader)
	if leaderID == to {
		return nil
	}
	leader, ok := find(members, leaderID)
	if !ok || !leader.Started() {
		return fmt.Errorf("%s: %w: member %s, which answered, follows %s, which is not a started member", op, ErrNoLeader, MemberID(answer.Header.GetMemberId()), leaderID)
	}
	return c.onMember(ctx, op+" from "+leader.String(), leader.ClientURLs[0], func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := pb.NewMaintenanceClient(conn).MoveLeader(ctx, &pb.MoveLeaderRequest{TargetID: uint64(to)}, failFast)
		return err
	})
}

// find returns the member with id.
func find(members []Member, id MemberID) (Member, bool) {
	for _, m := range members {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}
