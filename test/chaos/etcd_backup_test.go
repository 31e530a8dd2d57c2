//go:build e2e

package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// backupJobSuffix names an EtcdBackup's snapshot Job: <backup>-backup.
const backupJobSuffix = "-backup"

// The manager is killed during EtcdBackups of a 3-member cluster under a
// writer, to S3 (moto), while an EtcdBackupSchedule takes a backup every
// minute and keeps two. Rounds alternate: a new EtcdBackup, the manager
// killed in its first 10s; and the deletion of the oldest one kept, the
// manager killed in its first 5s. After each, the backup is Complete and
// Verified, its S3 object has the size and SHA-256 that status gives, and
// its snapshot is at least the revision the cluster had when it was
// created; or the deleted backup and its object are gone. A snapshot Job
// made twice for one backup (which would overwrite a backup already
// reported) is a duplicate. At the end, with the schedule deleted, every
// object in the bucket is the file of a backup that exists, and no
// multipart upload is left open in it (orphans); and every acknowledged
// write reads back.
func TestEtcdBackupManagerKills(t *testing.T) {
	t.Parallel() // beside another etcd scenario, once the others ran (doc.go)
	r := scenario(t, "EtcdBackup and schedule, manager SIGKILL")
	ctx := t.Context()
	ns := cluster.Namespace(t)
	dest := cluster.S3Destination(t, ns, "chaos/")
	s3c := cluster.MotoS3()
	e := newEtcd(t, ns, 3)
	jobs := watchUIDs(t, watchClient(t), &batchv1.JobList{}, client.InNamespace(ns))
	defer func() { _ = jobs.stop() }()
	q := watchQuorum(e, e.clientTLS(t))
	defer q.stop()
	w := startWriter(t, e.client(t))

	scheduled := dest.DeepCopy()
	scheduled.Prefix = "scheduled/"
	sched := &etcdv1alpha1.EtcdBackupSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "every-minute"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
			ClusterRef: etcdv1alpha1.ClusterReference{Name: e.Name},
			Schedule:   "* * * * *",
			BackupTemplate: etcdv1alpha1.BackupOptions{
				Destination: etcdv1alpha1.BackupDestination{S3: scheduled},
			},
			Retention: etcdv1alpha1.Retention{KeepLast: ptr.To[int32](2)},
		},
	}
	if err := cluster.Client.Create(ctx, sched); err != nil {
		t.Fatal(err)
	}

	r.Duplicates, r.Orphans = 0, 0
	var kept []*etcdv1alpha1.EtcdBackup
	for i := range max(2, scaled()) {
		rng := random(t)
		var what string
		var delay time.Duration
		var after func()
		if i%2 == 0 || len(kept) == 0 {
			rev := e.revision(t)
			b := &etcdv1alpha1.EtcdBackup{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("b%d", i+1)},
				Spec: etcdv1alpha1.EtcdBackupSpec{
					ClusterRef:    etcdv1alpha1.ClusterReference{Name: e.Name},
					BackupOptions: etcdv1alpha1.BackupOptions{Destination: etcdv1alpha1.BackupDestination{S3: dest}},
				},
			}
			if err := cluster.Client.Create(ctx, b); err != nil {
				t.Fatal(err)
			}
			what = "backup " + b.Name
			delay = time.Duration(rng.Int64N(int64(10 * time.Second)))
			after = func() {
				got := cluster.WaitBackupVerified(t, b)
				checkArtifact(t, s3c, got)
				if got.Status.Snapshot.Revision < rev {
					t.Errorf("EtcdBackup %s holds revision %d, older than the revision %d the cluster had when it was created", b.Name, got.Status.Snapshot.Revision, rev)
				}
				kept = append(kept, got)
			}
		} else {
			b := kept[0]
			kept = kept[1:]
			if err := cluster.Client.Delete(ctx, b); err != nil {
				t.Fatal(err)
			}
			what = "deletion of backup " + b.Name
			delay = time.Duration(rng.Int64N(int64(5 * time.Second)))
			after = func() { waitBackupGone(t, s3c, b) }
		}
		time.Sleep(delay)
		k := r.killManager(t, fmt.Sprintf("round %d (%s, kill %s in)", i+1, what, delay.Round(time.Millisecond)))
		after()
		waitWrites(t, w, 20)
		r.Runs++
		t.Logf("Round %d: %s; manager %s killed %s in, a new one led after %.1fs; %d writes acknowledged so far",
			i+1, what, k.Pod, delay.Round(time.Millisecond), k.Takeover.Seconds(), w.Acked())
	}

	// The schedule has made a backup under the kills (at least one); its
	// backups go with it (they are its own), files too.
	cluster.WaitFor(t, 3*time.Minute, "a backup of the schedule to succeed", func(ctx context.Context) (bool, error) {
		got := &etcdv1alpha1.EtcdBackupSchedule{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(sched), got); err != nil {
			return false, err
		}
		if got.Status.LastSuccessfulBackup == "" {
			return false, fmt.Errorf("no successful backup yet; status %+v", got.Status)
		}
		t.Logf("EtcdBackupSchedule %s: last successful backup %s, %d backups kept", sched.Name, got.Status.LastSuccessfulBackup, got.Status.Backups)
		return true, nil
	})
	if err := cluster.Client.Delete(ctx, sched); err != nil {
		t.Fatal(err)
	}
	cluster.WaitFor(t, 3*time.Minute, "the schedule's backups to be gone", func(ctx context.Context) (bool, error) {
		var list etcdv1alpha1.EtcdBackupList
		if err := cluster.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{etcdv1alpha1.LabelSchedule: sched.Name}); err != nil {
			return false, err
		}
		if len(list.Items) > 0 {
			return false, fmt.Errorf("%d left, such as %s (phase %q)", len(list.Items), list.Items[0].Name, list.Items[0].Status.Phase)
		}
		return true, nil
	})
	orphans := orphanObjects(t, s3c, dest.Bucket, kept)
	r.Orphans = len(orphans)
	if len(orphans) > 0 {
		t.Errorf("objects and open multipart uploads in bucket %s of no EtcdBackup: %v", dest.Bucket, orphans)
	}
	for name, n := range jobs.counts() {
		if strings.HasSuffix(name, backupJobSuffix) && n > 1 {
			r.Duplicates = max(r.Duplicates, n-1)
			t.Errorf("the snapshot Job %s was made %d times", name, n)
		}
	}
	if err := jobs.stop(); err != nil {
		t.Errorf("the watch of the Jobs: %v", err)
	}
	e.checkWrites(t, r, w, q)
}

// revision is the cluster's etcd revision now.
func (e *etcdHandle) revision(t *testing.T) int64 {
	t.Helper()
	cli := e.client(t)
	var rev int64
	cluster.WaitFor(t, time.Minute, "the cluster's revision", func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, etcdCallTimeout)
		defer cancel()
		resp, err := cli.Get(ctx, "any-key")
		if err != nil {
			return false, err
		}
		rev = resp.Header.Revision
		return true, nil
	})
	return rev
}

// checkArtifact reads b's object from S3 and checks its size and SHA-256
// against b's status.
func checkArtifact(t *testing.T, s3c *s3.Client, b *etcdv1alpha1.EtcdBackup) {
	t.Helper()
	bucket, key, ok := splitS3(b.Status.Artifact.URI)
	if !ok {
		t.Fatalf("EtcdBackup %s: artifact URI %q is not s3://bucket/key", b.Name, b.Status.Artifact.URI)
	}
	out, err := s3c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		t.Fatalf("EtcdBackup %s: reading %s: %v", b.Name, b.Status.Artifact.URI, err)
	}
	defer out.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, out.Body)
	if err != nil {
		t.Fatalf("EtcdBackup %s: reading %s: %v", b.Name, b.Status.Artifact.URI, err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); n != b.Status.Artifact.SizeBytes || sum != b.Status.Artifact.SHA256 {
		t.Errorf("EtcdBackup %s: %s has %d bytes, SHA-256 %s; status says %d bytes, %s",
			b.Name, b.Status.Artifact.URI, n, sum, b.Status.Artifact.SizeBytes, b.Status.Artifact.SHA256)
	}
}

// waitBackupGone waits until the deleted backup b and its object are gone.
func waitBackupGone(t *testing.T, s3c *s3.Client, b *etcdv1alpha1.EtcdBackup) {
	t.Helper()
	bucket, key, _ := splitS3(b.Status.Artifact.URI)
	cluster.WaitFor(t, 3*time.Minute, "EtcdBackup "+b.Name+" and its object to be gone", func(ctx context.Context) (bool, error) {
		got := &etcdv1alpha1.EtcdBackup{}
		switch err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(b), got); {
		case err == nil:
			return false, fmt.Errorf("it is still there, phase %q, finalizers %v", got.Status.Phase, got.Finalizers)
		case !apierrors.IsNotFound(err):
			return false, err
		}
		if _, err := s3c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key}); err == nil {
			return false, framework.Stop(fmt.Errorf("the EtcdBackup is gone, and its object %s is still there", b.Status.Artifact.URI))
		}
		return true, nil
	})
}

// orphanObjects lists the objects in bucket that are no file of a kept
// backup, and the multipart uploads left open in it: parts that a backup
// neither completed nor aborted, which S3 keeps and bills and no listing
// of objects shows.
func orphanObjects(t *testing.T, s3c *s3.Client, bucket string, kept []*etcdv1alpha1.EtcdBackup) []string {
	t.Helper()
	var want []string
	for _, b := range kept {
		want = append(want, b.Status.Artifact.URI)
	}
	out, err := s3c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: &bucket})
	if err != nil {
		t.Fatalf("listing bucket %s: %v", bucket, err)
	}
	var orphans []string
	for _, o := range out.Contents {
		if uri := "s3://" + bucket + "/" + *o.Key; !slices.Contains(want, uri) {
			orphans = append(orphans, uri)
		}
	}
	uploads, err := s3c.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: &bucket})
	if err != nil {
		t.Fatalf("listing the multipart uploads of bucket %s: %v", bucket, err)
	}
	for _, u := range uploads.Uploads {
		orphans = append(orphans, fmt.Sprintf("s3://%s/%s (multipart upload %s, open)", bucket, *u.Key, *u.UploadId))
	}
	return orphans
}

func splitS3(uri string) (bucket, key string, ok bool) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "/")
}
