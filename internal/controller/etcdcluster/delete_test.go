package etcdcluster

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

func TestFinalBackup(t *testing.T) {
	g := NewWithT(t)
	c := testCluster(nil)
	c.UID = "0123456789abcdef"
	b := finalBackup(c)
	g.Expect(b.Name).To(Equal("main-final-01234567"))
	g.Expect(b.Namespace).To(Equal("db"))
	g.Expect(b.OwnerReferences).To(BeEmpty(), "the final snapshot must outlive its cluster")
	g.Expect(b.Labels).To(HaveKeyWithValue(etcdv1alpha1.LabelBackupCluster, "main"))
	g.Expect(b.Spec.ArtifactPolicy).To(Equal(etcdv1alpha1.ArtifactRetain))
	g.Expect(*b.Spec.Verify).To(BeTrue())
	g.Expect(b.Spec.Destination.Volume.ClaimName).To(Equal("main-final-snapshot"))

	claim := finalSnapshotClaim(c)
	g.Expect(claim.Labels).NotTo(HaveKey(LabelCluster), "the claim is no member's volume")
	g.Expect(claim.Spec.Resources.Requests.Storage().String()).To(Equal("1Gi"))

	c.Spec.Backup = &etcdv1alpha1.ClusterBackup{
		Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "b", Prefix: "p/"}},
		Compression: etcdv1alpha1.CompressionZstd,
	}
	b = finalBackup(c)
	g.Expect(b.Spec.Destination.Volume).To(BeNil())
	g.Expect(b.Spec.Destination.S3.Bucket).To(Equal("b"))
	g.Expect(b.Spec.Compression).To(Equal(etcdv1alpha1.CompressionZstd))
}

func TestFinalBackupState(t *testing.T) {
	cond := func(t string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Message: t + " says so"}
	}
	cases := map[string]struct {
		verify *bool
		conds  []metav1.Condition
		want   backupState
	}{
		"new":                         {want: backupRunning},
		"complete, not verified yet":  {conds: []metav1.Condition{cond("Complete", "True"), cond("Verified", "Unknown")}, want: backupRunning},
		"complete and verified":       {conds: []metav1.Condition{cond("Complete", "True"), cond("Verified", "True")}, want: backupDone},
		"complete, verification off":  {verify: ptr.To(false), conds: []metav1.Condition{cond("Complete", "True")}, want: backupDone},
		"verification failed":         {conds: []metav1.Condition{cond("Complete", "True"), cond("Verified", "False")}, want: backupFailed},
		"failed":                      {conds: []metav1.Condition{cond("Failed", "True")}, want: backupFailed},
		"failed condition not active": {conds: []metav1.Condition{cond("Failed", "False")}, want: backupRunning},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := &etcdv1alpha1.EtcdBackup{Spec: etcdv1alpha1.EtcdBackupSpec{BackupOptions: etcdv1alpha1.BackupOptions{Verify: tc.verify}}}
			b.Status.Conditions = tc.conds
			got, _ := finalBackupState(b)
			NewWithT(t).Expect(got).To(Equal(tc.want))
		})
	}
}

func TestWantsFinalizer(t *testing.T) {
	g := NewWithT(t)
	for policy, want := range map[etcdv1alpha1.DeletionPolicy]bool{"": true, "Snapshot": true, "Delete": true, "Retain": false} {
		c := testCluster(func(s *etcdv1alpha1.EtcdClusterSpec) { s.DeletionPolicy = policy })
		g.Expect(wantsFinalizer(c)).To(Equal(want), string(policy))
	}
}

func TestConnectionConfigMap(t *testing.T) {
	g := NewWithT(t)
	cm := connectionConfigMap(testCluster(nil), 2, []byte("CA"))
	g.Expect(cm.Name).To(Equal("main-connection"))
	g.Expect(cm.Data).To(Equal(map[string]string{
		"endpoint":     "https://main-client.db.svc:2379",
		"endpoints":    "https://main-0.main-peer.db.svc.cluster.local:2379,https://main-1.main-peer.db.svc.cluster.local:2379",
		"ca.crt":       "CA",
		"clientSecret": "main-client-tls",
		"version":      "v3.6.16",
	}))
}
