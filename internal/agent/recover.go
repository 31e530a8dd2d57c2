package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"k8s.io/utils/clock"

	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/etcd"
)

// RecoverOptions are what the wait for a recovered member needs.
type RecoverOptions struct {
	// Endpoint is the client URL of the etcd that runs with
	// --force-new-cluster on the survivor's data, on the pod's loopback in
	// plain HTTP, such as http://127.0.0.1:2379. It is asked directly, never
	// at the client URL that the member advertises.
	Endpoint string
	// Member is the survivor's name, its etcd's --name.
	Member string
	// RootPassword, when set, logs in as root. With auth on, etcd v3.5 and
	// v3.6 answer neither the status nor the member list to a client
	// without a user.
	RootPassword string
	// Interval is the pause between two attempts; zero: recoverInterval.
	Interval time.Duration
	// Clock tells the time; nil is the real clock.
	Clock clock.Clock
	// Log receives progress; the zero Logger discards it.
	Log logr.Logger
}

const (
	// recoverInterval is the pause between two attempts of a recovery's
	// wait.
	recoverInterval = 500 * time.Millisecond
	// recoverCallTimeout bounds one attempt: a local etcd answers at once
	// once it serves, and serves nothing before it has replayed its log.
	recoverCallTimeout = 5 * time.Second
)

// Recover waits until the etcd at o.Endpoint, which runs with
// --force-new-cluster on the data of the surviving member o.Member, is a
// cluster of one, and reports what it kept. It asks, every Interval until
// the context's deadline, for the member's status and its serializable
// member list, and is done when:
//  1. the member answers its status and leads: Leader is its own ID;
//  2. the member list holds one member, the one that answered, named
//     o.Member, a voter;
//  3. it has applied its log at least to the raft index that its first
//     answer reported: what it had before it started is in its store.
//
// The Result's Recovered holds its ID and the cluster's, its revision and
// its raft index and term. A wait that does not end by the deadline fails
// with a retryable error that says what the last attempt found, such as
// "member list still has 3 members". Bad options, and an etcd that refuses
// the calls for want of credentials, are terminal.
func Recover(ctx context.Context, o RecoverOptions) (agentapi.Result, error) {
	r := agentapi.Result{Op: agentapi.OpRecover}
	if err := checkRecoverOptions(o); err != nil {
		return r, err
	}
	if _, ok := ctx.Deadline(); !ok {
		return r, fmt.Errorf("%w: the recovery has no deadline", ErrInvalid)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Interval <= 0 {
		o.Interval = recoverInterval
	}
	w := &recoveryWait{o: o}
	defer w.close()

	for attempt := 1; ; attempt++ {
		rec, err := w.attempt(ctx)
		switch {
		case err == nil:
			r.Recovered = rec
			o.Log.Info("The member is a cluster of one", "member", o.Member, "memberID", rec.MemberID,
				"clusterID", rec.ClusterID, "revision", rec.Revision, "raftIndex", rec.RaftIndex, "raftTerm", rec.RaftTerm)
			return r, nil
		case Terminal(err):
			return r, err
		}
		o.Log.Info("The member has not recovered yet", "attempt", attempt, "reason", err.Error())
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("member %s did not recover in %d attempts (%w); the last: %w", o.Member, attempt, ctx.Err(), err)
		case <-o.Clock.After(o.Interval):
		}
	}
}

// checkRecoverOptions refuses options that cannot work. Its errors wrap
// ErrInvalid.
func checkRecoverOptions(o RecoverOptions) error {
	if o.Member == "" {
		return fmt.Errorf("%w: the member's name is empty", ErrInvalid)
	}
	u, err := url.Parse(o.Endpoint)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("%w: endpoint %q is not http://host:port, the plain-HTTP client URL of the etcd beside the agent", ErrInvalid, o.Endpoint)
	}
	return nil
}

// recoveryWait is the client and the memory of one wait.
type recoveryWait struct {
	o   RecoverOptions
	cli *clientv3.Client
	// last keeps the error of each call's last gRPC attempt, for a call
	// that runs out of time: the client retries until then.
	last lastError
	// target is the raft index of the member's first answer; zero until
	// then.
	target uint64
}

func (w *recoveryWait) close() {
	if w.cli != nil {
		_ = w.cli.Close()
	}
}

// attempt asks the member once. It returns what the member kept when it
// is a cluster of one, and otherwise why not.
func (w *recoveryWait) attempt(ctx context.Context) (*agentapi.Recovered, error) {
	ctx, cancel := context.WithTimeout(ctx, recoverCallTimeout)
	defer cancel()
	w.last.set(nil)
	if w.cli == nil {
		deadline, _ := ctx.Deadline()
		cfg := clientv3.Config{
			Endpoints: []string{w.o.Endpoint},
			// It bounds the log-in, which runs on a context of the client's.
			DialTimeout: max(time.Until(deadline), time.Millisecond),
			DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(w.last.record)},
			Logger:      zap.NewNop(),
		}
		if w.o.RootPassword != "" {
			cfg.Username, cfg.Password = etcd.RootUser, w.o.RootPassword
		}
		// With credentials, New logs in, and fails while etcd does not
		// answer.
		cli, err := clientv3.New(cfg)
		if err != nil {
			return nil, w.callError(ctx, "the login at", err)
		}
		w.cli = cli
	}
	conn := w.cli.ActiveConnection()
	st, err := pb.NewMaintenanceClient(conn).Status(ctx, &pb.StatusRequest{}, failFast)
	if err != nil {
		return nil, w.callError(ctx, "the status request at", err)
	}
	if w.target == 0 {
		w.target = st.RaftIndex
		w.o.Log.Info("The member answered", "memberID", etcd.MemberID(st.Header.GetMemberId()).String(),
			"raftIndex", st.RaftIndex, "raftAppliedIndex", st.RaftAppliedIndex, "revision", st.Header.GetRevision())
	}
	list, err := pb.NewClusterClient(conn).MemberList(ctx, &pb.MemberListRequest{Linearizable: false}, failFast)
	if err != nil {
		return nil, w.callError(ctx, "the member list request at", err)
	}
	if problems := recoveryProblems(st, list.Members, w.o.Member, w.target); len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return &agentapi.Recovered{
		MemberID:  etcd.MemberID(st.Header.GetMemberId()).String(),
		ClusterID: strconv.FormatUint(st.Header.GetClusterId(), 16),
		Revision:  st.Header.GetRevision(),
		RaftIndex: st.RaftIndex,
		RaftTerm:  st.RaftTerm,
	}, nil
}

// failFast makes a call fail at once, with the connection's error, while
// etcd does not accept connections; gRPC would wait for it otherwise.
var failFast = grpc.WaitForReady(false)

// callError says which call failed. An etcd with auth on that was asked
// without credentials gets a hint: that is terminal, and the Job lacks
// the root password.
func (w *recoveryWait) callError(ctx context.Context, what string, err error) error {
	err = clientv3.ContextError(ctx, err)
	if isAuthRefusal(err) {
		if w.o.RootPassword == "" {
			return fmt.Errorf("%s %s: etcd has auth on and answers its status and member list only to a user: set %s to the root password: %w",
				what, w.o.Endpoint, "ETCD_ROOT_PASSWORD", err)
		}
		return fmt.Errorf("%s %s: %w", what, w.o.Endpoint, err)
	}
	// Any other error is worth another attempt until the deadline, also
	// one that etcd.Classify calls terminal: it is not wrapped.
	msg := err.Error()
	if last := w.last.get(); last != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		if cause := clientv3.ContextError(ctx, last).Error(); cause != msg {
			msg += " (the last attempt: " + cause + ")"
		}
	}
	return fmt.Errorf("no answer to %s %s: %s", what, w.o.Endpoint, msg)
}

// isAuthRefusal tells whether etcd refused a call for its credentials.
func isAuthRefusal(err error) bool {
	for _, e := range []error{rpctypes.ErrUserEmpty, rpctypes.ErrAuthFailed, rpctypes.ErrPermissionDenied, rpctypes.ErrUserNotFound} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// recoveryProblems says what keeps the member that answered st, and
// listed members, from being a recovered cluster of one named name whose
// log is applied up to target. It is empty when nothing does.
func recoveryProblems(st *pb.StatusResponse, members []*pb.Member, name string, target uint64) []string {
	var problems []string
	self := st.Header.GetMemberId()
	if len(members) != 1 {
		sorted := slices.SortedFunc(slices.Values(members), func(a, b *pb.Member) int { return cmp.Compare(a.ID, b.ID) })
		list := make([]string, len(sorted))
		for i, m := range sorted {
			list[i] = memberString(m)
		}
		problems = append(problems, fmt.Sprintf("member list still has %d members: %s", len(members), strings.Join(list, ", ")))
	} else {
		m := members[0]
		switch {
		case m.ID != self:
			problems = append(problems, fmt.Sprintf("the only member is %s, not the one that answered (%s)", memberString(m), etcd.MemberID(self)))
		case m.Name != name:
			problems = append(problems, fmt.Sprintf("the only member is %s, not named %s", memberString(m), name))
		case m.IsLearner:
			problems = append(problems, fmt.Sprintf("the only member, %s, is a learner", memberString(m)))
		}
	}
	switch {
	case st.Leader == 0:
		problems = append(problems, "it has no leader")
	case st.Leader != self:
		problems = append(problems, fmt.Sprintf("it follows %s, not itself", etcd.MemberID(st.Leader)))
	}
	if st.RaftAppliedIndex < target {
		problems = append(problems, fmt.Sprintf("it has applied its log to index %d, not yet to %d", st.RaftAppliedIndex, target))
	}
	return problems
}

// memberString names a member for messages, as etcd.Member does.
func memberString(m *pb.Member) string {
	id := etcd.MemberID(m.ID).String()
	if m.Name == "" {
		return id + " (not started)"
	}
	return m.Name + " (" + id + ")"
}

// lastError keeps the error of the latest gRPC attempt of a client.
type lastError struct {
	mu  sync.Mutex
	err error
}

// record is a unary interceptor: it runs inside the etcd client's retries,
// once per attempt.
func (l *lastError) record(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err != nil {
		l.set(err)
	}
	return err
}

func (l *lastError) set(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
}

func (l *lastError) get() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
