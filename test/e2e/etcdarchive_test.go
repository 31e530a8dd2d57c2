//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// TestEtcdArchive runs the continuous archive on the local cluster, to
// moto: a base backup, the agent's pod, every write stored; the pod killed
// while writes go on, and nothing lost; and the archive, replayed from
// this host onto its base, holds exactly what the cluster held at the
// revision reached.
func TestEtcdArchive(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	dest := cluster.S3Destination(t, ns, "etcd/")
	archiveDest := *dest
	archiveDest.Prefix = "archive/"
	e := &etcdTest{EtcdCluster: &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kv"},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas: ptr.To[int32](1), Version: cluster.Settings.EtcdVersion,
			Backup: &etcdv1alpha1.ClusterBackup{Destination: etcdv1alpha1.BackupDestination{S3: dest}},
			Archive: &etcdv1alpha1.ClusterArchive{
				Destination: etcdv1alpha1.BackupDestination{S3: &archiveDest},
				Segment:     etcdv1alpha1.ArchiveSegment{MaxAge: &metav1.Duration{Duration: 2 * time.Second}},
			},
		},
	}}
	mustCreate(t, e.EtcdCluster)
	e.waitReady(t, 1)
	got := waitArchiving(t, e, 5*time.Minute)
	base := got.Status.Archive.BaseRevision

	cli := cluster.EtcdClient(t, e.clientTLS(t), e.hosts(t), e.serviceEndpoint())
	write := func(prefix string, n int) int64 {
		var rev int64
		for i := range n {
			ctx, cancel := context.WithTimeout(t.Context(), etcdCallTimeout)
			resp, err := cli.Put(ctx, fmt.Sprintf("%s%03d", prefix, i), strings.Repeat("v", i))
			cancel()
			if err != nil {
				t.Fatalf("writing: %v", err)
			}
			rev = resp.Header.Revision
		}
		return rev
	}
	first := write("data/a-", 30)
	waitArchived(t, e, first)
	// Verified on demand: its base and segments replayed in a Job equal
	// the cluster at the revision reached, past the writes.
	e.annotate(t, etcdv1alpha1.AnnotationVerifyArchive, "after-a")
	cluster.WaitFor(t, 3*time.Minute, "the archive verified", func(ctx context.Context) (bool, error) {
		got, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		v := got.Status.Archive.Verification
		if v == nil || v.Request != "after-a" || v.Time == nil {
			return false, fmt.Errorf("status.archive.verification is %+v", v)
		}
		c := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionArchiveVerified)
		if v.Result != etcdv1alpha1.ReasonArchiveMatches || v.Revision < first || c == nil || c.Status != metav1.ConditionTrue {
			t.Fatalf("the verification asked for ended %+v, ArchiveVerified %+v", v, c)
		}
		return true, nil
	})

	// The agent's pod killed while writes go on: the next pod goes on
	// after the last stored segment.
	var pods corev1.PodList
	if err := cluster.Client.List(t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "etcd-archive"}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("the archive's pods: %v, %v", pods.Items, err)
	}
	write("data/b-", 10)
	if err := cluster.Client.Delete(t.Context(), &pods.Items[0], client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	last := write("data/c-", 30)
	got = waitArchived(t, e, last)
	if gaps := got.Status.Archive.Gaps; len(gaps) != 0 {
		t.Errorf("the archive reports gaps %+v after its pod was killed", gaps)
	}
	if got.Status.Archive.FirstRevision != base+1 {
		t.Errorf("the archive starts at %d, want the base's revision %d plus one", got.Status.Archive.FirstRevision, base)
	}
	segments, err := cluster.MotoS3().ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{
		Bucket: &dest.Bucket, Prefix: ptr.To(fmt.Sprintf("archive/%s/kv/archive-%s/segments/", ns, got.UID)),
	})
	if err != nil || len(segments.Contents) == 0 {
		t.Fatalf("no segments in moto (%v)", err)
	}

	// Replayed from this host onto the base: every key as the cluster had
	// it at the revision reached.
	reached := cluster.ReplayArchive(t, got, dest, "data/")
	if reached.Revision < last {
		t.Fatalf("the replay reached revision %d, before the last write %d", reached.Revision, last)
	}
	ctx, cancel := context.WithTimeout(t.Context(), etcdCallTimeout)
	defer cancel()
	want, err := cli.Get(ctx, "data/", clientv3.WithPrefix(), clientv3.WithRev(reached.Revision))
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Kvs) != 70 {
		t.Fatalf("the cluster holds %d keys under data/ at %d, want 70", len(want.Kvs), reached.Revision)
	}
	for _, kv := range want.Kvs {
		if v, ok := reached.Keys[string(kv.Key)]; !ok || v.Value != string(kv.Value) || v.Mod != kv.ModRevision {
			t.Errorf("the replayed store has %s = %+v, the cluster %q at revision %d", kv.Key, v, kv.Value, kv.ModRevision)
		}
	}
	if len(reached.Keys) != len(want.Kvs) {
		t.Errorf("the replayed store holds %d keys under data/, the cluster %d", len(reached.Keys), len(want.Kvs))
	}

	// A bad range delete, undone by a restore in place to the revision
	// just before it: every write up to it is back, none after it is, and
	// the revisions go on above every revision seen before.
	before := write("data/d-", 5)
	dctx, dcancel := context.WithTimeout(t.Context(), etcdCallTimeout)
	del, err := cli.Delete(dctx, "data/a-", clientv3.WithPrefix())
	dcancel()
	if err != nil || del.Deleted != 30 {
		t.Fatalf("the bad delete: %v, %+v", err, del)
	}
	after := write("data/e-", 3)
	waitArchived(t, e, after)
	undo := &etcdv1alpha1.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "undo"},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterRef: etcdv1alpha1.ClusterReference{Name: "kv"},
			Target: &etcdv1alpha1.RestoreTarget{Revision: before}, ConfirmOverwrite: true},
	}
	mustCreate(t, undo)
	done := waitRestore(t, undo, 6*time.Minute, "Complete", func(r *etcdv1alpha1.EtcdRestore) (bool, error) {
		if f := meta.FindStatusCondition(r.Status.Conditions, etcdv1alpha1.RestoreFailed); f != nil && f.Status == metav1.ConditionTrue {
			t.Fatalf("the restore failed: %s", f.Message)
		}
		return restoreHasCondition(r, etcdv1alpha1.RestoreComplete, metav1.ConditionTrue, etcdv1alpha1.ReasonRestoreSucceeded)
	})
	if a := done.Status.RestoredFrom.Archive; a == nil || a.Revision != before || done.Status.RestoredFrom.Revision != base {
		t.Errorf("status.restoredFrom is %+v (archive %+v), want the base at %d replayed to %d", done.Status.RestoredFrom, a, base, before)
	}
	e.waitReady(t, 1)
	rctx, rcancel := context.WithTimeout(t.Context(), etcdCallTimeout)
	defer rcancel()
	back, err := cli.Get(rctx, "data/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, kv := range back.Kvs {
		keys[string(kv.Key)] = true
	}
	if len(keys) != 75 || !keys["data/a-000"] || !keys["data/d-004"] || keys["data/e-000"] {
		t.Errorf("after the restore to %d the cluster holds %d keys under data/ (a-000 %v, d-004 %v, e-000 %v), want the 75 written up to it",
			before, len(keys), keys["data/a-000"], keys["data/d-004"], keys["data/e-000"])
	}
	if next := write("data/f-", 1); next <= after {
		t.Errorf("the first write after the restore is at revision %d, not above %d, the newest before it: watchers would see revisions go back", next, after)
	}
	// The restore changed the history: the archive goes on from a new base.
	final := write("data/g-", 10)
	got = waitArchived(t, e, final)
	if got.Status.Archive.Epoch < 1 || got.Status.Archive.BaseRevision <= after {
		t.Errorf("after the restore the archive is %+v, want a new epoch from a base above %d", got.Status.Archive, after)
	}
	lastBase := &etcdv1alpha1.EtcdBackup{}
	if err := cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: got.Status.Archive.BaseBackup}, lastBase); err != nil {
		t.Fatal(err)
	}
	location := got.Status.Archive.Location

	// Without spec.archive, the Deployment goes and the segments stay.
	e.patchSpec(t, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Archive = nil })
	cluster.WaitFor(t, 2*time.Minute, "the archive removed", func(ctx context.Context) (bool, error) {
		got, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		if got.Status.Archive != nil {
			return false, fmt.Errorf("status.archive is still %+v", got.Status.Archive)
		}
		var pods corev1.PodList
		if err := cluster.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "etcd-archive"}); err != nil {
			return false, err
		}
		if len(pods.Items) > 0 {
			return false, fmt.Errorf("the archive's pod %s is still there", pods.Items[0].Name)
		}
		return true, nil
	})

	// The cluster lost with no final snapshot; a new one started from the
	// last base and the archive, to its newest revision, holds every
	// archived write.
	e.patchSpec(t, func(s *etcdv1alpha1.EtcdClusterSpec) { s.DeletionPolicy = etcdv1alpha1.DeletionDelete })
	mustDelete(t, e.EtcdCluster)
	waitGone(t, e.EtcdCluster, 2*time.Minute)
	baseKey := strings.TrimPrefix(lastBase.Status.Artifact.URI, "s3://"+dest.Bucket+"/")
	folder := strings.TrimPrefix(location, "s3://"+dest.Bucket+"/")
	archiveSrc, baseSrc := *dest, *dest
	archiveSrc.Prefix, archiveSrc.Key = "", folder
	baseSrc.Prefix, baseSrc.Key = "", baseKey
	again := &etcdTest{EtcdCluster: &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "again"},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas: ptr.To[int32](1), Version: cluster.Settings.EtcdVersion,
			Bootstrap: &etcdv1alpha1.Bootstrap{Restore: &etcdv1alpha1.BootstrapRestore{
				Source:  &etcdv1alpha1.RestoreSource{S3: &baseSrc, Compression: lastBase.Status.Artifact.Compression, SHA256: lastBase.Status.Artifact.SHA256},
				Archive: &etcdv1alpha1.ArchiveSource{S3: &archiveSrc},
			}},
		},
	}}
	mustCreate(t, again.EtcdCluster)
	restored := again.waitReady(t, 1)
	if from := restored.Status.RestoredFrom; from == nil || from.Archive == nil || from.Archive.Revision < final || from.Archive.Target != "latest" {
		t.Errorf("the new cluster's status.restoredFrom is %+v, want the archive replayed to at least %d", from, final)
	}
	acli := cluster.EtcdClient(t, again.clientTLS(t), again.hosts(t), again.serviceEndpoint())
	actx, acancel := context.WithTimeout(t.Context(), etcdCallTimeout)
	defer acancel()
	held, err := acli.Get(actx, "data/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if held.Count != 86 {
		t.Errorf("the new cluster holds %d keys under data/, want the 86 archived", held.Count)
	}
}

// waitArchiving waits until the cluster's archive is Archiving.
func waitArchiving(t *testing.T, e *etcdTest, timeout time.Duration) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var got *etcdv1alpha1.EtcdCluster
	cluster.WaitFor(t, timeout, "the archive Archiving", func(ctx context.Context) (bool, error) {
		var err error
		if got, err = e.get(ctx); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionContinuousArchiving)
		if c == nil || c.Status != metav1.ConditionTrue {
			return false, fmt.Errorf("ContinuousArchiving is %+v", c)
		}
		return true, nil
	})
	return got
}

// waitArchived waits until status.archive shows rev stored.
func waitArchived(t *testing.T, e *etcdTest, rev int64) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var got *etcdv1alpha1.EtcdCluster
	cluster.WaitFor(t, 3*time.Minute, fmt.Sprintf("revision %d archived", rev), func(ctx context.Context) (bool, error) {
		var err error
		if got, err = e.get(ctx); err != nil {
			return false, err
		}
		// Stored in a segment, or held by the base of the archive's epoch.
		if a := got.Status.Archive; a == nil || max(a.LastRevision, a.BaseRevision) < rev {
			return false, fmt.Errorf("status.archive is %+v, want revision %d stored", a, rev)
		}
		return true, nil
	})
	return got
}
