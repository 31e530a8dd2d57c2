package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/etcd"
)

// VerifyOptions are what a verification needs.
type VerifyOptions struct {
	// Local is the client URL of the etcd that runs on the restored
	// snapshot, such as http://127.0.0.1:2379.
	Local string
	// RootPassword, when set, logs in to the local etcd as root: the
	// restored store keeps the cluster's users and its auth.
	RootPassword string
	// Live reaches the live cluster (LoadConnection).
	Live etcd.Config
	// Backup is the backup step's Result: its Snapshot names the member
	// the snapshot came from and the revision it had then.
	Backup agentapi.Result
	// Since is when the verification began, for DurationSeconds: the end
	// of the backup, before the fetch and the restore. Zero: now.
	Since time.Time
	// Clock tells the time; nil is the real clock.
	Clock clock.Clock
	// Log receives progress; the zero Logger discards it.
	Log logr.Logger
}

// pollInterval is how often Verify asks whether the local etcd is up.
const pollInterval = 500 * time.Millisecond

// Verify compares the store that the backup restored into the local etcd
// with the live cluster. It waits, until the context's deadline, for the
// local etcd to answer; reads its HashKV at its latest revision R (the
// snapshot's, as no one writes to it) and its key count at R; then asks the
// live member the backup came from (another healthy one, if that one is
// gone) for its HashKV at R and its key count at R. The Result's
// Verification holds both; when they differ, Verify returns it with an
// ErrMismatch error. The live cluster's history at R must still be there:
// when it was compacted since the backup, the hashes do not compare and
// Verify fails with a retryable error, as it does when a member or the
// local etcd does not answer.
func Verify(ctx context.Context, o VerifyOptions) (agentapi.Result, error) {
	r := agentapi.Result{Op: agentapi.OpVerify}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Since.IsZero() {
		o.Since = o.Clock.Now()
	}
	snap := o.Backup.Snapshot
	if o.Backup.Op != agentapi.OpBackup || o.Backup.Error != "" || snap == nil || snap.Member == "" {
		return r, fmt.Errorf("%w: the backup result is not that of a backup that succeeded, with its snapshot's member", ErrInvalid)
	}
	if _, ok := ctx.Deadline(); !ok {
		return r, fmt.Errorf("%w: the verification has no deadline", ErrInvalid)
	}

	local, localHash, err := waitLocal(ctx, o)
	if err != nil {
		return r, err
	}
	defer func() { _ = local.Close() }()
	rev := localHash.Revision
	keys, err := withTimeout(ctx, func(ctx context.Context) (int64, error) { return local.KeyCount(ctx, o.Local, rev) })
	if err != nil {
		return r, fmt.Errorf("the restored etcd: %w", err)
	}
	o.Log.Info("Read the restored store", "revision", rev, "keys", keys, "hash", localHash.Hash, "compactRevision", localHash.CompactRevision)

	live, err := etcd.New(ctx, o.Live)
	if err != nil {
		return r, err
	}
	defer func() { _ = live.Close() }()
	statuses, err := withTimeout(ctx, live.Status)
	if err != nil {
		return r, err
	}
	member, ok := memberNamed(statuses, snap.Member)
	if !ok {
		if member, err = ChooseMember(statuses); err != nil {
			return r, err
		}
		o.Log.Info("The backup's member is gone or unhealthy; asking another", "backupMember", snap.Member, "member", member.Name)
	}
	liveHash, err := withTimeout(ctx, func(ctx context.Context) (etcd.KVHash, error) { return live.HashKV(ctx, member.Endpoint, rev) })
	if errors.Is(err, etcd.ErrCompacted) {
		return r, fmt.Errorf("the live cluster compacted its history past the snapshot's revision %d since the backup, so the stores cannot be compared: %w", rev, err)
	}
	if err != nil {
		return r, err
	}
	if liveHash.CompactRevision != localHash.CompactRevision {
		return r, fmt.Errorf("the live cluster was compacted at revision %d since the backup and the restored store at %d: their hashes do not compare; a newer backup will", liveHash.CompactRevision, localHash.CompactRevision)
	}
	liveKeys, err := withTimeout(ctx, func(ctx context.Context) (int64, error) { return live.KeyCount(ctx, member.Endpoint, rev) })
	if err != nil {
		return r, err
	}

	v := &agentapi.Verification{
		Revision: rev, Keys: keys, Hash: localHash.Hash,
		LiveHash: liveHash.Hash, LiveKeys: liveKeys, LiveMember: member.Name,
	}
	v.Matches = v.Hash == v.LiveHash && v.Keys == v.LiveKeys && rev >= snap.Revision
	v.DurationSeconds = int64(o.Clock.Since(o.Since).Round(time.Second).Seconds())
	r.Verification = v
	o.Log.Info("Compared with the live cluster", "member", member.Name, "liveHash", liveHash.Hash, "liveKeys", liveKeys, "matches", v.Matches)
	if !v.Matches {
		return r, mismatch(v, snap)
	}
	return r, nil
}

func mismatch(v *agentapi.Verification, snap *agentapi.Snapshot) error {
	switch {
	case v.Revision < snap.Revision:
		return fmt.Errorf("%w: the restored store is at revision %d, older than member %s was (%d) when the snapshot began: the artifact is not this backup's snapshot", ErrMismatch, v.Revision, snap.Member, snap.Revision)
	case v.Hash != v.LiveHash:
		return fmt.Errorf("%w: at revision %d the restored store's hash is %d and member %s's is %d (keys: %d restored, %d live)", ErrMismatch, v.Revision, v.Hash, v.LiveMember, v.LiveHash, v.Keys, v.LiveKeys)
	}
	return fmt.Errorf("%w: at revision %d the restored store holds %d keys and member %s %d", ErrMismatch, v.Revision, v.Keys, v.LiveMember, v.LiveKeys)
}

// waitLocal connects to the local etcd and reads its hash at its latest
// revision, trying again until the context's deadline while it does not
// answer. Refused credentials end the wait at once: they will not change.
func waitLocal(ctx context.Context, o VerifyOptions) (*etcd.Client, etcd.KVHash, error) {
	cfg := etcd.Config{Endpoints: []string{o.Local}}
	if o.RootPassword != "" {
		cfg.Username, cfg.Password = etcd.RootUser, o.RootPassword
	}
	attempt := func() (*etcd.Client, etcd.KVHash, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c, err := etcd.New(ctx, cfg)
		if err != nil {
			return nil, etcd.KVHash{}, err
		}
		h, err := c.HashKV(ctx, o.Local, 0)
		if err != nil {
			_ = c.Close()
			return nil, etcd.KVHash{}, err
		}
		return c, h, nil
	}
	for {
		c, h, err := attempt()
		switch {
		case err == nil:
			return c, h, nil
		case errors.Is(err, etcd.ErrAuth) && o.RootPassword == "":
			return nil, etcd.KVHash{}, fmt.Errorf("the restored etcd has auth on: set ETCD_ROOT_PASSWORD to the cluster's root password: %w", err)
		case etcd.Classify(err) == etcd.Terminal:
			return nil, etcd.KVHash{}, fmt.Errorf("the restored etcd: %w", err)
		}
		o.Log.V(1).Info("Waiting for the restored etcd", "endpoint", o.Local, "error", err.Error())
		select {
		case <-ctx.Done():
			return nil, etcd.KVHash{}, fmt.Errorf("waiting for the restored etcd at %s: %w (the last attempt: %w)", o.Local, ctx.Err(), err)
		case <-o.Clock.After(pollInterval):
		}
	}
}

// withTimeout runs one short call within callTimeout.
func withTimeout[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return call(ctx)
}
