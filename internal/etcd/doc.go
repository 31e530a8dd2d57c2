// Package etcd is the member and snapshot client that the EtcdCluster
// controller and the backup agent use, over go.etcd.io/etcd/client/v3. It
// lists members and their status and health; adds a learner, promotes it,
// removes a member and moves the leadership; streams a snapshot to an
// io.Writer, from any member or from one chosen member (SnapshotFrom, which
// checks etcd's SHA-256 of the data as it passes); hashes a member's
// key-value history at a revision and counts its keys (HashKV, KeyCount), to
// compare a restored backup with the live cluster; keeps the storage
// (Compact, Defragment one member, DisarmNoSpace); turns etcd's
// authentication on, with a root user (EnableAuth); and, for the
// continuous archive, watches every change grouped by revision (Watch) and
// makes one revision's changes again as one transaction, leases included
// (Apply, EnsureLease, KeepAlive). Its errors are classified (Classify: NotFound, Terminal,
// Transient) and wrap sentinels that errors.Is finds, such as
// ErrLearnerNotReady.
//
// Its checks (Quorum, HealthyQuorum, Leader, LearnerCaughtUp, CanAddLearner,
// CanPromote, CanRemove, NextLeader) are pure functions of what Members and
// Status returned, so that the controller decides, and tests its decisions,
// without etcd.
//
// In the manager, every RPC that may change the cluster (every one but the
// reads: member changes, leadership moves, user and auth changes,
// compaction, defragmentation and the alarm's disarm) first passes the
// leader-election fence (Config.Gate, internal/fence), on every connection
// of the client, so that a manager that lost its Lease changes nothing; the
// gate is checked in one place, the client's gRPC interceptors, so that a
// new call cannot forget it.
//
// It must not wait: every call needs a deadline on its context (a Watch, a
// stream, needs a context its caller cancels), and a context without one is
// refused with ErrNoDeadline before anything is sent;
// calls about one member fail fast when it is down. The caller requeues
// rather than waits for a learner to catch up or a member to come back.
//
// It knows nothing of Kubernetes: no API types, no Secrets (the caller
// passes a tls.Config and credentials in), no controller. It never logs or
// prints a password.
package etcd
