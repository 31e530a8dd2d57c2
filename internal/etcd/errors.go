package etcd

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Errors of the calls. Each call wraps one of them, when one applies, with
// etcd's own error; errors.Is finds both.
var (
	// ErrNoDeadline is returned, without anything sent, by a call whose
	// context has no deadline: no call may hold a worker forever. It is a bug
	// in the caller; Classify calls it Terminal.
	ErrNoDeadline = errors.New("etcd call without a deadline on its context")
	// ErrInvalid marks a Config or an argument that cannot work, such as an
	// endpoint that is not an http:// or https:// URL. Terminal.
	ErrInvalid = errors.New("invalid argument")
	// ErrMemberNotFound: no member has the ID. A removal is done. NotFound.
	ErrMemberNotFound = errors.New("member not found")
	// ErrLearnerNotReady: the learner has not caught up with the leader, so
	// etcd refuses to promote it. It is not a failure: promote again later.
	// Transient.
	ErrLearnerNotReady = errors.New("learner has not caught up with the leader")
	// ErrLearnerPending: a learner is already in the cluster, and learners
	// are added one at a time. etcd refuses a second one (--max-learners
	// defaults to 1) and so does CanAddLearner. Transient.
	ErrLearnerPending = errors.New("a learner is already pending")
	// ErrQuorumAtRisk: the membership change could leave the cluster without
	// a healthy quorum, or cannot commit without one. CanRemove, CanPromote
	// and etcd's strict reconfiguration check refuse with it. Transient.
	ErrQuorumAtRisk = errors.New("quorum at risk")
	// ErrIsLeader: the member leads the cluster. CanRemove refuses to remove
	// the leader; move the leadership away first. Transient.
	ErrIsLeader = errors.New("member is the leader")
	// ErrUnhealthy: a voting member is unhealthy. CanAddLearner refuses to
	// grow a cluster that is not whole. Transient.
	ErrUnhealthy = errors.New("member unhealthy")
	// ErrNoLeader: no leader is known, as during an election or without a
	// quorum. Transient.
	ErrNoLeader = errors.New("no leader")
	// ErrNotStarted: the member was added but has not published its name
	// and client URLs, so there is no URL to ask: it has not started, or it
	// has only just. An etcd v3.6 learner's first attempt to publish them
	// times out (7 s with the default timeouts), so it takes that long after
	// its start. Transient.
	ErrNotStarted = errors.New("member has not started")
	// ErrPeerURLInUse: AddLearner was given the peer URL of a voting member.
	// Remove that member first. Terminal.
	ErrPeerURLInUse = errors.New("peer URL belongs to a voting member")
	// ErrAuth: etcd refused the credentials, or the user lacks a permission
	// that the call needs. Terminal.
	ErrAuth = errors.New("etcd refused the credentials")
	// ErrCertificate: the TLS handshake failed over a certificate: etcd's is
	// not signed by the CA that the client trusts, or names another host, or
	// etcd refused the client's (or its absence). Terminal: it stays so until
	// someone changes a certificate or the CA.
	ErrCertificate = errors.New("TLS certificate rejected")
	// ErrCompacted: the revision asked for is older than the member's
	// compaction: its history is gone. Transient: a caller that picked the
	// revision from a store that has since moved on picks a newer one.
	ErrCompacted = errors.New("revision compacted")
	// ErrSnapshotChecksum: a snapshot stream ended without the SHA-256 of
	// its data that etcd appends, or with one that does not match: it was
	// cut or damaged on the way. Transient: take another.
	ErrSnapshotChecksum = errors.New("snapshot checksum mismatch")
)

// Class says what a caller should do about an error.
type Class int

const (
	// None is the class of a nil error.
	None Class = iota
	// NotFound: the member does not exist. A removal is done.
	NotFound
	// Terminal: retrying cannot help until someone changes something: the
	// credentials, a certificate, the request, or the cluster by hand (a
	// NOSPACE or CORRUPT alarm). Report it and wait for a change.
	Terminal
	// Transient: the cluster is unavailable, slow, electing, or refused a
	// change that it may accept later (ErrLearnerNotReady, ErrQuorumAtRisk,
	// ErrLearnerPending); also anything unknown. Requeue.
	Transient
)

// String returns the class's name, such as "NotFound".
func (c Class) String() string {
	switch c {
	case None:
		return "None"
	case NotFound:
		return "NotFound"
	case Terminal:
		return "Terminal"
	case Transient:
		return "Transient"
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// terminal are etcd's answers that retrying cannot change.
var terminal = []error{
	rpctypes.ErrMemberBadURLs,
	rpctypes.ErrBadLeaderTransferee,
	rpctypes.ErrClusterIDMismatch,
	rpctypes.ErrNotCapable,
	rpctypes.ErrNoSpace,
	rpctypes.ErrCorrupt,
	rpctypes.ErrRequestTooLarge,
	rpctypes.ErrFutureRev,
}

// Classify says what to do about err, which a call of this package or a
// check returned. It looks, in order, at:
//   - the package's errors: ErrMemberNotFound is NotFound; ErrNoDeadline,
//     ErrInvalid, ErrAuth, ErrCertificate and ErrPeerURLInUse are Terminal;
//     the others are Transient;
//   - a cancelled or expired context: Transient;
//   - etcd's errors that no retry can change (bad URLs, a bad leadership
//     transferee, NOSPACE, a corrupt cluster, a compaction past the
//     current revision): Terminal;
//   - the gRPC code: Unauthenticated, PermissionDenied, InvalidArgument and
//     Unimplemented are Terminal;
//   - anything else: Transient.
//
// Unknown errors are Transient, never Terminal, so that an error this
// misses costs retries rather than a stuck cluster.
func Classify(err error) Class {
	if err == nil {
		return None
	}
	switch {
	case errors.Is(err, ErrMemberNotFound):
		return NotFound
	case errors.Is(err, ErrNoDeadline), errors.Is(err, ErrInvalid), errors.Is(err, ErrAuth),
		errors.Is(err, ErrCertificate), errors.Is(err, ErrPeerURLInUse):
		return Terminal
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return Transient
	}
	for _, t := range terminal {
		if errors.Is(err, t) {
			return Terminal
		}
	}
	// The auth store's revision moved: the client fetches a new token and
	// retries by itself; a leftover is worth another try.
	if errors.Is(err, rpctypes.ErrAuthOldRevision) || errors.Is(err, rpctypes.ErrInvalidAuthToken) {
		return Transient
	}
	var etcdErr rpctypes.EtcdError
	code := status.Code(err)
	if errors.As(err, &etcdErr) {
		code = etcdErr.Code()
	}
	switch code {
	case codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument, codes.Unimplemented:
		return Terminal
	}
	return Transient
}

// Refused tells whether err is the cluster, or one of this package's
// checks, turning a change down only for now: a learner not caught up, a
// quorum at risk, an unhealthy member, a learner pending, no leader. The
// cluster is fine and will take the change later; a caller waits and tries
// again rather than report a failure. Such errors are Transient too, as a
// network error is; Refused tells them apart.
func Refused(err error) bool {
	for _, kind := range []error{ErrLearnerNotReady, ErrQuorumAtRisk, ErrUnhealthy, ErrLearnerPending, ErrNoLeader} {
		if errors.Is(err, kind) {
			return true
		}
	}
	return false
}

// kinds maps etcd's answers to the package's errors.
var kinds = []struct {
	etcd error
	kind error
}{
	{rpctypes.ErrMemberNotFound, ErrMemberNotFound},
	{rpctypes.ErrMemberLearnerNotReady, ErrLearnerNotReady},
	{rpctypes.ErrTooManyLearners, ErrLearnerPending},
	{rpctypes.ErrUnhealthy, ErrQuorumAtRisk},
	{rpctypes.ErrMemberNotEnoughStarted, ErrQuorumAtRisk},
	{rpctypes.ErrNoLeader, ErrNoLeader},
	{rpctypes.ErrCompacted, ErrCompacted},
	{rpctypes.ErrPeerURLExist, ErrPeerURLInUse},
	{rpctypes.ErrAuthFailed, ErrAuth},
	{rpctypes.ErrPermissionDenied, ErrAuth},
	{rpctypes.ErrUserEmpty, ErrAuth},
	{rpctypes.ErrUserNotFound, ErrAuth},
	{rpctypes.ErrRoleNotGranted, ErrAuth},
	{rpctypes.ErrPermissionNotGranted, ErrAuth},
}

// legacyMessages are answers that servers send as bare text, with code
// Unknown, rather than as one of etcd's gRPC errors: v3.5 refuses a
// snapshot so to a caller that is not root (no user, a certificate's common
// name that is no user, a user without the root role), and v3.5 and v3.6
// refuse so a password for a user that was added without one.
var legacyMessages = map[string]error{
	"auth: permission denied":  ErrAuth,
	"auth: user name is empty": ErrAuth,
	"auth: user not found":     ErrAuth,
	"auth: authentication failed, password was given for no password user": ErrAuth,
}

// kindOf returns the package's error for one of etcd's, or nil.
func kindOf(err error) error {
	for _, k := range kinds {
		if errors.Is(err, k.etcd) {
			return k.kind
		}
	}
	if s, ok := status.FromError(err); ok && s.Code() == codes.Unknown {
		return legacyMessages[s.Message()]
	}
	return nil
}

// callError is what a failed call returns: which call, the package's error
// when one applies, and etcd's error; for a call that ran out of time, also
// why its last attempt failed, which is often the real story (a refused
// connection, a certificate that does not verify).
type callError struct {
	op    string
	kind  error
	err   error
	cause string
}

func (e *callError) Error() string {
	var b strings.Builder
	b.WriteString(e.op)
	b.WriteString(": ")
	if e.kind != nil {
		b.WriteString(e.kind.Error())
		b.WriteString(": ")
	}
	b.WriteString(e.err.Error())
	if e.cause != "" {
		b.WriteString(" (the last attempt: ")
		b.WriteString(e.cause)
		b.WriteString(")")
	}
	return b.String()
}

func (e *callError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.err}
	}
	return []error{e.kind, e.err}
}

// wrap turns what the client returned for op into the package's error, or
// nil. last is the error of the call's last gRPC attempt, if any.
func wrap(ctx context.Context, op string, err, last error) error {
	if err == nil {
		return nil
	}
	// etcd's answers as rpctypes errors, and gRPC's deadline as the context's.
	err = clientv3.ContextError(ctx, err)
	e := &callError{op: op, err: err, kind: kindOf(err)}
	msg := err.Error()
	if last != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		if cause := status.Convert(last).Message(); cause != msg && cause != "" {
			e.cause = cause
			msg = cause
		}
	}
	if e.kind == nil && certificateProblem(msg) {
		e.kind = ErrCertificate
	}
	return e
}

// certificateProblem tells whether a gRPC connection error is about a
// certificate. gRPC passes connection errors on as text only, so text is
// what there is to read: Go's x509 errors, and the TLS alerts by which a
// server refuses the client's certificate.
func certificateProblem(msg string) bool {
	return strings.Contains(msg, "x509: ") ||
		strings.Contains(msg, "tls: failed to verify certificate") ||
		(strings.Contains(msg, "remote error: tls: ") && strings.Contains(msg, "certificate"))
}

// attempts keeps the error of a call's last gRPC attempt. The etcd client
// retries inside a call; when the call runs out of time, it returns only
// the context's error, and the interceptors record what the attempts saw.
type attempts struct {
	mu   sync.Mutex
	last error
}

func (a *attempts) record(err error) {
	if err == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last = err
}

func (a *attempts) get() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

type attemptsKey struct{}

// attemptsOf returns the recorder that the call put in ctx, or fallback.
func attemptsOf(ctx context.Context, fallback *attempts) *attempts {
	if a, ok := ctx.Value(attemptsKey{}).(*attempts); ok {
		return a
	}
	return fallback
}
