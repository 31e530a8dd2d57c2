package agent

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/tend-dev/tend/internal/agentapi"
)

// TestRecoveryProblems: a member is recovered when it leads, is the one
// voter of the member list under its name, and has applied its log to the
// index of its first answer; each miss is named.
func TestRecoveryProblems(t *testing.T) {
	const self, other, third = 0xa1, 0xb2, 0xc3
	status := func(leader uint64, applied uint64) *pb.StatusResponse {
		return &pb.StatusResponse{Header: &pb.ResponseHeader{MemberId: self, ClusterId: 0xfeed, Revision: 41},
			Leader: leader, RaftIndex: 60, RaftAppliedIndex: applied}
	}
	member := func(id uint64, name string, learner bool) *pb.Member {
		return &pb.Member{ID: id, Name: name, IsLearner: learner}
	}
	tests := []struct {
		name    string
		status  *pb.StatusResponse
		members []*pb.Member
		target  uint64
		want    []string
	}{
		{name: "recovered", status: status(self, 60), members: []*pb.Member{member(self, "m1", false)}, target: 55},
		{name: "recovered, applied exactly to the target", status: status(self, 55), members: []*pb.Member{member(self, "m1", false)}, target: 55},
		{
			name: "three members, a follower", status: status(other, 60),
			members: []*pb.Member{member(third, "m2", false), member(self, "m1", false), member(other, "", false)}, target: 55,
			want: []string{"member list still has 3 members: m1 (a1), b2 (not started), m2 (c3)", "it follows b2, not itself"},
		},
		{name: "no leader yet", status: status(0, 60), members: []*pb.Member{member(self, "m1", false)}, target: 55, want: []string{"it has no leader"}},
		{name: "another member's data", status: status(self, 60), members: []*pb.Member{member(other, "m1", false)}, target: 55, want: []string{"the only member is m1 (b2), not the one that answered (a1)"}},
		{name: "another name", status: status(self, 60), members: []*pb.Member{member(self, "m0", false)}, target: 55, want: []string{"the only member is m0 (a1), not named m1"}},
		{name: "a learner", status: status(self, 60), members: []*pb.Member{member(self, "m1", true)}, target: 55, want: []string{"the only member, m1 (a1), is a learner"}},
		{name: "log not replayed", status: status(self, 50), members: []*pb.Member{member(self, "m1", false)}, target: 55, want: []string{"it has applied its log to index 50, not yet to 55"}},
		{name: "an empty member list", status: status(self, 60), target: 55, want: []string{"member list still has 0 members: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := recoveryProblems(tt.status, tt.members, "m1", tt.target)
			if tt.want == nil {
				g.Expect(got).To(BeEmpty())
				return
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// TestRecoverRefusesOptions: options that cannot work are terminal, before
// anything is asked.
func TestRecoverRefusesOptions(t *testing.T) {
	tests := []struct {
		name    string
		o       RecoverOptions
		ctx     context.Context
		wantErr string
	}{
		{name: "no member", o: RecoverOptions{Endpoint: "http://127.0.0.1:2379"}, wantErr: "the member's name is empty"},
		{name: "https", o: RecoverOptions{Endpoint: "https://127.0.0.1:2379", Member: "m1"}, wantErr: `endpoint "https://127.0.0.1:2379" is not http://host:port`},
		{name: "no port", o: RecoverOptions{Endpoint: "http://127.0.0.1", Member: "m1"}, wantErr: "is not http://host:port"},
		{name: "a path", o: RecoverOptions{Endpoint: "http://127.0.0.1:2379/v3", Member: "m1"}, wantErr: "is not http://host:port"},
		{name: "no deadline", o: RecoverOptions{Endpoint: "http://127.0.0.1:2379", Member: "m1"}, ctx: context.Background(), wantErr: "no deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := tt.ctx
			if ctx == nil {
				ctx = shortCtx(t, time.Second)
			}
			r, err := Recover(ctx, tt.o)
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			g.Expect(Terminal(err)).To(BeTrue())
			g.Expect(r.Op).To(Equal(agentapi.OpRecover))
			g.Expect(r.Recovered).To(BeNil())
		})
	}
}
