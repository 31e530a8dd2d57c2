package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Change is one key's change in a revision: a put of Value, or a delete.
type Change struct {
	Key   []byte
	Value []byte
	// Delete is true for a delete; Value is then empty.
	Delete bool
	// Lease is the ID of the lease a put attached the key to, 0 for none,
	// and LeaseTTL the TTL the lease was granted with (0 when it had
	// expired before it was looked up). A lease's expiry or revocation is
	// in the history as its keys' deletes.
	Lease    int64
	LeaseTTL int64
}

// Revision is every change that one revision made: what one transaction
// (a put, a delete, a txn, a lease's expiry) did to the store.
type Revision struct {
	Revision int64
	Changes  []Change
}

// Changes is a watch of every change to the store from one revision on,
// grouped by revision.
type Changes struct {
	// C delivers the revisions in order, every one of them, and is closed
	// when the watch ends; Err then says why.
	C   <-chan ChangeBatch
	err error
}

// ChangeBatch is what one answer of the watch carried: whole revisions,
// or none when it only says how far the watch has come.
type ChangeBatch struct {
	Revisions []Revision
	// Through is how far the watch has come: every revision up to it has
	// been delivered. It is the last revision of Revisions, or, in an
	// answer to Progress, the store's revision then (an answer that
	// catches up on history carries the store's revision in its header
	// too, but not every revision before it).
	Through int64
}

// Err says why C was closed: ErrCompacted when the revision to start from
// is older than the store's compaction (the history is gone), the
// context's error when the caller stopped it, or etcd's.
func (w *Changes) Err() error { return w.err }

// Watch delivers every change to the store from revision from on. A
// revision's changes always arrive together. It needs a context that the
// caller cancels (a watch has no deadline of its own, so this is the one
// call of the package that takes none); the watch asks for a member that
// has a leader, so a member cut off from its cluster ends the stream and
// the etcd client moves to another. Call Progress to have the stream say
// how far it has come when nothing changes.
func (c *Client) Watch(ctx context.Context, from int64) (*Changes, error) {
	if ctx.Done() == nil {
		return nil, fmt.Errorf("watching from revision %d: %w", from, ErrNoDeadline)
	}
	if from <= 0 {
		return nil, fmt.Errorf("%w: watching from revision %d: the revision must be positive", ErrInvalid, from)
	}
	out := make(chan ChangeBatch)
	w := &Changes{C: out}
	ctx = clientv3.WithRequireLeader(ctx)
	wc := c.cli.Watch(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithProgressNotify())
	go func() {
		defer close(out)
		next := from
		for resp := range wc {
			if resp.CompactRevision != 0 {
				w.err = fmt.Errorf("watching from revision %d: the store was compacted at revision %d: %w", next, resp.CompactRevision, ErrCompacted)
				return
			}
			if err := resp.Err(); err != nil {
				w.err = wrap(ctx, "watching from revision "+strconv.FormatInt(next, 10), err, nil)
				return
			}
			b := ChangeBatch{Revisions: group(resp.Events)}
			switch n := len(b.Revisions); {
			case n > 0:
				b.Through = b.Revisions[n-1].Revision
				next = b.Through + 1
			case resp.IsProgressNotify():
				b.Through = resp.Header.Revision
			default:
				continue
			}
			select {
			case out <- b:
			case <-ctx.Done():
				w.err = ctx.Err()
				return
			}
		}
		w.err = ctx.Err()
		if w.err == nil {
			w.err = errors.New("the watch ended")
		}
	}()
	return w, nil
}

// Progress asks every watch of the client to say how far it has come: each
// delivers a ChangeBatch without revisions whose Through is the store's
// revision, once all before it were delivered.
func (c *Client) Progress(ctx context.Context) error {
	return c.do(ctx, "asking the watch for its progress", func(ctx context.Context) error {
		return c.cli.RequestProgress(ctx)
	})
}

// group turns a watch answer's events into revisions. etcd never splits
// one revision's events between answers (unless fragmenting is asked for,
// which Watch does not).
func group(events []*clientv3.Event) []Revision {
	var out []Revision
	for _, ev := range events {
		rev := ev.Kv.ModRevision
		if n := len(out); n == 0 || out[n-1].Revision != rev {
			out = append(out, Revision{Revision: rev})
		}
		ch := Change{Key: ev.Kv.Key}
		if ev.Type == mvccpb.DELETE {
			ch.Delete = true
		} else {
			ch.Value, ch.Lease = ev.Kv.Value, ev.Kv.Lease
		}
		last := &out[len(out)-1]
		last.Changes = append(last.Changes, ch)
	}
	return out
}

// Apply makes rev's changes in one transaction and returns the revision
// the store reached. On a store at rev.Revision-1 that holds what the
// original store held then, the store reaches rev.Revision with the same
// keys, values, versions, revisions and lease IDs as the original: the
// leases its puts name must exist (EnsureLease). A transaction over more
// keys than the server's --max-txn-ops, or larger than its
// --max-request-bytes, is refused.
func (c *Client) Apply(ctx context.Context, rev Revision) (int64, error) {
	ops := make([]clientv3.Op, 0, len(rev.Changes))
	for _, ch := range rev.Changes {
		switch {
		case ch.Delete:
			ops = append(ops, clientv3.OpDelete(string(ch.Key)))
		case ch.Lease != 0:
			ops = append(ops, clientv3.OpPut(string(ch.Key), string(ch.Value), clientv3.WithLease(clientv3.LeaseID(ch.Lease))))
		default:
			ops = append(ops, clientv3.OpPut(string(ch.Key), string(ch.Value)))
		}
	}
	var reached int64
	err := c.do(ctx, "applying revision "+strconv.FormatInt(rev.Revision, 10), func(ctx context.Context) error {
		resp, err := c.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return err
		}
		reached = resp.Header.Revision
		return nil
	})
	return reached, err
}

// CurrentRevision returns the store's revision, from a linearizable read.
func (c *Client) CurrentRevision(ctx context.Context) (int64, error) {
	var rev int64
	err := c.do(ctx, "reading the store's revision", func(ctx context.Context) error {
		resp, err := c.cli.Get(ctx, "\x00", clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		rev = resp.Header.Revision
		return nil
	})
	return rev, err
}

// LeaseTTL returns the TTL that the lease id was granted with, or 0 when
// the lease is gone (expired or revoked).
func (c *Client) LeaseTTL(ctx context.Context, id int64) (int64, error) {
	var ttl int64
	err := c.do(ctx, "reading the TTL of lease "+strconv.FormatInt(id, 16), func(ctx context.Context) error {
		resp, err := c.cli.TimeToLive(ctx, clientv3.LeaseID(id))
		if err != nil {
			return err
		}
		if resp.TTL > 0 {
			ttl = resp.GrantedTTL
		}
		return nil
	})
	return ttl, err
}

// Leases lists the IDs of the store's leases.
func (c *Client) Leases(ctx context.Context) ([]int64, error) {
	var ids []int64
	err := c.do(ctx, "listing the leases", func(ctx context.Context) error {
		resp, err := c.cli.Leases(ctx)
		if err != nil {
			return err
		}
		for _, l := range resp.Leases {
			ids = append(ids, int64(l.ID))
		}
		return nil
	})
	return ids, err
}

// EnsureLease grants the lease id with ttl seconds unless the store has
// it, and reports whether it granted it. A grant makes no revision.
func (c *Client) EnsureLease(ctx context.Context, id, ttl int64) (bool, error) {
	granted := true
	err := c.do(ctx, "granting lease "+strconv.FormatInt(id, 16), func(ctx context.Context) error {
		// clientv3's Grant takes no ID; the RPC does.
		_, err := pb.NewLeaseClient(c.cli.ActiveConnection()).LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: id, TTL: ttl})
		if errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseExist) {
			granted = false
			return nil
		}
		return err
	})
	return granted, err
}

// KeepAlive keeps the lease id alive until ctx ends, or until the lease is
// gone. It makes no revision.
func (c *Client) KeepAlive(ctx context.Context, id int64) error {
	ch, err := c.cli.KeepAlive(ctx, clientv3.LeaseID(id))
	if err != nil {
		return fmt.Errorf("keeping lease %x alive: %w", id, err)
	}
	go func() {
		for range ch { //nolint:revive // the answers only need draining
		}
	}()
	return nil
}

// RevokeIfEmpty revokes the lease id when no key is attached to it, which
// makes no revision, and reports whether it did.
func (c *Client) RevokeIfEmpty(ctx context.Context, id int64) (bool, error) {
	revoked := false
	err := c.do(ctx, "revoking lease "+strconv.FormatInt(id, 16), func(ctx context.Context) error {
		resp, err := c.cli.TimeToLive(ctx, clientv3.LeaseID(id), clientv3.WithAttachedKeys())
		if err != nil || resp.TTL <= 0 || len(resp.Keys) > 0 {
			return err
		}
		if _, err := c.cli.Revoke(ctx, clientv3.LeaseID(id)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return err
		}
		revoked = true
		return nil
	})
	return revoked, err
}
