package etcd

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestWrapAndClassify feeds wrap what the etcd client returns (gRPC
// statuses as they arrive off the wire, and rpctypes errors) and checks the
// package's error and its class.
func TestWrapAndClassify(t *testing.T) {
	expired, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	live, cancelLive := context.WithCancel(context.Background())
	defer cancelLive()

	unknownCA := status.Error(codes.DeadlineExceeded, `latest balancer error: connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`)
	tests := []struct {
		name     string
		ctx      context.Context
		err      error
		last     error // the last attempt's error
		wantKind error
		wantMsg  string
		want     Class
	}{
		{name: "member not found, off the wire", err: rpctypes.ErrGRPCMemberNotFound, wantKind: ErrMemberNotFound, want: NotFound},
		{name: "member not found, as the client returns it", err: rpctypes.ErrMemberNotFound, wantKind: ErrMemberNotFound, want: NotFound},
		{name: "learner not ready", err: rpctypes.ErrGRPCLearnerNotReady, wantKind: ErrLearnerNotReady, want: Transient},
		{name: "too many learners", err: rpctypes.ErrGRPCTooManyLearners, wantKind: ErrLearnerPending, want: Transient},
		{name: "strict reconfiguration refuses a removal", err: rpctypes.ErrGRPCUnhealthy, wantKind: ErrQuorumAtRisk, want: Transient},
		{name: "strict reconfiguration refuses an addition", err: rpctypes.ErrGRPCMemberNotEnoughStarted, wantKind: ErrQuorumAtRisk, want: Transient},
		{name: "no leader", err: rpctypes.ErrGRPCNoLeader, wantKind: ErrNoLeader, want: Transient},
		{name: "a revision older than the compaction", err: rpctypes.ErrGRPCCompacted, wantKind: ErrCompacted, want: Transient},
		{name: "peer URL exists", err: rpctypes.ErrGRPCPeerURLExist, wantKind: ErrPeerURLInUse, want: Terminal},
		{name: "wrong password", err: rpctypes.ErrGRPCAuthFailed, wantKind: ErrAuth, want: Terminal},
		{name: "permission denied", err: rpctypes.ErrGRPCPermissionDenied, wantKind: ErrAuth, want: Terminal},
		{name: "no user while auth is on", err: rpctypes.ErrGRPCUserEmpty, wantKind: ErrAuth, want: Terminal},
		{name: "permission denied as etcd v3.5 refuses a snapshot", err: status.Error(codes.Unknown, "auth: permission denied"), wantKind: ErrAuth, want: Terminal},
		{name: "no user, as etcd v3.5 refuses a snapshot", err: status.Error(codes.Unknown, "auth: user name is empty"), wantKind: ErrAuth, want: Terminal},
		{name: "an unknown user, as etcd v3.5 refuses a snapshot", err: status.Error(codes.Unknown, "auth: user not found"), wantKind: ErrAuth, want: Terminal},
		{name: "a password for a user without one, as bare text", err: status.Error(codes.Unknown, "auth: authentication failed, password was given for no password user"), wantKind: ErrAuth, want: Terminal},
		{name: "other bare text", err: status.Error(codes.Unknown, "auth: something new"), want: Transient},
		{name: "bad leader transferee", err: rpctypes.ErrGRPCBadLeaderTransferee, want: Terminal},
		{name: "bad member URLs", err: rpctypes.ErrGRPCMemberBadURLs, want: Terminal},
		{name: "NOSPACE", err: rpctypes.ErrGRPCNoSpace, want: Terminal},
		{name: "corrupt", err: rpctypes.ErrGRPCCorrupt, want: Terminal},
		{name: "an expired token, which the client renews by itself", err: rpctypes.ErrGRPCInvalidAuthToken, want: Transient},
		{name: "leader changed", err: rpctypes.ErrGRPCLeaderChanged, want: Transient},
		{name: "request timed out", err: rpctypes.ErrGRPCTimeout, want: Transient},
		{name: "not leader", err: rpctypes.ErrGRPCNotLeader, want: Transient},
		{name: "not supported for learner", err: rpctypes.ErrGRPCNotSupportedForLearner, want: Transient},
		{name: "an unknown gRPC permission error", err: status.Error(codes.PermissionDenied, "no"), want: Terminal},
		{name: "unimplemented, from an old server", err: status.Error(codes.Unimplemented, "unknown method"), want: Terminal},
		{name: "unavailable", err: status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:9: connect: connection refused"`), want: Transient},
		{name: "unknown", err: errors.New("something else"), want: Transient},
		{
			name: "a deadline, with the cause from the last attempt",
			ctx:  expired, err: status.Error(codes.DeadlineExceeded, "context deadline exceeded"), last: unknownCA,
			wantKind: ErrCertificate, wantMsg: "op: TLS certificate rejected: context deadline exceeded (the last attempt: latest balancer error: connection error: desc = \"transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority\")",
			want: Terminal,
		},
		{
			name: "a deadline whose last attempt says nothing more",
			ctx:  expired, err: context.DeadlineExceeded, last: status.Error(codes.DeadlineExceeded, "context deadline exceeded"),
			wantMsg: "op: context deadline exceeded", want: Transient,
		},
		{
			name:     "a server that refuses a missing client certificate",
			err:      status.Error(codes.Unavailable, `connection error: desc = "error reading server preface: remote error: tls: certificate required"`),
			wantKind: ErrCertificate, want: Terminal,
		},
		{
			name: "a handshake cut short is not about certificates",
			err:  status.Error(codes.Unavailable, `connection error: desc = "transport: authentication handshake failed: EOF"`),
			want: Transient,
		},
		{
			name: "the client's causes are not read on a live context",
			ctx:  live, err: status.Error(codes.Unavailable, "etcdserver: leader changed"), last: unknownCA,
			want: Transient,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := tt.ctx
			if ctx == nil {
				ctx = live
			}
			err := wrap(ctx, "op", tt.err, tt.last)
			if tt.wantKind != nil {
				g.Expect(err).To(MatchError(tt.wantKind))
			}
			for _, k := range []error{ErrMemberNotFound, ErrLearnerNotReady, ErrLearnerPending, ErrQuorumAtRisk, ErrNoLeader, ErrPeerURLInUse, ErrAuth, ErrCertificate, ErrCompacted} {
				if !errors.Is(k, tt.wantKind) {
					g.Expect(errors.Is(err, k)).To(BeFalse(), "also %v", k)
				}
			}
			if tt.wantMsg != "" {
				g.Expect(err.Error()).To(Equal(tt.wantMsg))
			}
			g.Expect(Classify(err)).To(Equal(tt.want))
			// Wrapped once more by a caller, it keeps its class.
			g.Expect(Classify(fmt.Errorf("reconciling: %w", err))).To(Equal(tt.want))
		})
	}
	NewWithT(t).Expect(wrap(live, "op", nil, unknownCA)).To(BeNil())
}

func TestWrapKeepsEtcdErrors(t *testing.T) {
	g := NewWithT(t)
	err := wrap(context.Background(), "promoting member 1", rpctypes.ErrGRPCLearnerNotReady, nil)
	g.Expect(err).To(MatchError(rpctypes.ErrMemberLearnerNotReady), "etcd's own error is in the chain")
	g.Expect(err.Error()).To(Equal("promoting member 1: learner has not caught up with the leader: etcdserver: can only promote a learner member which is in sync with leader"))
}

func TestClassifyPackageErrors(t *testing.T) {
	tests := []struct {
		err  error
		want Class
	}{
		{err: nil, want: None},
		{err: ErrNoDeadline, want: Terminal},
		{err: ErrInvalid, want: Terminal},
		{err: ErrAuth, want: Terminal},
		{err: ErrCertificate, want: Terminal},
		{err: ErrPeerURLInUse, want: Terminal},
		{err: ErrMemberNotFound, want: NotFound},
		{err: ErrLearnerNotReady, want: Transient},
		{err: ErrLearnerPending, want: Transient},
		{err: ErrQuorumAtRisk, want: Transient},
		{err: ErrIsLeader, want: Transient},
		{err: ErrUnhealthy, want: Transient},
		{err: ErrNoLeader, want: Transient},
		{err: ErrNotStarted, want: Transient},
		{err: ErrCompacted, want: Transient},
		{err: ErrSnapshotChecksum, want: Transient},
		{err: context.Canceled, want: Transient},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.err), func(t *testing.T) {
			NewWithT(t).Expect(Classify(tt.err)).To(Equal(tt.want))
		})
	}
}

func TestClassString(t *testing.T) {
	g := NewWithT(t)
	g.Expect([]string{None.String(), NotFound.String(), Terminal.String(), Transient.String(), Class(9).String()}).
		To(Equal([]string{"None", "NotFound", "Terminal", "Transient", "Class(9)"}))
}

func TestRefused(t *testing.T) {
	g := NewWithT(t)
	for _, err := range []error{ErrLearnerNotReady, ErrQuorumAtRisk, ErrUnhealthy, ErrLearnerPending, ErrNoLeader} {
		g.Expect(Refused(fmt.Errorf("adding a learner: %w", err))).To(BeTrue(), "%v", err)
		g.Expect(Classify(err)).To(Equal(Transient), "%v", err)
	}
	for _, err := range []error{nil, ErrAuth, ErrMemberNotFound, context.DeadlineExceeded, errors.New("connection refused")} {
		g.Expect(Refused(err)).To(BeFalse(), "%v", err)
	}
}
