package etcdbackup

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
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
	b := deletedBackup(now)
	stale := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(b).WithStatusSubresource(b).Build()
	apiserver := fake.NewClientBuilder().WithScheme(scheme.Scheme).Build() // the backup is gone
	r := &BackupReconciler{Client: stale, APIReader: apiserver, Pods: stale, Recorder: events.NewFakeRecorder(10),
		Clock: clocktesting.NewFakeClock(now.Time), AgentImage: "tend:test"}

	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)})
	g.Expect(err).NotTo(HaveOccurred())
	var jobs batchv1.JobList
	g.Expect(stale.List(context.Background(), &jobs)).To(Succeed())
	g.Expect(jobs.Items).To(BeEmpty(), "no delete Job for a backup that is gone")
}

// TestAFailedReleaseKeepsTheDeleteJob: once the delete Job has deleted the
// file, the backup is let go before its Job is deleted. A release that
// fails (a conflict on a stale cache) must leave the Job, so that the next
// pass finds the file deleted and releases again, rather than find no Job
// and make another one (which, on a cluster where it never runs, held the
// backup for ever).
func TestAFailedReleaseKeepsTheDeleteJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	now := metav1.NewTime(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	b := deletedBackup(now)
	job := deleteJob(b, "tend:test")
	job.UID = "job-1"
	done := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: job.Name + "-a", Labels: map[string]string{batchv1.JobNameLabel: job.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{exited(stepDelete, 0, &agentapi.Result{Op: agentapi.OpDelete})}},
	}
	conflicts := 1
	cl := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(b, job, done).WithStatusSubresource(b).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*etcdv1alpha1.EtcdBackup); ok && conflicts > 0 {
				conflicts--
				return apierrors.NewConflict(schema.GroupResource{Group: "etcd.tend.dev", Resource: "etcdbackups"}, obj.GetName(), errors.New("stale"))
			}
			return c.Patch(ctx, obj, patch, opts...)
		}}).Build()
	r := &BackupReconciler{Client: cl, APIReader: cl, Pods: cl, Recorder: events.NewFakeRecorder(10),
		Clock: clocktesting.NewFakeClock(now.Time), AgentImage: "tend:test"}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)}

	_, err := r.Reconcile(ctx, req)
	g.Expect(err).To(MatchError(ContainSubstring("removing the finalizer")))
	g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})).To(Succeed(), "the Job stays while the backup does")

	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apierrors.IsNotFound(cl.Get(ctx, client.ObjectKeyFromObject(b), &etcdv1alpha1.EtcdBackup{}))).To(BeTrue(), "let go")
	var jobs batchv1.JobList
	g.Expect(cl.List(ctx, &jobs)).To(Succeed())
	g.Expect(jobs.Items).To(BeEmpty(), "the Job is deleted, and no other made")
}

// TestADeletedNamespaceKeepsTheFile: in a namespace being deleted no delete
// Job can be made; waiting for one held the namespace for ever (seen on
// the node). The backup is let go, and its file kept.
func TestADeletedNamespaceKeepsTheFile(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	now := metav1.NewTime(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	b := deletedBackup(now)
	cl := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(b).WithStatusSubresource(b).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			err := apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, obj.GetName(),
				errors.New("unable to create new content in namespace db because it is being terminated"))
			err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace db is being terminated", Field: "metadata.namespace"}}
			return err
		}}).Build()
	r := &BackupReconciler{Client: cl, APIReader: cl, Pods: cl, Recorder: events.NewFakeRecorder(10),
		Clock: clocktesting.NewFakeClock(now.Time), AgentImage: "tend:test"}

	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apierrors.IsNotFound(cl.Get(ctx, client.ObjectKeyFromObject(b), &etcdv1alpha1.EtcdBackup{}))).To(BeTrue(), "let go")
}

// deletedBackup is an EtcdBackup of a volume, deleted at now, whose
// finalizer still holds it.
func deletedBackup(now metav1.Time) *etcdv1alpha1.EtcdBackup {
	return &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "nightly", UID: "b-1",
			Finalizers: []string{etcdv1alpha1.BackupFinalizer}, DeletionTimestamp: &now},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterRef: etcdv1alpha1.ClusterReference{Name: "kv"}, BackupOptions: etcdv1alpha1.BackupOptions{
			Destination: etcdv1alpha1.BackupDestination{Volume: &etcdv1alpha1.VolumeLocation{ClaimName: "backups"}},
		}},
		Status: etcdv1alpha1.EtcdBackupStatus{StartTime: &now},
	}
}
