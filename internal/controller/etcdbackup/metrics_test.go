package etcdbackup

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/scheme"
	"github.com/tend-dev/tend/internal/statemetrics"
)

func TestBackupMetrics(t *testing.T) {
	g := NewWithT(t)
	at := func(s int64) *metav1.Time { return &metav1.Time{Time: time.Unix(s, 0)} }
	backup := func(name string, completed int64, size int64, verified int64, conds ...metav1.Condition) client.Object {
		b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name}}
		b.Spec.ClusterRef.Name = "kv"
		b.Status.Conditions = conds
		if completed > 0 {
			b.Status.CompletionTime = at(completed)
			b.Status.Artifact = &etcdv1alpha1.Artifact{SizeBytes: size}
		}
		if verified > 0 {
			b.Status.Verification = &etcdv1alpha1.Verification{Time: *at(verified)}
		}
		return b
	}
	complete := metav1.Condition{Type: etcdv1alpha1.BackupComplete, Status: metav1.ConditionTrue, Reason: "Written"}
	verified := metav1.Condition{Type: etcdv1alpha1.BackupVerified, Status: metav1.ConditionTrue, Reason: "HashMatches"}
	mismatch := metav1.Condition{Type: etcdv1alpha1.BackupVerified, Status: metav1.ConditionFalse, Reason: "HashMismatch"}
	r := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		backup("old", 1000, 10, 1100, complete, verified),
		// Newer and complete, but its test restore failed: the newest
		// backup is this one, the newest verified one the old one.
		backup("new", 2000, 20, 2100, complete, mismatch),
		backup("running", 0, 0, 0),
	).Build()
	err := testutil.CollectAndCompare(statemetrics.NewCollector(r, BackupMetrics), strings.NewReader(`
# HELP tend_etcdcluster_last_backup_size_bytes The stored size of the newest Complete EtcdBackup of an EtcdCluster.
# TYPE tend_etcdcluster_last_backup_size_bytes gauge
tend_etcdcluster_last_backup_size_bytes{name="kv",namespace="a"} 20
# HELP tend_etcdcluster_last_backup_timestamp_seconds When the newest Complete EtcdBackup of an EtcdCluster was written (Unix seconds).
# TYPE tend_etcdcluster_last_backup_timestamp_seconds gauge
tend_etcdcluster_last_backup_timestamp_seconds{name="kv",namespace="a"} 2000
# HELP tend_etcdcluster_last_verified_backup_timestamp_seconds When the newest Verified EtcdBackup of an EtcdCluster passed its test restore (Unix seconds).
# TYPE tend_etcdcluster_last_verified_backup_timestamp_seconds gauge
tend_etcdcluster_last_verified_backup_timestamp_seconds{name="kv",namespace="a"} 1100
`), "tend_etcdcluster_last_backup_size_bytes", "tend_etcdcluster_last_backup_timestamp_seconds", "tend_etcdcluster_last_verified_backup_timestamp_seconds")
	g.Expect(err).NotTo(HaveOccurred())
}
