package etcdcluster

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// finishBackupAt plays the etcdbackup controller: b is Complete and
// Verified at rev, completed at the time at.
func finishBackupAt(g Gomega, b *etcdv1alpha1.EtcdBackup, rev int64, at time.Time) {
	b.Status.CompletionTime = &metav1.Time{Time: at}
	b.Status.Snapshot = &etcdv1alpha1.SnapshotInfo{Member: "roll-0", Revision: rev}
	b.Status.Artifact = &etcdv1alpha1.Artifact{URI: "s3://backups/etcd/" + b.Name + ".db", Compression: etcdv1alpha1.CompressionNone}
	for _, t := range []string{etcdv1alpha1.BackupComplete, etcdv1alpha1.BackupVerified} {
		apimeta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: "Test", Message: "test"})
	}
	g.Expect(env.Client.Status().Update(context.Background(), b)).To(Succeed())
}

// TestArchiveRetentionMovesTheBaseOn: with spec.archive.retention, Tend
// takes the archive's next base once the newest completed a retention
// ago; once that one completed a retention ago, the archive goes on from
// it (status first, then the agent's --base-revision and --prune-before),
// and the base it leaves is deleted, its file with it (the annotation that
// kept the file comes off first). A scheduled backup older than the new base
// can no longer start a restore to a point; one after it can.
func TestArchiveRetentionMovesTheBaseOn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s3 := &etcdv1alpha1.S3Location{Bucket: "backups", Prefix: "etcd/"}
	c, _ := startRollCluster(t, g, "v3.6.16", func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Backup = &etcdv1alpha1.ClusterBackup{Destination: etcdv1alpha1.BackupDestination{S3: s3}}
		s.Archive = &etcdv1alpha1.ClusterArchive{Destination: etcdv1alpha1.BackupDestination{S3: s3}, Retention: &metav1.Duration{Duration: time.Hour}}
	})
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: c.Namespace, Name: name} }
	first := &etcdv1alpha1.EtcdBackup{}
	g.Eventually(func() error { return env.Client.Get(ctx, key("roll-archive-base-0"), first) }, wait).Should(Succeed())
	g.Expect(first.Spec.ArtifactPolicy).To(Equal(etcdv1alpha1.ArtifactDelete))
	g.Expect(first.Annotations).To(HaveKeyWithValue(etcdv1alpha1.AnnotationKeepArtifact, "true"), "the segments need their base after the cluster")

	// A base that completed just now: nothing more to take.
	finishBackupAt(g, first, 100, fakeClock.Now())
	dep := &appsv1.Deployment{}
	g.Eventually(func() error { return env.Client.Get(ctx, key("roll-archive"), dep) }, wait).Should(Succeed())
	g.Expect(dep.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--base-revision=100"))
	g.Expect(dep.Spec.Template.Spec.Containers[0].Command).NotTo(ContainElement(HavePrefix("--prune-before")))
	poke(g, c)
	g.Consistently(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key("roll-archive-base-0-1"), &etcdv1alpha1.EtcdBackup{}))
	}, 2*time.Second).Should(BeTrue(), "the newest base is younger than the retention")

	// Once it is a retention old, the next base is taken; the archive
	// stays on the first while the next is younger than the retention.
	g.Expect(env.Client.Get(ctx, key(first.Name), first)).To(Succeed())
	finishBackupAt(g, first, 100, fakeClock.Now().Add(-3*time.Hour))
	second := &etcdv1alpha1.EtcdBackup{}
	g.Eventually(func() error { return env.Client.Get(ctx, key("roll-archive-base-0-1"), second) }, wait).Should(Succeed())
	ownedBy(g, second, c)
	g.Expect(second.Labels).To(HaveKeyWithValue(labelArchiveBaseSeq, "1"))
	g.Expect(second.Annotations).To(HaveKeyWithValue(etcdv1alpha1.AnnotationKeepArtifact, "true"))
	finishBackupAt(g, second, 500, fakeClock.Now().Add(-10*time.Minute))
	poke(g, c)
	g.Consistently(func(g Gomega) {
		g.Expect(getCluster(g, c).Status.Archive.BaseBackup).To(Equal("roll-archive-base-0"))
	}, 2*time.Second).Should(Succeed())

	// A scheduled backup between the two bases, and one after the second.
	between, after := scheduledBackup(g, c, "between", 300), scheduledBackup(g, c, "after", 700)
	got := getCluster(g, c)
	g.Expect(isArchiveBase(got, between)).To(BeTrue())

	// The second base is a retention old: the archive goes on from it.
	g.Expect(env.Client.Get(ctx, key(second.Name), second)).To(Succeed())
	finishBackupAt(g, second, 500, fakeClock.Now().Add(-2*time.Hour))
	g.Eventually(func(g Gomega) {
		got := getCluster(g, c)
		g.Expect(got.Status.Archive).To(SatisfyAll(
			HaveField("BaseBackup", "roll-archive-base-0-1"), HaveField("BaseRevision", int64(500)), HaveField("PrunedThrough", int64(500))))
	}, wait).Should(Succeed())
	// The agent prunes, and the old base goes, from the pass after status
	// says so: no restore picks a base whose revisions are being deleted.
	poke(g, c)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key("roll-archive"), dep)).To(Succeed())
		g.Expect(dep.Spec.Template.Spec.Containers[0].Command).To(ContainElements("--base-revision=500", "--prune-before=500"))
		err := env.Client.Get(ctx, key(first.Name), first)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the first base is deleted: %v", err)
		g.Expect(env.Client.Get(ctx, key("roll-archive-base-0-2"), &etcdv1alpha1.EtcdBackup{})).To(Succeed(), "and the next is taken")
	}, wait).Should(Succeed())
	g.Expect(eventReasons(g, c)).To(ContainElements("ArchiveRetention", "ArchiveBasesDeleted"))
	got = getCluster(g, c)
	g.Expect(isArchiveBase(got, between)).To(BeFalse(), "the archive no longer holds the revisions after it")
	g.Expect(isArchiveBase(got, after)).To(BeTrue())
	g.Expect(env.Client.Get(ctx, key(second.Name), second)).To(Succeed())
	g.Expect(second.DeletionTimestamp).To(BeNil(), "the archive's base stays")
}

// scheduledBackup makes a Complete backup of c at rev that is not one of
// the archive's own bases, as a schedule's.
func scheduledBackup(g Gomega, c *etcdv1alpha1.EtcdCluster, name string, rev int64) *etcdv1alpha1.EtcdBackup {
	b := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterRef: etcdv1alpha1.ClusterReference{Name: c.Name}, BackupOptions: etcdv1alpha1.BackupOptions{
			Destination: etcdv1alpha1.BackupDestination{Volume: &etcdv1alpha1.VolumeLocation{ClaimName: "backups"}},
		}},
	}
	g.Expect(env.Client.Create(context.Background(), b)).To(Succeed())
	finishBackupAt(g, b, rev, fakeClock.Now().Add(-90*time.Minute))
	return b
}
