package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// MemberID is an etcd member's ID. It prints in hexadecimal, as etcd and
// etcdctl print it.
type MemberID uint64

// String returns the ID in hexadecimal, such as "8e9e05c52164694d".
func (id MemberID) String() string { return strconv.FormatUint(uint64(id), 16) }

// ParseMemberID reads an ID that String printed.
func ParseMemberID(s string) (MemberID, error) {
	id, err := strconv.ParseUint(s, 16, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%w: member ID %q is not a non-zero hexadecimal number", ErrInvalid, s)
	}
	return MemberID(id), nil
}

// Member is one member of the cluster, as the cluster's membership says.
type Member struct {
	ID MemberID
	// Name is the member's --name. It is empty until the member has started
	// and published it.
	Name string
	// PeerURLs are where the other members reach it.
	PeerURLs []string
	// ClientURLs are where clients reach it. They are empty until the
	// member has started and published them.
	ClientURLs []string
	// IsLearner is true for a member that receives the log but does not
	// vote, until it is promoted.
	IsLearner bool
}

// Started tells whether the member has started and published its name and
// client URLs.
func (m Member) Started() bool { return len(m.ClientURLs) > 0 }

// String names the member for messages: its name and ID, or its ID and
// peer URL before it has started.
func (m Member) String() string {
	if m.Name != "" {
		return m.Name + " (" + m.ID.String() + ")"
	}
	return m.ID.String() + " (not started, " + strings.Join(m.PeerURLs, ",") + ")"
}

func memberOf(m *pb.Member) Member {
	return Member{
		ID:         MemberID(m.ID),
		Name:       m.Name,
		PeerURLs:   slices.Clone(m.PeerURLs),
		ClientURLs: slices.Clone(m.ClientURLs),
		IsLearner:  m.IsLearner,
	}
}

func membersOf(ms []*pb.Member) []Member {
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, memberOf(m))
	}
	slices.SortFunc(out, func(a, b Member) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// Members returns the cluster's members, ordered by ID. The list is
// linearizable: it comes through the leader, so it is current, and it needs
// a quorum. Decide membership changes on it.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	var resp *clientv3.MemberListResponse
	err := c.do(ctx, "listing members", func(ctx context.Context) error {
		var err error
		resp, err = c.cli.MemberList(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return membersOf(resp.Members), nil
}

// AddLearner adds a learner, a member that receives the log but does not
// vote, which will be reached at peerURL. Start it afterwards with
// --initial-cluster-state=existing and InitialCluster's list. etcd takes
// one learner at a time: a second is refused with ErrLearnerPending.
//
// It is idempotent: when a learner with exactly this peer URL is already in
// the cluster (a retry of an add whose answer was lost), it returns that
// learner. When a voting member has the URL, it fails with ErrPeerURLInUse.
func (c *Client) AddLearner(ctx context.Context, peerURL string) (Member, error) {
	op := "adding a learner at " + peerURL
	if err := checkPeerURL(peerURL); err != nil {
		return Member{}, fmt.Errorf("%s: %w", op, err)
	}
	var resp *clientv3.MemberAddResponse
	err := c.do(ctx, op, func(ctx context.Context) error {
		var err error
		resp, err = c.cli.MemberAddAsLearner(ctx, []string{peerURL})
		return err
	})
	// etcd derives a member's ID from its peer URLs and the time in
	// seconds: an add repeated within the second collides on the ID first.
	if errors.Is(err, ErrPeerURLInUse) || errors.Is(err, rpctypes.ErrMemberExist) {
		members, listErr := c.Members(ctx)
		if listErr != nil {
			return Member{}, fmt.Errorf("%s: the URL is in use, and finding its member failed: %w", op, listErr)
		}
		for _, m := range members {
			if slices.Contains(m.PeerURLs, peerURL) {
				if m.IsLearner {
					return m, nil
				}
				return Member{}, fmt.Errorf("%s: %w: member %s has it", op, ErrPeerURLInUse, m)
			}
		}
	}
	if err != nil {
		return Member{}, err
	}
	return memberOf(resp.Member), nil
}

func checkPeerURL(peerURL string) error {
	u, err := url.Parse(peerURL)
	if err != nil {
		return fmt.Errorf("%w: peer URL %q: %w", ErrInvalid, peerURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Port() == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return fmt.Errorf("%w: peer URL %q must be http:// or https:// with a host and a port, and nothing else", ErrInvalid, peerURL)
	}
	return nil
}

// Promote makes learner id a voting member. While the learner has not
// caught up with the leader, etcd refuses with ErrLearnerNotReady: promote
// again later (LearnerCaughtUp says when it should succeed). Promoting a
// member that already votes does nothing and succeeds, so that a retry of a
// promotion whose answer was lost succeeds.
func (c *Client) Promote(ctx context.Context, id MemberID) error {
	err := c.do(ctx, "promoting member "+id.String(), func(ctx context.Context) error {
		_, err := c.cli.MemberPromote(ctx, uint64(id))
		return err
	})
	if errors.Is(err, rpctypes.ErrMemberNotLearner) {
		return nil
	}
	return err
}

// Remove removes member id from the cluster; the member's process stops by
// itself once it learns it. etcd refuses with ErrQuorumAtRisk a removal that
// would leave fewer started members than a quorum (its strict
// reconfiguration check); check CanRemove first. A member that is not there
// gives ErrMemberNotFound, which Classify calls NotFound: the removal is done.
//
// The request goes to another started voting member, never to the one being
// removed: that one stops as it applies its own removal and may answer
// "server stopped" for a removal that did happen.
func (c *Client) Remove(ctx context.Context, id MemberID) error {
	op := "removing member " + id.String()
	members, err := c.Members(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if _, ok := find(members, id); !ok {
		return fmt.Errorf("%s: %w", op, ErrMemberNotFound)
	}
	err = fmt.Errorf("%s: %w: no other started voting member to send it to", op, ErrQuorumAtRisk)
	for _, m := range members {
		if m.ID == id || m.IsLearner || !m.Started() {
			continue
		}
		err = c.onMember(ctx, op+" through "+m.String(), m.ClientURLs[0], func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := pb.NewClusterClient(conn).MemberRemove(ctx, &pb.MemberRemoveRequest{ID: uint64(id)}, failFast)
			return err
		})
		// A member that cannot be reached says nothing; ask the next.
		if s, ok := status.FromError(err); !ok || s.Code() != codes.Unavailable {
			return err
		}
	}
	return err
}

// InitialCluster returns the --initial-cluster value with which member id,
// just added, joins: name=peerURL for every member and peer URL, with name
// for member id, whose own name is not known until it starts. It is the list
// that etcdctl member add prints, in the order of members.
func InitialCluster(members []Member, id MemberID, name string) string {
	var parts []string
	for _, m := range members {
		n := m.Name
		if m.ID == id {
			n = name
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, n+"="+u)
		}
	}
	return strings.Join(parts, ",")
}
