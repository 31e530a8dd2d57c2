package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/etcd"
)

// ReplayTarget is where a replay stops: at a revision, at the last
// revision received at or before a time, or, both zero, at the archive's
// last revision.
type ReplayTarget struct {
	Revision int64
	Time     time.Time
}

// String names the target as a person would.
func (t ReplayTarget) String() string {
	switch {
	case t.Revision > 0:
		return fmt.Sprintf("revision %d", t.Revision)
	case !t.Time.IsZero():
		return t.Time.UTC().Format(time.RFC3339)
	}
	return "the archive's last revision"
}

// stops tells whether r is past the target.
func (t ReplayTarget) stops(r ArchivedRevision) bool {
	switch {
	case t.Revision > 0:
		return r.Revision.Revision > t.Revision
	case !t.Time.IsZero():
		return r.Time.After(t.Time)
	}
	return false
}

// ReplayOptions are what a replay needs.
type ReplayOptions struct {
	// From is the archive's location: s3://bucket/prefix or file:///dir.
	From string
	S3   S3Options
	// Owner is the UID the archive must belong to; empty takes the owner
	// that the archive's manifest names, and holds every segment to it.
	Owner string
	// Local is the client URL of an etcd that runs on the restored base
	// backup, such as http://127.0.0.1:2379, and that nothing else writes
	// to. It must accept a transaction as large as the largest revision:
	// --max-txn-ops and --max-request-bytes above the cluster's.
	Local string
	// RootPassword, when set, logs in to the local etcd as root.
	RootPassword string
	Target       ReplayTarget
	// Live, when it has endpoints, is the live cluster that the replayed
	// store is compared with at the revision reached (a verification of
	// the archive): that revision must be one the live cluster still
	// holds.
	Live etcd.Config
	// Out, when set, is a file that the replayed store is saved to as a
	// snapshot (what etcdutl snapshot restore reads), written beside and
	// renamed into place.
	Out string
	// Log receives progress; the zero Logger discards it.
	Log logr.Logger
}

// Replay applies the archive's revisions after the local etcd's revision,
// each as one transaction, up to the target, so that the local store
// reaches the target with every revision keeping its number. It refuses an
// archive that is not the owner's, a target before the base, and an
// archive that lacks a revision on the way (ErrNotFound, naming it); a
// revision that the store does not reach by its own number means the base
// is not this archive's history (ErrMismatch). With Live set, it then
// compares the store with the live cluster's at the revision reached; with
// Out set, it saves the store as a snapshot.
func Replay(ctx context.Context, o ReplayOptions) (agentapi.Result, error) {
	r := agentapi.Result{Op: agentapi.OpReplay}
	if _, ok := ctx.Deadline(); !ok {
		return r, fmt.Errorf("%w: the replay has no deadline", ErrInvalid)
	}
	f, owner, names, err := openArchive(ctx, o.From, o.S3, o.Owner)
	if err != nil {
		return r, err
	}
	o.Owner = owner
	local, base, err := waitLocal(ctx, VerifyOptions{Local: o.Local, RootPassword: o.RootPassword, Clock: clock.RealClock{}, Log: o.Log})
	if err != nil {
		return r, err
	}
	defer func() { _ = local.Close() }()
	rep := &agentapi.Replayed{From: base.Revision, Reached: base.Revision}
	r.Replayed = rep
	leases, err := keepLeases(ctx, local)
	if err != nil {
		return r, err
	}
	defer leases.stop()
	if o.Target.Revision > 0 && o.Target.Revision < base.Revision {
		return r, fmt.Errorf("%w: the base backup is at revision %d, after the target %s; restore an older base", ErrInvalid, base.Revision, o.Target)
	}
	start := -1
	for i, n := range names {
		if first, _ := segmentFirst(n); first <= base.Revision+1 {
			start = i
		}
	}
	switch {
	case start < 0 && len(names) == 0 && o.Target.Revision <= base.Revision:
		// Nothing was written since the base: the base is the newest
		// state the archive knows.
		start = 0
	case start < 0:
		oldest := "holds no segment"
		if len(names) > 0 {
			first, _ := segmentFirst(names[0])
			oldest = fmt.Sprintf("starts at revision %d", first)
		}
		return r, fmt.Errorf("%w: the archive at %s %s, and the base backup is at revision %d: revisions %d on are not archived", ErrNotFound, f, oldest, base.Revision, base.Revision+1)
	}
	o.Log.Info("Replaying", "archive", f.String(), "from", base.Revision, "target", o.Target.String())

	next := base.Revision + 1
	done := false
	for _, name := range names[start:] {
		if done {
			break
		}
		data, err := withTimeout(ctx, func(ctx context.Context) ([]byte, error) { return f.get(ctx, name) })
		if err != nil {
			return r, err
		}
		h, revs, err := decodeSegment(data)
		if err != nil {
			return r, fmt.Errorf("%s/%s: %w", f, name, err)
		}
		if h.Owner != o.Owner {
			return r, fmt.Errorf("%w: the segment %s/%s was written for %s, not for %s", ErrRefused, f, name, h.Owner, o.Owner)
		}
		if h.First > next {
			return r, fmt.Errorf("%w: the archive lacks revisions %d to %d (its next segment starts at %d): it can replay up to revision %d", ErrNotFound, next, h.First-1, h.First, next-1)
		}
		rep.Segments++
		for _, rev := range revs {
			if rev.Revision.Revision < next {
				continue
			}
			if o.Target.stops(rev) {
				done = true
				break
			}
			if err := leases.ensure(ctx, rev.Revision, rep); err != nil {
				return r, err
			}
			reached, err := withTimeout(ctx, func(ctx context.Context) (int64, error) { return local.Apply(ctx, rev.Revision) })
			if err != nil {
				return r, fmt.Errorf("replaying revision %d (%d changes): %w", rev.Revision.Revision, len(rev.Changes), err)
			}
			if reached != rev.Revision.Revision {
				return r, fmt.Errorf("%w: replaying revision %d took the store to revision %d: the base backup is not this archive's history", ErrMismatch, rev.Revision.Revision, reached)
			}
			rep.Reached, rep.ReachedTime = reached, rev.Time
			rep.Revisions++
			next++
		}
	}
	if o.Target.Revision > rep.Reached {
		return r, fmt.Errorf("%w: the archive ends at revision %d, before the target %s", ErrNotFound, rep.Reached, o.Target)
	}
	if err := leases.dropEmpty(ctx); err != nil {
		return r, err
	}
	o.Log.Info("Replayed", "reached", rep.Reached, "revisions", rep.Revisions, "segments", rep.Segments, "leasedPuts", rep.LeasedPuts)
	if len(o.Live.Endpoints) > 0 {
		rep.Verification, err = compareWithLive(ctx, local, o.Local, o.Live, rep.Reached)
		if err != nil {
			return r, err
		}
		if v := rep.Verification; !v.Matches {
			return r, fmt.Errorf("%w: at revision %d the replayed store's hash is %d with %d keys and member %s's is %d with %d keys", ErrMismatch, v.Revision, v.Hash, v.Keys, v.LiveMember, v.LiveHash, v.LiveKeys)
		}
	}
	if o.Out != "" {
		sctx, cancel := context.WithTimeout(ctx, replaySaveTimeout)
		defer cancel()
		err := writeFileAtomicFrom(o.Out, func(w io.Writer) error {
			_, err := local.SnapshotFrom(sctx, o.Local, w)
			return err
		})
		if err != nil {
			return r, fmt.Errorf("saving the replayed store to %s: %w", o.Out, err)
		}
		o.Log.Info("Saved the replayed store", "file", o.Out)
	}
	return r, nil
}

// replaySaveTimeout bounds the saving of the replayed store: a snapshot of
// etcd's largest database on a local disk.
const replaySaveTimeout = 10 * time.Minute

// compareWithLive compares the local store with a healthy live member's at
// rev. A store restored from a snapshot keeps the compaction it had then,
// older than the live cluster's now; HashKV covers the history after the
// compaction, so the local store is compacted to the live one's first.
func compareWithLive(ctx context.Context, local *etcd.Client, localURL string, liveCfg etcd.Config, rev int64) (*agentapi.Verification, error) {
	live, err := withTimeout(ctx, func(ctx context.Context) (*etcd.Client, error) { return etcd.New(ctx, liveCfg) })
	if err != nil {
		return nil, err
	}
	defer func() { _ = live.Close() }()
	statuses, err := withTimeout(ctx, live.Status)
	if err != nil {
		return nil, err
	}
	member, err := ChooseMember(statuses)
	if err != nil {
		return nil, err
	}
	liveHash, err := withTimeout(ctx, func(ctx context.Context) (etcd.KVHash, error) { return live.HashKV(ctx, member.Endpoint, rev) })
	if errors.Is(err, etcd.ErrCompacted) {
		return nil, fmt.Errorf("the live cluster compacted its history past revision %d, so the replayed store cannot be compared with it; verify to a newer revision: %w", rev, err)
	}
	if err != nil {
		return nil, err
	}
	localHash, err := withTimeout(ctx, func(ctx context.Context) (etcd.KVHash, error) { return local.HashKV(ctx, localURL, rev) })
	if err != nil {
		return nil, err
	}
	if localHash.CompactRevision < liveHash.CompactRevision {
		if err := withTimeoutErr(ctx, func(ctx context.Context) error { return local.Compact(ctx, liveHash.CompactRevision) }); err != nil && !errors.Is(err, etcd.ErrCompacted) {
			return nil, fmt.Errorf("compacting the replayed store to the live cluster's compaction, revision %d: %w", liveHash.CompactRevision, err)
		}
		if localHash, err = withTimeout(ctx, func(ctx context.Context) (etcd.KVHash, error) { return local.HashKV(ctx, localURL, rev) }); err != nil {
			return nil, err
		}
	}
	keys, err := withTimeout(ctx, func(ctx context.Context) (int64, error) { return local.KeyCount(ctx, localURL, rev) })
	if err != nil {
		return nil, err
	}
	liveKeys, err := withTimeout(ctx, func(ctx context.Context) (int64, error) { return live.KeyCount(ctx, member.Endpoint, rev) })
	if err != nil {
		return nil, err
	}
	v := &agentapi.Verification{
		Revision: rev, Keys: keys, Hash: localHash.Hash, LiveHash: liveHash.Hash, LiveKeys: liveKeys, LiveMember: member.Name,
	}
	v.Matches = v.Hash == v.LiveHash && v.Keys == v.LiveKeys && localHash.CompactRevision == liveHash.CompactRevision
	return v, nil
}

// withTimeoutErr is withTimeout for a call that returns only an error.
func withTimeoutErr(ctx context.Context, call func(context.Context) error) error {
	_, err := withTimeout(ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, call(ctx) })
	return err
}

// defaultLeaseTTL is the TTL of a lease that had expired by the time the
// archive looked it up; its keys' deletes follow in the archive.
const defaultLeaseTTL = 60

// replayLeases keeps the local store's leases alive while the replay runs:
// a lease that expired in the local etcd during a replay would delete its
// keys and take the store off the archive's revisions. Each keeps the TTL
// it was granted with, so that in a store restored from the replay it
// expires as it would after a restore of a snapshot: unless its holder,
// back, keeps it alive.
type replayLeases struct {
	local  *etcd.Client
	cancel context.CancelFunc
	ctx    context.Context
	kept   map[int64]bool
}

// keepLeases keeps alive the leases the base holds.
func keepLeases(ctx context.Context, local *etcd.Client) (*replayLeases, error) {
	kctx, cancel := context.WithCancel(ctx)
	l := &replayLeases{local: local, ctx: kctx, cancel: cancel, kept: map[int64]bool{}}
	ids, err := withTimeout(ctx, local.Leases)
	if err != nil {
		cancel()
		return nil, err
	}
	for _, id := range ids {
		if err := l.keep(id); err != nil {
			cancel()
			return nil, err
		}
	}
	return l, nil
}

func (l *replayLeases) keep(id int64) error {
	if err := l.local.KeepAlive(l.ctx, id); err != nil {
		return err
	}
	l.kept[id] = true
	return nil
}

// ensure grants the leases that rev's puts name, with the TTL recorded.
func (l *replayLeases) ensure(ctx context.Context, rev etcd.Revision, rep *agentapi.Replayed) error {
	for _, ch := range rev.Changes {
		if ch.Lease == 0 {
			continue
		}
		rep.LeasedPuts++
		if l.kept[ch.Lease] {
			continue
		}
		ttl := ch.LeaseTTL
		if ttl <= 0 {
			ttl = defaultLeaseTTL
		}
		if _, err := withTimeout(ctx, func(ctx context.Context) (bool, error) { return l.local.EnsureLease(ctx, ch.Lease, ttl) }); err != nil {
			return err
		}
		if err := l.keep(ch.Lease); err != nil {
			return err
		}
	}
	return nil
}

// dropEmpty revokes the kept leases that no key holds any more (their keys
// expired or were deleted in the history): that makes no revision.
func (l *replayLeases) dropEmpty(ctx context.Context) error {
	for id := range l.kept {
		if _, err := withTimeout(ctx, func(ctx context.Context) (bool, error) { return l.local.RevokeIfEmpty(ctx, id) }); err != nil {
			return err
		}
	}
	return nil
}

func (l *replayLeases) stop() { l.cancel() }
