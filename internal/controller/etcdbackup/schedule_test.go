package etcdbackup

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

func TestScheduledBackupOf(t *testing.T) {
	g := NewWithT(t)
	sc := testSchedule(false)
	sc.Spec.ClusterRef.Name = "kv"
	sc.Spec.BackupTemplate = etcdv1alpha1.BackupOptions{
		Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "b", Prefix: "etcd/"}},
		Compression: etcdv1alpha1.CompressionZstd, Verify: ptr.To(true),
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	g.Expect(err).NotTo(HaveOccurred())
	run := at("2030-01-02T02:00:00Z").In(berlin)

	b := scheduledBackupOf(sc, run)
	g.Expect(b.Name).To(Equal("hourly-1893549600"), "the run's Unix time: the same run always has the same name")
	g.Expect(b.Namespace).To(Equal("ns"))
	g.Expect(b.Labels).To(Equal(map[string]string{etcdv1alpha1.LabelSchedule: "hourly", etcdv1alpha1.LabelBackupCluster: "kv"}))
	g.Expect(b.Annotations).To(HaveKeyWithValue(etcdv1alpha1.AnnotationScheduledTime, "2030-01-02T03:00:00+01:00"))
	g.Expect(b.Spec.ClusterRef.Name).To(Equal("kv"))
	g.Expect(b.Spec.BackupOptions).To(Equal(sc.Spec.BackupTemplate))
	b.Spec.Destination.S3.Prefix = "changed/"
	g.Expect(sc.Spec.BackupTemplate.Destination.S3.Prefix).To(Equal("etcd/"), "a copy, not the template itself")

	// What retention and health read back from it.
	v := viewBackup(b)
	g.Expect(v.at).To(BeTemporally("==", run))
	g.Expect(v.state).To(Equal(backupActive))
}

func TestActiveBackup(t *testing.T) {
	g := NewWithT(t)
	g.Expect(activeBackup(nil)).To(BeEmpty())
	g.Expect(activeBackup([]scheduledBackup{
		{name: "going", state: backupActive, deleting: true},
		{name: "done", state: backupGood},
		{name: "running", state: backupActive},
	})).To(Equal("running"))
}
