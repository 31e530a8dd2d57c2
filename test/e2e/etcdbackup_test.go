//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// backupKeys is how many keys the source cluster holds before its backups.
const backupKeys = 500

// The day-2 data path on the real node, with data: a 3-member cluster
// holding backupKeys keys is backed up to S3 (moto) and to a volume, both
// verified by a test restore; a schedule every minute with keepLast 2 keeps
// exactly two backups and two objects; a new cluster restored from a backup
// holds every key at revisions above the source's; deleting with Snapshot
// leaves a verified final backup and no members or volumes, and Delete
// leaves nothing.
func TestEtcdBackupAndRestore(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	s3c := cluster.MotoS3()
	s3Dest := cluster.S3Destination(t, ns, "etcd/")
	bucket := s3Dest.Bucket

	src := &etcdTest{EtcdCluster: &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "src"},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas: ptr.To[int32](3), Version: cluster.Settings.EtcdVersion,
			Auth:   etcdv1alpha1.Auth{Enabled: true},
			Backup: &etcdv1alpha1.ClusterBackup{Destination: etcdv1alpha1.BackupDestination{S3: s3Dest}},
		},
	}}
	mustCreate(t, src.EtcdCluster)
	src.waitReady(t, 3)
	want := src.fill(t, backupKeys)

	// One backup to S3, gzipped, and one to a volume, zstd; both verified.
	claim := backupClaim(ns)
	mustCreate(t, claim)
	toS3 := newBackup(ns, "to-s3", "src", etcdv1alpha1.BackupDestination{S3: s3Dest}, etcdv1alpha1.CompressionGzip)
	toVolume := newBackup(ns, "to-volume", "src", etcdv1alpha1.BackupDestination{
		Volume: &etcdv1alpha1.VolumeLocation{ClaimName: claim.Name, Path: "etcd"},
	}, etcdv1alpha1.CompressionZstd)
	mustCreate(t, toS3)
	mustCreate(t, toVolume)
	for _, b := range []*etcdv1alpha1.EtcdBackup{toS3, toVolume} {
		got := cluster.WaitBackupVerified(t, b)
		cluster.WaitReady(t, time.Minute, ns, "etcdbackup/"+b.Name) // kubectl wait, as scripts do
		if got.Status.Verification.Keys < backupKeys {
			t.Errorf("EtcdBackup %s: the test restore held %d keys, want at least %d", b.Name, got.Status.Verification.Keys, backupKeys)
		}
		if got.Status.Artifact.SizeBytes <= 0 || len(got.Status.Artifact.SHA256) != 64 {
			t.Errorf("EtcdBackup %s: artifact %+v", b.Name, got.Status.Artifact)
		}
	}
	s3Backup := getBackup(t, toS3)
	if wantURI := fmt.Sprintf("s3://%s/etcd/%s/to-s3.db.gz", bucket, ns); s3Backup.Status.Artifact.URI != wantURI {
		t.Errorf("artifact URI %q, want %q", s3Backup.Status.Artifact.URI, wantURI)
	}
	fields := strings.Fields(cluster.Kubectl(t, "-n", ns, "get", "etcdbackup", "to-s3", "--no-headers"))
	if len(fields) < 6 || fields[1] != "src" || fields[2] != "Verified" || fields[5] != "True" {
		t.Errorf("kubectl get etcdbackup shows %q, want cluster src, phase Verified and Verified True", fields)
	}

	t.Run("ScheduleKeepsTheLastTwo", func(t *testing.T) { scheduleKeepsTwo(t, ns, s3c, bucket, s3Dest) })

	// A new cluster from the S3 backup holds every key, at revisions above
	// the source's; its own writes go on from there.
	restored := &etcdTest{EtcdCluster: &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "restored"},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas: ptr.To[int32](3), Version: cluster.Settings.EtcdVersion,
			Auth:      etcdv1alpha1.Auth{Enabled: true},
			Bootstrap: &etcdv1alpha1.Bootstrap{Restore: &etcdv1alpha1.BootstrapRestore{BackupRef: &corev1.LocalObjectReference{Name: toS3.Name}}},
		},
	}}
	mustCreate(t, restored.EtcdCluster)
	got := restored.waitReady(t, 3)
	if c := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionRestored); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, toS3.Name) {
		t.Errorf("condition Restored is %+v, want True naming %s", c, toS3.Name)
	}
	restored.checkHolds(t, want, s3Backup.Status.Snapshot.Revision)
	restored.put(t, "after-restore")

	// Deleting with Snapshot (the default) leaves a verified final backup,
	// and no StatefulSet or member volumes.
	mustDelete(t, src.EtcdCluster)
	final := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "src-final-" + string(src.UID)[:8]}}
	cluster.WaitBackupVerified(t, final)
	waitGone(t, src.EtcdCluster, 3*time.Minute)
	checkNoMembers(t, ns, "src")
	if got := getBackup(t, final); !strings.HasPrefix(got.Status.Artifact.URI, "s3://"+bucket+"/") {
		t.Errorf("the final snapshot went to %q, want spec.backup's bucket %s", got.Status.Artifact.URI, bucket)
	}

	// Delete leaves nothing: no final backup, no members, no volumes.
	restored.patchSpec(t, func(s *etcdv1alpha1.EtcdClusterSpec) { s.DeletionPolicy = etcdv1alpha1.DeletionDelete })
	mustDelete(t, restored.EtcdCluster)
	waitGone(t, restored.EtcdCluster, 2*time.Minute)
	checkNoMembers(t, ns, "restored")
	var backups etcdv1alpha1.EtcdBackupList
	if err := cluster.Client.List(t.Context(), &backups, client.InNamespace(ns), client.MatchingLabels{etcdClusterLabel: "restored"}); err != nil {
		t.Fatal(err)
	}
	if len(backups.Items) != 0 {
		t.Errorf("deletionPolicy Delete left EtcdBackups %v", backups.Items)
	}
}

// Retain keeps the members' volumes when the cluster is deleted, and a new
// cluster of the same name does not start on them unasked.
func TestEtcdClusterRetainKeepsVolumes(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	e := &etcdTest{EtcdCluster: &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas: ptr.To[int32](1), Version: cluster.Settings.EtcdVersion, DeletionPolicy: etcdv1alpha1.DeletionRetain,
		},
	}}
	mustCreate(t, e.EtcdCluster)
	e.waitReady(t, 1)
	mustDelete(t, e.EtcdCluster)
	waitGone(t, e.EtcdCluster, time.Minute)
	pvc := &corev1.PersistentVolumeClaim{}
	if err := cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "data-kept-0"}, pvc); err != nil {
		t.Fatalf("Retain: the member's volume claim: %v", err)
	}

	again := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1), Version: cluster.Settings.EtcdVersion}}
	mustCreate(t, again)
	cluster.WaitFor(t, time.Minute, "the new cluster to refuse the old volume", func(ctx context.Context) (bool, error) {
		got := &etcdv1alpha1.EtcdCluster{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(again), got); err != nil {
			return false, err
		}
		return hasCondition(got, etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, etcdv1alpha1.ReasonStaleVolumes)
	})
	if err := cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "kept"}, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("a StatefulSet was made on the old volume: %v", err)
	}
}

// scheduleKeepsTwo runs a schedule every minute with keepLast 2 until it
// has made three backups, and checks that two backups and two objects stay.
func scheduleKeepsTwo(t *testing.T, ns string, s3c *s3.Client, bucket string, dest *etcdv1alpha1.S3Location) {
	dest = dest.DeepCopy()
	dest.Prefix = "scheduled/"
	sched := &etcdv1alpha1.EtcdBackupSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "every-minute"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
			ClusterRef: etcdv1alpha1.ClusterReference{Name: "src"},
			Schedule:   "* * * * *",
			BackupTemplate: etcdv1alpha1.BackupOptions{
				Destination: etcdv1alpha1.BackupDestination{S3: dest},
				Verify:      ptr.To(false),
			},
			Retention: etcdv1alpha1.Retention{KeepLast: ptr.To[int32](2)},
		},
	}
	mustCreate(t, sched)
	cluster.WaitReady(t, time.Minute, ns, "etcdbackupschedule/"+sched.Name) // in force
	var names []string
	cluster.WaitFor(t, 5*time.Minute, "the schedule to make a third backup and keep two", func(ctx context.Context) (bool, error) {
		var list etcdv1alpha1.EtcdBackupList
		if err := cluster.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{etcdv1alpha1.LabelSchedule: sched.Name}); err != nil {
			return false, err
		}
		got := &etcdv1alpha1.EtcdBackupSchedule{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(sched), got); err != nil {
			return false, err
		}
		names = names[:0]
		complete := 0
		for _, b := range list.Items {
			if b.DeletionTimestamp != nil {
				return false, fmt.Errorf("backup %s is being deleted", b.Name)
			}
			names = append(names, b.Name)
			if meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.BackupComplete) {
				complete++
			}
		}
		// Three runs: the schedule's name has the run's time in it, so
		// the oldest name kept must not be the first run's.
		if got.Status.LastScheduleTime == nil || complete != 2 || len(list.Items) != 2 {
			return false, fmt.Errorf("backups %v, %d complete, last run %v", names, complete, got.Status.LastScheduleTime)
		}
		first := got.CreationTimestamp.Add(2 * time.Minute)
		return got.Status.LastScheduleTime.After(first), nil
	})
	cluster.WaitFor(t, time.Minute, "two objects under scheduled/", func(ctx context.Context) (bool, error) {
		out, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: ptr.To("scheduled/")})
		if err != nil {
			return false, err
		}
		var keys []string
		for _, o := range out.Contents {
			if !strings.HasSuffix(*o.Key, ".meta.json") {
				keys = append(keys, *o.Key)
			}
		}
		slices.Sort(keys)
		if len(keys) != 2 {
			return false, fmt.Errorf("objects %v, want the two of backups %v", keys, names)
		}
		return true, nil
	})
	// The schedule stops here so that it makes nothing while the source
	// cluster is deleted.
	mustDelete(t, sched)
}

// fill writes n keys through the client Service and returns them.
func (e *etcdTest) fill(t *testing.T, n int) map[string]string {
	t.Helper()
	cli := cluster.EtcdClient(t, e.clientTLS(t), e.hosts(t), e.serviceEndpoint())
	want := make(map[string]string, n)
	for i := range n {
		key, value := fmt.Sprintf("data/%04d", i), fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i%200))
		ctx, cancel := context.WithTimeout(t.Context(), etcdCallTimeout)
		_, err := cli.Put(ctx, key, value)
		cancel()
		if err != nil {
			t.Fatalf("writing %s: %v", key, err)
		}
		want[key] = value
	}
	return want
}

// checkHolds checks that the cluster holds exactly want under data/, at a
// revision above the source's revision at backup time.
func (e *etcdTest) checkHolds(t *testing.T, want map[string]string, sourceRevision int64) {
	t.Helper()
	cli := cluster.EtcdClient(t, e.clientTLS(t), e.hosts(t), e.serviceEndpoint())
	ctx, cancel := context.WithTimeout(t.Context(), etcdCallTimeout)
	defer cancel()
	resp, err := cli.Get(ctx, "data/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	if len(got) != len(want) {
		t.Errorf("the restored cluster holds %d keys under data/, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("key %s is %q, want %q", k, got[k], v)
			break
		}
	}
	if sourceRevision <= 0 || resp.Header.Revision <= sourceRevision {
		t.Errorf("the restored cluster is at revision %d, want above the source's %d", resp.Header.Revision, sourceRevision)
	}
}

// backupClaim is a volume claim named "backups" in ns, for backups to a
// volume.
func backupClaim(ns string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backups"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

func newBackup(ns, name, clusterName string, dest etcdv1alpha1.BackupDestination, c etcdv1alpha1.Compression) *etcdv1alpha1.EtcdBackup {
	return &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: etcdv1alpha1.EtcdBackupSpec{
			ClusterRef:    etcdv1alpha1.ClusterReference{Name: clusterName},
			BackupOptions: etcdv1alpha1.BackupOptions{Destination: dest, Compression: c},
		},
	}
}

func getBackup(t *testing.T, b *etcdv1alpha1.EtcdBackup) *etcdv1alpha1.EtcdBackup {
	t.Helper()
	got := &etcdv1alpha1.EtcdBackup{}
	if err := cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(b), got); err != nil {
		t.Fatal(err)
	}
	return got
}

func mustCreate(t *testing.T, obj client.Object) {
	t.Helper()
	if err := cluster.Client.Create(t.Context(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func mustDelete(t *testing.T, obj client.Object) {
	t.Helper()
	if err := cluster.Client.Delete(t.Context(), obj); client.IgnoreNotFound(err) != nil {
		t.Fatalf("deleting %T %s: %v", obj, obj.GetName(), err)
	}
}

func waitGone(t *testing.T, obj client.Object, timeout time.Duration) {
	t.Helper()
	cluster.WaitFor(t, timeout, fmt.Sprintf("%T %s to be gone", obj, obj.GetName()), func(ctx context.Context) (bool, error) {
		err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return false, fmt.Errorf("it is still there, with finalizers %v and status %+v", obj.GetFinalizers(), obj)
	})
}

// checkNoMembers checks that a deleted cluster left no StatefulSet and no
// member volume claim that is not being deleted.
func checkNoMembers(t *testing.T, ns, name string) {
	t.Helper()
	cluster.WaitFor(t, time.Minute, "no members or volumes of "+name, func(ctx context.Context) (bool, error) {
		switch err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &appsv1.StatefulSet{}); {
		case err == nil:
			return false, fmt.Errorf("StatefulSet %s still exists", name)
		case !apierrors.IsNotFound(err):
			return false, err
		}
		var pvcs corev1.PersistentVolumeClaimList
		if err := cluster.Client.List(ctx, &pvcs, client.InNamespace(ns), client.MatchingLabels{etcdClusterLabel: name}); err != nil {
			return false, err
		}
		for _, p := range pvcs.Items {
			if p.DeletionTimestamp == nil {
				return false, fmt.Errorf("volume claim %s is still there", p.Name)
			}
		}
		return true, nil
	})
}
