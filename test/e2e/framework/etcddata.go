//go:build e2e

package framework

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// HashesAgree asks every member (by name; endpoint gives its client URL)
// for the hash of the key space (HashKV) at the revision the cluster is at
// now, and returns that revision and hash when all agree. A member that
// has not reached the revision yet is waited for within ctx; members
// compacted to different revisions are an error to retry; different
// hashes at one revision are a Stop error: their data differ.
func HashesAgree(ctx context.Context, cli *clientv3.Client, members []string, endpoint func(string) string) (int64, uint32, error) {
	if len(members) == 0 {
		return 0, 0, errors.New("no member pod has an IP")
	}
	resp, err := cli.Get(ctx, "any-key")
	if err != nil {
		return 0, 0, err
	}
	rev := resp.Header.Revision
	hashes := map[string]*clientv3.HashKVResponse{}
	for _, m := range members {
		h, err := cli.HashKV(ctx, endpoint(m), rev)
		// A member that lags a moment behind has not got to rev yet.
		for errors.Is(err, rpctypes.ErrFutureRev) && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			h, err = cli.HashKV(ctx, endpoint(m), rev)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("member %s at revision %d: %w", m, rev, err)
		}
		hashes[m] = h
	}
	first := hashes[members[0]]
	for _, m := range members[1:] {
		h := hashes[m]
		if h.CompactRevision != first.CompactRevision {
			return 0, 0, fmt.Errorf("members %s and %s are compacted to revisions %d and %d", members[0], m, first.CompactRevision, h.CompactRevision)
		}
		if h.Hash != first.Hash {
			return 0, 0, Stop(fmt.Errorf("at revision %d, member %s hashes the key space to %d and %s to %d: their data differ", rev, members[0], first.Hash, m, h.Hash))
		}
	}
	return rev, first.Hash, nil
}

// ReadPrefix reads every key under prefix through cli.
func ReadPrefix(ctx context.Context, cli *clientv3.Client, prefix string) (map[string]string, error) {
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	stored := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		stored[string(kv.Key)] = string(kv.Value)
	}
	return stored, nil
}
