// Package agentapi is the contract between Tend's controllers and its
// agents (the `tend` subcommands that Jobs run): the Result an agent
// writes to its termination message, how a controller reads it back, and
// the exit codes a Job's pod failure policy acts on. It imports nothing of
// the agents, so a controller that reads results does not link their S3
// and etcd code.
package agentapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// TerminationMessagePath is where every agent writes its Result, as the
// container's terminationMessagePath: the kubelet copies it into the pod's
// status, where the controller reads it. It holds at most 4096 bytes.
const TerminationMessagePath = "/dev/termination-log"

// Exit codes of the agents. A Job's podFailurePolicy fails the Job at once
// on ExitTerminal, and retries on ExitFailed.
const (
	// ExitOK: the step did what it was asked.
	ExitOK = 0
	// ExitFailed: the step failed in a way a retry may fix (a member or
	// the store did not answer, a timeout).
	ExitFailed = 1
	// ExitTerminal: a retry cannot help: bad arguments, an object that
	// another backup wrote, a checksum or hash that does not match.
	ExitTerminal = 2
)

// The steps, as Result.Op names them.
const (
	OpBackup    = "backup"
	OpFetch     = "fetch"
	OpVerify    = "verify"
	OpPrepare   = "prepare"
	OpInstall   = "install"
	OpDelete    = "delete"
	OpCheck     = "check"
	OpRecover   = "recover"
	OpJoinCheck = "join-check"
	OpReplay    = "replay"
	OpPrune     = "prune"
)

// Result is what an agent reports in its termination message: one JSON
// object. Op names the step; Error is set when it failed, with Terminal
// telling whether a retry can help. The other fields are filled by the
// steps that know them.
type Result struct {
	// Op is the step: "backup", "fetch", "verify", "prepare", "install",
	// "delete", "check", "recover", "join-check", "replay" or "prune" (the
	// Op constants).
	Op string `json:"op"`
	// Error says why the step failed; empty on success.
	Error string `json:"error,omitempty"`
	// Terminal is true when a retry cannot help.
	Terminal bool `json:"terminal,omitempty"`
	// DurationSeconds is how long the step's own work took, measured by the
	// agent (not the pod's start-up), for status and the benchmarks.
	DurationSeconds float64 `json:"durationSeconds,omitempty"`

	Artifact     *Artifact     `json:"artifact,omitempty"`
	Snapshot     *Snapshot     `json:"snapshot,omitempty"`
	Verification *Verification `json:"verification,omitempty"`
	// Restored is the revision a restore's snapshot held (before the bump).
	Restored *Restored `json:"restored,omitempty"`
	// Check is what a check of a rolled cluster saw: on failure, what its
	// last attempt saw.
	Check *CheckResult `json:"check,omitempty"`
	// Recovered is what a quorum-loss recovery kept; set on success only.
	Recovered *Recovered `json:"recovered,omitempty"`
	// JoinCheck is what a join check decided: on success, and when it
	// refused a member that lost its data.
	JoinCheck *JoinCheckResult `json:"joinCheck,omitempty"`
	// Replayed is how far a replay of the archive went, and, when it was
	// asked to, how its store compared with the live cluster's.
	Replayed *Replayed `json:"replayed,omitempty"`
	// Pruned is what a prune of the archive deleted.
	Pruned *Pruned `json:"pruned,omitempty"`
}

// Pruned is what a prune of an archive deleted: the segments whose every
// revision a kept base backup holds.
type Pruned struct {
	// Segments counts the segments deleted.
	Segments int `json:"segments"`
	// Through is the last revision of the last segment deleted; 0 when
	// none was.
	Through int64 `json:"through,omitempty"`
	// Kept counts the segments left.
	Kept int `json:"kept"`
}

// Replayed is what a replay of an archive onto a base backup did.
type Replayed struct {
	// From is the base's revision: the store's before the replay.
	From int64 `json:"from"`
	// Reached is the store's revision after it, and ReachedTime when the
	// archive received that revision (zero when nothing was replayed).
	Reached     int64     `json:"reached"`
	ReachedTime time.Time `json:"reachedTime,omitzero"`
	// Revisions and Segments count what was replayed and read.
	Revisions int64 `json:"revisions"`
	Segments  int   `json:"segments"`
	// LeasedPuts counts the puts of keys that had a lease, replayed
	// without one.
	LeasedPuts int64 `json:"leasedPuts,omitempty"`
	// Verification, when the replay was checked against the live
	// cluster, compares the two stores at Reached.
	Verification *Verification `json:"verification,omitempty"`
}

// Artifact is a file a backup wrote.
type Artifact struct {
	// URI is where the agent wrote it: s3://bucket/key or file:///path.
	URI string `json:"uri"`
	// SizeBytes is the stored size, after compression.
	SizeBytes int64 `json:"sizeBytes"`
	// SHA256 is the hex SHA-256 of the stored bytes, checked by reading
	// them back.
	SHA256 string `json:"sha256"`
	// Compression is "None", "Gzip" or "Zstd".
	Compression string `json:"compression"`
}

// Snapshot is what a backup took.
type Snapshot struct {
	// Member is the name of the member it came from.
	Member string `json:"member"`
	// Revision is the member's revision when the snapshot began.
	Revision int64 `json:"revision"`
	// EtcdVersion is the member's version, such as "3.6.16".
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// DBSizeBytes is the uncompressed size of the snapshot.
	DBSizeBytes int64 `json:"dbSizeBytes"`
}

// Verification is the result of a test restore.
type Verification struct {
	// Revision of the restored store: the snapshot's exact revision.
	Revision int64 `json:"revision"`
	// Keys in the restored store.
	Keys int64 `json:"keys"`
	// Hash is the restored store's HashKV at Revision.
	Hash uint32 `json:"hash"`
	// LiveHash and LiveKeys are the live cluster's at Revision.
	LiveHash uint32 `json:"liveHash"`
	LiveKeys int64  `json:"liveKeys"`
	// Matches is true when both hashes and both counts are equal.
	Matches bool `json:"matches"`
	// LiveMember is the live member asked: the one the backup came from,
	// or another healthy one when that one is gone or unhealthy.
	LiveMember string `json:"liveMember,omitempty"`
	// DurationSeconds of the whole verification.
	DurationSeconds int64 `json:"durationSeconds"`
}

// Restored is what a restore put in place.
type Restored struct {
	// Revision of the snapshot before --bump-revision.
	Revision int64 `json:"revision"`
}

// Recovered is the member that etcd's --force-new-cluster made a cluster
// of one, after a quorum loss, and how far its store is.
type Recovered struct {
	// MemberID is the member's ID in hexadecimal, as etcdctl prints it.
	MemberID string `json:"memberID"`
	// ClusterID is the cluster's ID in hexadecimal: the lost cluster's,
	// which --force-new-cluster keeps.
	ClusterID string `json:"clusterID"`
	// Revision of the member's store: the last change it kept.
	Revision int64 `json:"revision"`
	// RaftIndex is its committed raft index and RaftTerm its term.
	RaftIndex uint64 `json:"raftIndex"`
	RaftTerm  uint64 `json:"raftTerm"`
}

// JoinCheckResult is what a join check decided about the start of a member's
// etcd.
type JoinCheckResult struct {
	// Decision is one of the Join constants: HasData, NewCluster,
	// NotStarted, NotMember, or LostData when the step failed for it.
	Decision string `json:"decision"`
	// MemberID is the ID, in hexadecimal, of the member that has the peer
	// URL in the member list; empty when none has it or none was asked.
	MemberID string `json:"memberID,omitempty"`
	// Peer is the peer URL of the member that answered the member list.
	Peer string `json:"peer,omitempty"`
	// Unpublished are, for a new cluster, the members' names that the DNS
	// still lacked when the wait for them ended.
	Unpublished []string `json:"unpublished,omitempty"`
}

// CheckResult is what a check of a rolled cluster saw. Its fields are
// short and omitted when empty: a termination message holds 4096 bytes.
type CheckResult struct {
	// ClusterVersion is the cluster version that every member reported,
	// such as "3.6.0"; empty until they all reported the one expected.
	ClusterVersion string `json:"clusterVersion,omitempty"`
	// Revision is the revision at which the members' stores were hashed:
	// the lowest of their revisions. Zero until they were hashed.
	Revision int64 `json:"revision,omitempty"`
	// Members are the cluster's members, in the order of their IDs.
	Members []CheckedMember `json:"members,omitempty"`
}

// CheckedMember is one member, as a check saw it.
type CheckedMember struct {
	// Name is the member's name; empty when it has not started.
	Name string `json:"name,omitempty"`
	// ID is the member's ID in hexadecimal, as etcdctl prints it.
	ID string `json:"id"`
	// Version is the member's etcd version, such as "3.6.16".
	Version string `json:"version,omitempty"`
	// Revision is the member's revision when it answered its status.
	Revision int64 `json:"revision,omitempty"`
	// Hash is its HashKV at CheckResult.Revision.
	Hash uint32 `json:"hash,omitempty"`
}

// MaxMessage is the kubelet's limit on a termination message.
const MaxMessage = 4096

// Encode renders r for the termination message, shortening the error so
// that the whole, as encoded, fits in the kubelet's 4096 bytes: the error
// is cut on a character boundary and ends with "…". Its size is measured
// after JSON escaped it, where one character may take 6 bytes (\u003c for
// '<', \ufffd for a byte that is not UTF-8); a cut inside a character
// would grow, and the kubelet would cut the message where ParseResult
// cannot read it.
func (r Result) Encode() ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding the result: %w", err)
	}
	if len(b) <= MaxMessage {
		return b, nil
	}
	full := r.Error
	// The offsets where the error's characters start, and its end.
	var cuts []int
	for i := range full {
		cuts = append(cuts, i)
	}
	cuts = append(cuts, len(full))
	// encoded renders r with the first n characters of its error.
	var encErr error
	encoded := func(n int) []byte {
		r.Error = full[:cuts[n]] + "…"
		b, err := json.Marshal(r)
		if err != nil {
			encErr = fmt.Errorf("encoding the result: %w", err)
		}
		return b
	}
	if b := encoded(0); encErr == nil && len(b) > MaxMessage {
		return nil, fmt.Errorf("the result is %d bytes with no more of its error than \"…\", over the %d of a termination message", len(b), MaxMessage)
	}
	// The encoded size grows with the characters kept: keep the most that
	// fit. The whole error did not fit, so fewer than all of them do.
	n := sort.Search(len(cuts), func(n int) bool { return len(encoded(n)) > MaxMessage }) - 1
	b = encoded(n)
	if encErr != nil {
		return nil, encErr
	}
	return b, nil
}

// ErrNoResult is returned by ParseResult for a message that holds no
// result, such as that of a container killed before it wrote one.
var ErrNoResult = errors.New("no agent result in the termination message")

// ParseResult reads an agent's termination message. op, when not empty, is
// the step the container runs; a result of another step is refused.
func ParseResult(message, op string) (Result, error) {
	message = strings.TrimSpace(message)
	if message == "" {
		return Result{}, ErrNoResult
	}
	var r Result
	dec := json.NewDecoder(strings.NewReader(message))
	if err := dec.Decode(&r); err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrNoResult, err)
	}
	if dec.More() {
		return Result{}, fmt.Errorf("%w: text after the JSON object", ErrNoResult)
	}
	if op != "" && r.Op != op {
		return Result{}, fmt.Errorf("%w: the message is of step %q, not %q", ErrNoResult, r.Op, op)
	}
	return r, nil
}
