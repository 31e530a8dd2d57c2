//go:build e2e

package framework

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agent"
	"github.com/tend-dev/tend/internal/testing/etcdserver"
)

// ReplayedArchive is what a replay of a cluster's archive reached, and
// the keys under the prefix it was asked for.
type ReplayedArchive struct {
	Revision int64
	Keys     map[string]ReplayedKey
}

// ReplayedKey is a key's value and its last change.
type ReplayedKey struct {
	Value string
	Mod   int64
}

// ReplayArchive fetches the base backup of c's archive from moto (dest is
// spec.backup's S3 location, with the credentials of the tests' process),
// restores it into an etcd on this host, replays the archive onto it to
// its end and reads back the keys under prefix. The replay refuses a
// revision missing on the way: a gap fails the test.
func (c *Cluster) ReplayArchive(t *testing.T, ec *etcdv1alpha1.EtcdCluster, dest *etcdv1alpha1.S3Location, prefix string) ReplayedArchive {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	b := &etcdv1alpha1.EtcdBackup{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: ec.Status.Archive.BaseBackup}, b); err != nil {
		t.Fatal(err)
	}
	s3o := agent.S3Options{Endpoint: dest.Endpoint, Region: dest.Region, ForcePathStyle: true}
	dir := t.TempDir()
	snapshot := filepath.Join(dir, "base.db")
	if _, err := agent.Fetch(ctx, agent.FetchOptions{
		From: b.Status.Artifact.URI, S3: s3o, Compression: agent.Compression(b.Status.Artifact.Compression), SHA256: b.Status.Artifact.SHA256, Out: snapshot,
	}); err != nil {
		t.Fatalf("fetching the base backup: %v", err)
	}
	bin, err := etcdserver.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	clientURL := etcdserver.StartRestored(t, bin, snapshot, filepath.Join(dir, "data"), "replay", "--max-txn-ops=100000")
	r, err := agent.Replay(ctx, agent.ReplayOptions{
		From: ec.Status.Archive.Location, S3: s3o, Owner: string(ec.UID), Local: clientURL,
	})
	if err != nil {
		t.Fatalf("replaying the archive: %v", err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := ReplayedArchive{Revision: r.Replayed.Reached, Keys: map[string]ReplayedKey{}}
	for _, kv := range resp.Kvs {
		out.Keys[string(kv.Key)] = ReplayedKey{string(kv.Value), kv.ModRevision}
	}
	return out
}
