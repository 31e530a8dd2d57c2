package etcdbackup

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/scheme"
)

// TestAStaleCacheMakesNoDeleteJobForAGoneBackup: a pass that reads a cache
// which still shows a deleted backup, after the pass that deleted its file
// and its delete Job and let it go, must not make the delete Job again: no
// pass would be left to delete it. A pure test: two fake clients stand for
// a cache that lags the apiserver.
func TestAStaleCacheMakesNoDeleteJobForAGoneBackup(t *testing.T) {
	g := NewWithT(t)
	now := metav1.NewTime(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	b := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "nightly", UID: "b-1",
			Finalizers: []string{etcdv1alpha1.BackupFinalizer}, DeletionTimestamp: &now},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterRef: etcdv1alpha1.ClusterReference{Name: "kv"}, BackupOptions: etcdv1alpha1.BackupOptions{
			Destination: etcdv1alpha1.BackupDestination{Volume: &etcdv1alpha1.VolumeLocation{ClaimName: "backups"}},
		}},
		Status: etcdv1alpha1.EtcdBackupStatus{StartTime: &now},
	}
	stale := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(b).WithStatusSubresource(b).Build()
	apiserver := fake.NewClientBuilder().WithScheme(scheme.Scheme).Build() // the backup is gone
	r := &BackupReconciler{Client: stale, APIReader: apiserver, Recorder: events.NewFakeRecorder(10),
		Clock: clocktesting.NewFakeClock(now.Time), AgentImage: "tend:test", PollInterval: time.Second}

	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)})
	g.Expect(err).NotTo(HaveOccurred())
	var jobs batchv1.JobList
	g.Expect(stale.List(context.Background(), &jobs)).To(Succeed())
	g.Expect(jobs.Items).To(BeEmpty(), "no delete Job for a backup that is gone")
}
