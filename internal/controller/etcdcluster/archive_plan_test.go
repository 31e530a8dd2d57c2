package etcdcluster

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
)

func archivedCluster(dest etcdv1alpha1.BackupDestination) *etcdv1alpha1.EtcdCluster {
	c := newCluster("ns", "kv", func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Backup = &etcdv1alpha1.ClusterBackup{Destination: dest}
		s.Archive = &etcdv1alpha1.ClusterArchive{Destination: dest}
	})
	c.UID = types.UID("0b7c6f3e-9d3c-4a57-a1a6-3a4c2f3a7f10")
	return c
}

func TestArchiveOnAVolume(t *testing.T) {
	g := NewWithT(t)
	c := archivedCluster(etcdv1alpha1.BackupDestination{Volume: &etcdv1alpha1.VolumeLocation{ClaimName: "backups", Path: "etcd"}})
	g.Expect(archiveLocation(c).URI).To(Equal("pvc://backups/etcd/ns/kv/archive-" + string(c.UID)))
	d := archiveDeployment(c, 42, 0, "tend:test", true)
	pod := d.Spec.Template.Spec
	g.Expect(pod.Containers[0].Command).To(ContainElement("--to=file:///archive/etcd/ns/kv/archive-" + string(c.UID)))
	g.Expect(pod.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", "backups")))
	g.Expect(pod.Containers[0].VolumeMounts).To(ContainElement(SatisfyAll(HaveField("MountPath", "/archive"), HaveField("ReadOnly", false))))
	g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(*pod.Containers[0].SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(archiveDeployment(c, 42, 0, "tend:test", false).Spec.Replicas).To(Equal(ptr.To[int32](0)))
	g.Expect(archiveDeployment(c, 43, 0, "tend:test", true).Annotations[annotationArchiveSpec]).NotTo(Equal(d.Annotations[annotationArchiveSpec]), "a new base changes the pod")
}

// TestArchiveKeyFitsS3 holds the longest archive location, with its
// segments' names, under S3's 1,024-byte keys.
func TestArchiveKeyFitsS3(t *testing.T) {
	g := NewWithT(t)
	c := archivedCluster(etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "b", Prefix: strings.Repeat("p", 512)}})
	c.Namespace, c.Name = strings.Repeat("n", 63), strings.Repeat("c", 52)
	key := strings.TrimPrefix(archiveLocation(c).URI, "s3://b/")
	g.Expect(len(key) + len("/segments/00000000000000000001.seg")).To(BeNumerically("<=", 1024))
}

func TestArchiveFloor(t *testing.T) {
	now := time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-ago)} }
	for _, tc := range []struct {
		name   string
		status *etcdv1alpha1.ArchiveStatus
		want   int64
	}{
		{"no archive yet", nil, 0},
		{"waiting for its base", &etcdv1alpha1.ArchiveStatus{}, 0},
		{"a base, nothing stored", &etcdv1alpha1.ArchiveStatus{BaseRevision: 100}, 101},
		{"stored a minute ago", &etcdv1alpha1.ArchiveStatus{BaseRevision: 100, LastRevision: 500, LastTime: at(time.Minute)}, 501},
		{"stored past the hold", &etcdv1alpha1.ArchiveStatus{BaseRevision: 100, LastRevision: 500, LastTime: at(2 * time.Hour)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := archivedCluster(etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "b"}})
			c.Status.Archive = tc.status
			NewWithT(t).Expect(archiveFloor(c, now)).To(Equal(tc.want))
		})
	}
	c := archivedCluster(etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "b"}})
	c.Status.Archive = &etcdv1alpha1.ArchiveStatus{BaseRevision: 100}
	c.Spec.Archive.CompactionHold = &metav1.Duration{}
	NewWithT(t).Expect(archiveFloor(c, now)).To(BeZero(), "a hold of 0s never holds")
	c.Spec.Archive = nil
	NewWithT(t).Expect(archiveFloor(c, now)).To(BeZero(), "no spec.archive, no hold")
}

func TestArchiveNeedsNewBase(t *testing.T) {
	g := NewWithT(t)
	taken := metav1.NewTime(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	base := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "kv-archive-base-0", CreationTimestamp: taken}}
	later, earlier := metav1.NewTime(taken.Add(time.Hour)), metav1.NewTime(taken.Add(-time.Hour))
	g.Expect(archiveNeedsNewBase(base, nil, nil)).To(BeEmpty())
	g.Expect(archiveNeedsNewBase(base, &agentapi.ArchiveState{Phase: agentapi.ArchiveArchiving}, nil)).To(BeEmpty())
	g.Expect(archiveNeedsNewBase(base, &agentapi.ArchiveState{Phase: agentapi.ArchiveBroken, Cause: agentapi.ArchiveCauseRefused}, nil)).To(BeEmpty(), "another owner's archive needs a person, not a base")
	g.Expect(archiveNeedsNewBase(base, &agentapi.ArchiveState{Phase: agentapi.ArchiveBroken, Cause: agentapi.ArchiveCauseCompacted}, nil)).To(ContainSubstring("compacted"))
	restored := &etcdv1alpha1.RecoveryStatus{Kind: etcdv1alpha1.RecoveryFromBackup, Restore: "undo", CompletedAt: &later}
	g.Expect(archiveNeedsNewBase(base, nil, restored)).To(ContainSubstring("the restore changed the history"))
	restored.CompletedAt = &earlier
	g.Expect(archiveNeedsNewBase(base, nil, restored)).To(BeEmpty(), "the base was taken after it")
	survivor := &etcdv1alpha1.RecoveryStatus{Kind: etcdv1alpha1.RecoveryFromSurvivor, CompletedAt: &later}
	g.Expect(archiveNeedsNewBase(base, nil, survivor)).To(ContainSubstring("quorum-loss recovery"))
}

func TestArchiveStatusOf(t *testing.T) {
	g := NewWithT(t)
	at := time.Date(2026, 11, 28, 14, 3, 7, 500_000_000, time.UTC)
	var gaps []agentapi.ArchiveGap
	for i := range 12 {
		gaps = append(gaps, agentapi.ArchiveGap{From: int64(i * 10), To: int64(i*10 + 5)})
	}
	st := archiveStatusOf(nil, "s3://b/k", "kv-archive-base-0", 100, 0, &agentapi.ArchiveState{
		FirstRevision: 101, FirstTime: at, LastRevision: 900, LastTime: at, LagSeconds: 3.9, Segments: 9, Gaps: gaps,
	})
	g.Expect(st.LastTime.Time).To(Equal(at.Truncate(time.Second)))
	g.Expect(st.LagSeconds).To(Equal(int64(3)))
	g.Expect(st.Gaps).To(HaveLen(10))
	g.Expect(st.Gaps[9].From).To(Equal(int64(110)), "the newest ten")
	// Unread, the last known window stays within its epoch, and goes with it.
	g.Expect(archiveStatusOf(st, "s3://b/k", "", 0, 0, nil).LastRevision).To(Equal(int64(900)))
	g.Expect(archiveStatusOf(st, "s3://b/k", "", 0, 1, nil).LastRevision).To(BeZero())
}

// TestArchivePodIsNotAMember: the agent's pod carries none of the labels
// that make a pod a member (the member pod cache, Services, budget).
func TestArchivePodIsNotAMember(t *testing.T) {
	g := NewWithT(t)
	c := archivedCluster(etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "b"}})
	l := archiveDeployment(c, 1, 0, "tend:test", true).Spec.Template.Labels
	for k, v := range selector(c) {
		g.Expect(l[k]).NotTo(Equal(v), k)
	}
	g.Expect(l).NotTo(HaveKey(LabelCluster))
	g.Expect(l[labelClusterUID]).To(Equal(string(c.UID)))
}
