package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// healthKey is the key that the health check reads, as etcdctl endpoint
// health does. It need not exist.
const healthKey = "health"

// MemberStatus is what one member says about itself, and whether it is
// healthy.
type MemberStatus struct {
	// Member is the member as the membership list says.
	Member
	// Endpoint is the client URL that was asked: the member's first.
	// Empty when the member has not started.
	Endpoint string
	// Answered tells whether the member answered the status request; the
	// fields below it are zero when it did not.
	Answered bool
	// Leader is the member that this member follows, 0 when it knows none.
	Leader MemberID
	// RaftTerm is the member's current election term.
	RaftTerm uint64
	// RaftIndex is the member's committed raft index, and RaftAppliedIndex
	// how far it has applied the log to its store.
	RaftIndex, RaftAppliedIndex uint64
	// Revision is the revision of the member's key-value store when it
	// answered: the last change it applied. Of two members of one cluster,
	// the one with the higher revision has seen more of the history.
	Revision int64
	// Version is the member's etcd version, such as "3.6.16".
	Version string
	// DBSize is the size of the member's database file, and DBSizeInUse how
	// much of it holds data; the rest is free until a defragmentation.
	DBSize, DBSizeInUse int64
	// Errors are what etcd itself reports, such as "etcdserver: no leader"
	// and active alarms ("memberID:… alarm:NOSPACE"). Alarms are the whole
	// cluster's, so every member lists them all.
	Errors []string
	// Healthy: the member answered, follows a leader and, when it votes,
	// served a linearizable read (see Status).
	Healthy bool
	// Err says why the member is not healthy; nil when it is.
	Err error
}

// IsLeader tells whether the member says that it leads.
func (s MemberStatus) IsLeader() bool { return s.Answered && s.Leader == s.ID }

// Status returns the status of every member, in the order of their IDs. It
// lists the members serializably (any member answers from its own copy, so
// it works without a quorum and may be a little stale), then asks each one
// at its own first client URL, all at once. It fails only when no endpoint
// can list the members; a member that cannot be asked has Healthy false and
// Err set, and one that is down makes Status wait no longer than the
// connection error takes. A member that hangs costs Status the context's
// deadline, no more.
//
// A member is healthy when it answers the status request, follows a leader
// and, if it votes, serves a linearizable read of one key. That is what
// etcd's /readyz checks (less its CORRUPT alarm check, below): a
// linearizable read goes through the leader's read index, so a member that
// serves one is connected to a leader that has a quorum, and has applied
// the log up to the present. An answer that refuses the user ("permission
// denied", "user name is empty") counts as served, as etcdctl endpoint health
// counts "permission denied": etcd checks auth after the read index. A learner serves no linearizable reads, so it is
// healthy when it answers and follows a leader; whether it has caught up is
// LearnerCaughtUp's question.
//
// Alarms do not make a member unhealthy. They are the cluster's, not the
// member's: a NOSPACE alarm makes every member read-only, and a CORRUPT alarm
// every member refuse requests; replacing members fixes neither, and they
// need someone to act. They are in Errors, to report.
func (c *Client) Status(ctx context.Context) ([]MemberStatus, error) {
	var resp *clientv3.MemberListResponse
	err := c.do(ctx, "listing members", func(ctx context.Context) error {
		var err error
		resp, err = c.cli.MemberList(ctx, clientv3.WithSerializable())
		return err
	})
	if err != nil {
		return nil, err
	}
	members := membersOf(resp.Members)
	out := make([]MemberStatus, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() { out[i] = c.memberStatus(ctx, m) })
	}
	wg.Wait()
	return out, nil
}

// memberStatus asks one member for its status and checks its health.
func (c *Client) memberStatus(ctx context.Context, m Member) MemberStatus {
	s := MemberStatus{Member: m}
	if !m.Started() {
		s.Err = fmt.Errorf("member %s: %w", m, ErrNotStarted)
		return s
	}
	s.Endpoint = m.ClientURLs[0]
	err := c.onMember(ctx, "checking member "+m.String()+" at "+s.Endpoint, s.Endpoint, func(ctx context.Context, conn *grpc.ClientConn) error {
		answer, err := pb.NewMaintenanceClient(conn).Status(ctx, &pb.StatusRequest{}, failFast)
		if err != nil {
			return err
		}
		if got := MemberID(answer.Header.GetMemberId()); got != m.ID {
			return fmt.Errorf("the endpoint answered as member %s", got)
		}
		s.Answered = true
		s.Leader = MemberID(answer.Leader)
		s.RaftTerm, s.RaftIndex, s.RaftAppliedIndex = answer.RaftTerm, answer.RaftIndex, answer.RaftAppliedIndex
		s.Revision = answer.Header.GetRevision()
		s.Version = answer.Version
		s.DBSize, s.DBSizeInUse = answer.DbSize, answer.DbSizeInUse
		s.Errors = answer.Errors
		if s.Leader == 0 {
			return ErrNoLeader
		}
		// The member's own view: it may learn of its promotion after the
		// member list that was read.
		if answer.IsLearner {
			return nil
		}
		_, err = pb.NewKVClient(conn).Range(ctx, &pb.RangeRequest{Key: []byte(healthKey), KeysOnly: true, Limit: 1}, failFast)
		if err = clientv3.ContextError(ctx, err); err != nil && !errors.Is(kindOf(err), ErrAuth) {
			return fmt.Errorf("linearizable read: %w", err)
		}
		return nil
	})
	s.Healthy = err == nil
	s.Err = err
	return s
}
