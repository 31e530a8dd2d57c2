//go:build e2e

package etcd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// B13's cluster settings. Pass them after -args when running this package
// alone.
var (
	flagB13Samples   = flag.Int("b13.samples", 3, "B13: samples of each restore (at least 3 for a median)")
	flagB13Revisions = flag.Int64("b13.revisions", 100000, "B13: revisions written after the archive's base; the restore's target is the last")
	flagB13Timeout   = flag.Duration("b13.timeout", 15*time.Minute, "B13: the longest wait for one step")
)

// b13Source is what every B13 restore starts from: the source cluster's
// base backup and archive, in moto, and the target revision.
type b13Source struct {
	base    etcdv1alpha1.RestoreSource
	archive etcdv1alpha1.ArchiveSource
	target  int64
}

// BenchmarkB13Restore measures a restore to a point on the local cluster.
// A 1-member source cluster, archived to moto, takes -b13.revisions
// writes after its archive's base, and is deleted once the archive holds
// them (its base backup and archive stay). Each sample is a new 3-member
// cluster, from the base alone or from the base with the archive replayed
// to the last write (bootstrap.restore's archive and target), alternately:
// from its create to Restored (every member's data in place) and to
// Available. The difference of a round's two is the replay's cost; every
// member's Job replays at once on the node's two cores.
func BenchmarkB13Restore(b *testing.B) {
	if *flagB13Samples < 1 || *flagB13Revisions < 1 {
		b.Fatal("-b13.samples and -b13.revisions must be at least 1")
	}
	start := time.Now()
	r := getRig(b)
	f := &b13Figures{revisions: *flagB13Revisions, members: 3}
	measureOnce(b, "restore", func(b *testing.B) {
		r.setManagerArgs(b, r.baseArgs)
		ns := r.cluster.Namespace(b)
		defer r.deleteNamespace(b, ns)
		src := r.b13Source(b, ns)
		for round := range *flagB13Samples {
			for _, replay := range rotation([]bool{false, true}, round) {
				syscall.Sync()
				r.b13Restore(b, f, ns, src, replay, round)
			}
		}
	}, f.metrics)
	f.took = time.Since(start)
	printTable(b, "B13, restore to a point on the local cluster (test/bench/etcd)", f.write)
}

// b13Logf logs to the benchmark and, at once, to standard error.
func b13Logf(b *testing.B, format string, args ...any) {
	b.Helper()
	logNow(b, "b13", format, args...)
}

// b13Source makes the source: a cluster whose archive holds the writes,
// then deletes it.
func (r *rig) b13Source(b *testing.B, ns string) b13Source {
	b.Helper()
	dest := r.cluster.S3Destination(b, ns, "b13/")
	archiveDest := *dest
	archiveDest.Prefix = "archive/"
	ec := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "source"},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To[int32](1),
			Version:        r.cluster.Settings.EtcdVersion,
			DeletionPolicy: etcdv1alpha1.DeletionDelete,
			Backup:         &etcdv1alpha1.ClusterBackup{Destination: etcdv1alpha1.BackupDestination{S3: dest}},
			Archive:        &etcdv1alpha1.ClusterArchive{Destination: etcdv1alpha1.BackupDestination{S3: &archiveDest}},
		},
	}
	if err := r.cluster.Client.Create(b.Context(), ec); err != nil {
		b.Fatalf("creating the source cluster: %v", err)
	}
	got := r.b13Wait(b, ec, "the source's archive Archiving", func(c *etcdv1alpha1.EtcdCluster) error {
		if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionContinuousArchiving); cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("ContinuousArchiving is %+v", cond)
		}
		return nil
	})
	base := got.Status.Archive.BaseRevision
	tlsConfig := r.cluster.SecretTLS(b, ns, ec.Name+"-client-tls")
	hosts, _, err := r.cluster.EtcdHosts(b.Context(), ns, ec.Name)
	if err != nil {
		b.Fatal(err)
	}
	cli := r.cluster.EtcdClient(b, tlsConfig, hosts, framework.EtcdServiceEndpoint(ns, ec.Name))
	t0 := time.Now()
	last := b13Write(b, cli, *flagB13Revisions)
	b13Logf(b, "wrote %d revisions after the base (revision %d) in %.1f s; the last is %d", *flagB13Revisions, base, time.Since(t0).Seconds(), last)
	got = r.b13Wait(b, ec, fmt.Sprintf("revision %d archived", last), func(c *etcdv1alpha1.EtcdCluster) error {
		if a := c.Status.Archive; a == nil || a.LastRevision < last {
			return fmt.Errorf("status.archive is %+v", a)
		}
		return nil
	})
	baseBackup := &etcdv1alpha1.EtcdBackup{}
	if err := r.cluster.Client.Get(b.Context(), client.ObjectKey{Namespace: ns, Name: got.Status.Archive.BaseBackup}, baseBackup); err != nil {
		b.Fatal(err)
	}
	src := b13Source{target: last}
	baseLoc, archiveLoc := *dest, *dest
	baseLoc.Prefix, baseLoc.Key = "", strings.TrimPrefix(baseBackup.Status.Artifact.URI, "s3://"+dest.Bucket+"/")
	archiveLoc.Prefix, archiveLoc.Key = "", strings.TrimPrefix(got.Status.Archive.Location, "s3://"+dest.Bucket+"/")
	src.base = etcdv1alpha1.RestoreSource{S3: &baseLoc, Compression: baseBackup.Status.Artifact.Compression, SHA256: baseBackup.Status.Artifact.SHA256}
	src.archive = etcdv1alpha1.ArchiveSource{S3: &archiveLoc}
	if err := r.cluster.Client.Delete(b.Context(), ec); err != nil {
		b.Fatal(err)
	}
	r.b13Gone(b, ec)
	return src
}

// b13Write writes n revisions, one key each, from 16 clients at once, and
// returns the revision of the last.
func b13Write(b *testing.B, cli *clientv3.Client, n int64) int64 {
	b.Helper()
	var next, last atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	value := strings.Repeat("v", 64)
	for w := range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > n {
					return
				}
				ctx, cancel := context.WithTimeout(b.Context(), 10*time.Second)
				resp, err := cli.Put(ctx, fmt.Sprintf("b13/%02d/%08d", w, i), value)
				cancel()
				if err != nil {
					failed.Store(err)
					return
				}
				for rev := resp.Header.Revision; ; {
					seen := last.Load()
					if rev <= seen || last.CompareAndSwap(seen, rev) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("writing: %v", err)
	}
	return last.Load()
}

// b13Restore takes one sample: a new 3-member cluster from the base, with
// the archive replayed to the target or not.
func (r *rig) b13Restore(b *testing.B, f *b13Figures, ns string, src b13Source, replay bool, round int) {
	b.Helper()
	variant := "alone"
	restore := &etcdv1alpha1.BootstrapRestore{Source: src.base.DeepCopy()}
	if replay {
		variant = "replayed"
		restore.Archive = src.archive.DeepCopy()
		restore.Target = &etcdv1alpha1.RestoreTarget{Revision: src.target}
	}
	ec := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("r%d-%s", round, variant)},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To[int32](int32(f.members)),
			Version:        r.cluster.Settings.EtcdVersion,
			DeletionPolicy: etcdv1alpha1.DeletionDelete,
			Bootstrap:      &etcdv1alpha1.Bootstrap{Restore: restore},
		},
	}
	t0 := time.Now()
	if err := r.cluster.Client.Create(b.Context(), ec); err != nil {
		b.Fatalf("creating %s: %v", ec.Name, err)
	}
	var restored time.Time
	got := r.b13Wait(b, ec, ec.Name+" Available", func(c *etcdv1alpha1.EtcdCluster) error {
		if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionRestored); cond != nil {
			if cond.Reason == etcdv1alpha1.ReasonRestoreFailed {
				return fmt.Errorf("%w: %s", errB13Failed, cond.Message)
			}
			if cond.Status == metav1.ConditionTrue && restored.IsZero() {
				restored = time.Now()
			}
		}
		if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAvailable); cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Available is %+v", cond)
		}
		return nil
	})
	available := time.Since(t0).Seconds()
	if restored.IsZero() {
		restored = time.Now()
	}
	reached := got.Status.RestoredFrom.Revision
	if a := got.Status.RestoredFrom.Archive; a != nil {
		reached = a.Revision
	}
	if replay && reached != src.target {
		b.Fatalf("%s holds revision %d, not the target %d", ec.Name, reached, src.target)
	}
	b13Logf(b, "%s: restored %.1f s after its create, Available after %.1f s, at revision %d", ec.Name, restored.Sub(t0).Seconds(), available, reached)
	if replay {
		f.replayed, f.restored = append(f.replayed, available), append(f.restored, restored.Sub(t0).Seconds())
	} else {
		f.alone = append(f.alone, available)
	}
	if err := r.cluster.Client.Delete(b.Context(), ec); err != nil {
		b.Fatal(err)
	}
	r.b13Gone(b, ec)
}

// b13Wait polls ec four times a second until ok says nothing is missing,
// and returns it as it was then.
func (r *rig) b13Wait(b *testing.B, ec *etcdv1alpha1.EtcdCluster, what string, ok func(*etcdv1alpha1.EtcdCluster) error) *etcdv1alpha1.EtcdCluster {
	b.Helper()
	deadline := time.Now().Add(*flagB13Timeout)
	var last error
	for time.Now().Before(deadline) {
		got := &etcdv1alpha1.EtcdCluster{}
		err := r.cluster.Client.Get(b.Context(), client.ObjectKeyFromObject(ec), got)
		if err == nil {
			if err = ok(got); err == nil {
				return got
			}
			if errors.Is(err, errB13Failed) {
				b.Fatalf("waiting for %s: %v", what, err)
			}
		}
		last = err
		time.Sleep(250 * time.Millisecond)
	}
	b.Fatalf("waiting for %s: %v after %s", what, last, *flagB13Timeout)
	return nil
}

// errB13Failed ends a wait at once: the awaited state cannot come.
var errB13Failed = errors.New("failed")

// b13Gone waits until ec is deleted.
func (r *rig) b13Gone(b *testing.B, ec *etcdv1alpha1.EtcdCluster) {
	b.Helper()
	r.cluster.WaitFor(b, *flagB13Timeout, ec.Name+" deleted", func(ctx context.Context) (bool, error) {
		err := r.cluster.Client.Get(ctx, client.ObjectKeyFromObject(ec), &etcdv1alpha1.EtcdCluster{})
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			return false, err
		}
		return false, errors.New("still there")
	})
}
