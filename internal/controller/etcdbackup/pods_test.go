package etcdbackup

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/scheme"
)

// jobPod is a pod of job as the Job controller makes it: the template's
// labels, the job-name label, and the Job as its controller.
func jobPod(job *batchv1.Job, name string, phase corev1.PodPhase, main ...corev1.ContainerStatus) *corev1.Pod {
	l := map[string]string{batchv1.JobNameLabel: job.Name}
	for k, v := range job.Spec.Template.Labels {
		l[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: name, Labels: l,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{Phase: phase, ContainerStatuses: main},
	}
}

func TestJobPodCacheHoldsTheJobsPods(t *testing.T) {
	g := NewWithT(t)
	b := testBackup(nil)
	by := JobPodCache()
	g.Expect(by.Label.Matches(labels.Set(backupJob(b, testCluster(false), testImage).Spec.Template.Labels))).To(BeTrue(), "the backup Job's pods")
	g.Expect(by.Label.Matches(labels.Set(deleteJob(b, testImage).Spec.Template.Labels))).To(BeTrue(), "the delete Job's pods")
	g.Expect(by.Label.Matches(labels.Set{etcdv1alpha1.LabelBackupCluster: "kv", "app.kubernetes.io/managed-by": "tend"})).To(BeFalse(),
		"not the members, which carry the cluster label too")
	g.Expect(by.Transform).NotTo(BeNil())
}

func TestTrimJobPodKeepsWhatAPassReads(t *testing.T) {
	g := NewWithT(t)
	b := testBackup(nil)
	job := backupJob(b, testCluster(true), testImage)
	job.UID = "job-1"
	in := jobPod(job, "nightly-backup-a", corev1.PodRunning, running(stepVerify))
	in.Spec = *job.Spec.Template.Spec.DeepCopy()
	in.CreationTimestamp = metav1.NewTime(t0)
	in.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	in.Status.InitContainerStatuses = []corev1.ContainerStatus{done(stepBackup, 0, resultJSON(backupOK)), done(stepFetch, 0, `{"op":"fetch"}`),
		done(stepRestore, 0, ""), running(stepEtcd)}
	in.Status.InitContainerStatuses[3].RestartCount = 1
	in.Status.InitContainerStatuses[3].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}
	in.Status.ContainerStatuses[0].Image, in.Status.ContainerStatuses[0].ContainerID = testImage, "containerd://1"
	in.Status.PodIP, in.Status.HostIP = "10.0.0.1", "192.0.2.1"
	in.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}

	out, err := trimJobPod(in.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	p := out.(*corev1.Pod)
	g.Expect(p.ManagedFields).To(BeNil())
	g.Expect(p.Labels).To(Equal(in.Labels))
	g.Expect(p.OwnerReferences).To(Equal(in.OwnerReferences))
	g.Expect(p.Spec).To(Equal(corev1.PodSpec{}), "no containers, volumes or environment")
	g.Expect(p.Status.PodIP).To(BeEmpty())
	g.Expect(p.Status.Conditions).To(BeNil())
	g.Expect(p.Status.ContainerStatuses[0].Image).To(BeEmpty())
	g.Expect(p.Status.ContainerStatuses[0].ContainerID).To(BeEmpty())
	g.Expect(readPod(p)).To(Equal(readPod(in)), "a pass reads the trimmed pod as the whole one")
	g.Expect(backupOfPod(context.Background(), p)).To(Equal(backupOfPod(context.Background(), in)))
	g.Expect(ownedPods([]corev1.Pod{*p}, job)).To(HaveLen(1))
}

func TestBackupOfPod(t *testing.T) {
	b := testBackup(nil)
	job := backupJob(b, testCluster(false), testImage)
	job.UID = "job-1"
	dj := deleteJob(b, testImage)
	want := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "nightly"}}}
	for _, tc := range []struct {
		name   string
		pod    func() *corev1.Pod
		mapped bool
	}{
		{name: "a pod of the backup Job", pod: func() *corev1.Pod { return jobPod(job, "a", corev1.PodRunning) }, mapped: true},
		{name: "a pod of the delete Job", pod: func() *corev1.Pod { return jobPod(dj, "a", corev1.PodRunning) }, mapped: true},
		{name: "without the label", pod: func() *corev1.Pod {
			p := jobPod(job, "a", corev1.PodRunning)
			delete(p.Labels, etcdv1alpha1.LabelBackup)
			return p
		}},
		{name: "the label, on a pod of another Job", pod: func() *corev1.Pod {
			p := jobPod(job, "a", corev1.PodRunning)
			p.OwnerReferences[0].Name = "someone-elses"
			return p
		}},
		{name: "the label naming another backup", pod: func() *corev1.Pod {
			p := jobPod(job, "a", corev1.PodRunning)
			p.Labels[etcdv1alpha1.LabelBackup] = "other"
			return p
		}},
		{name: "the label, on a pod with no controller", pod: func() *corev1.Pod {
			p := jobPod(job, "a", corev1.PodRunning)
			p.OwnerReferences[0].Controller = nil
			return p
		}},
		{name: "the label, on a pod that a ReplicaSet of the Job's name controls", pod: func() *corev1.Pod {
			p := jobPod(job, "a", corev1.PodRunning)
			p.OwnerReferences[0].APIVersion, p.OwnerReferences[0].Kind = "apps/v1", "ReplicaSet"
			return p
		}},
		{name: "the label, on a pod that a Job of another group controls", pod: func() *corev1.Pod {
			p := jobPod(job, "a", corev1.PodRunning)
			p.OwnerReferences[0].APIVersion = "example.com/v1"
			return p
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := backupOfPod(context.Background(), tc.pod())
			if tc.mapped {
				NewWithT(t).Expect(got).To(Equal(want))
			} else {
				NewWithT(t).Expect(got).To(BeEmpty())
			}
		})
	}
}

func TestPodCacheLags(t *testing.T) {
	job := func(succeeded, failed int32, conds ...batchv1.JobConditionType) *batchv1.Job {
		j := &batchv1.Job{Status: batchv1.JobStatus{Succeeded: succeeded, Failed: failed}}
		for _, c := range conds {
			j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue})
		}
		return j
	}
	ended, active := pod("a", time.Minute, corev1.PodSucceeded, nil), pod("b", 0, corev1.PodRunning, nil)
	failed := pod("c", 2*time.Minute, corev1.PodFailed, nil)
	for _, tc := range []struct {
		name string
		job  *batchv1.Job
		pods []corev1.Pod
		lags bool
	}{
		{name: "a running Job, its pod running", job: job(0, 0), pods: []corev1.Pod{active}},
		{name: "a new Job, its pod not cached yet", job: job(0, 0)},
		{name: "a complete Job, its pod ended", job: job(1, 0, batchv1.JobComplete), pods: []corev1.Pod{ended}},
		{name: "a complete Job, its pod still running in the cache", job: job(1, 0, batchv1.JobComplete), pods: []corev1.Pod{active}, lags: true},
		{name: "a complete Job, its pod not in the cache", job: job(1, 0, batchv1.JobComplete), lags: true},
		{name: "a Job that recorded a failure the cache does not show", job: job(0, 1), pods: []corev1.Pod{active}, lags: true},
		{name: "a Job that recorded a failure, and its retry", job: job(0, 1), pods: []corev1.Pod{failed, active}},
		{name: "an uncounted end", job: func() *batchv1.Job {
			j := job(0, 0)
			j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"a"}}
			return j
		}(), pods: []corev1.Pod{active}, lags: true},
		{name: "a failure target, no pod ended in the cache", job: job(0, 0, batchv1.JobFailureTarget), pods: []corev1.Pod{active}, lags: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(podCacheLags(tc.job, tc.pods)).To(Equal(tc.lags))
		})
	}
}

func TestTurnEnded(t *testing.T) {
	backup := func(mutate func(*etcdv1alpha1.EtcdBackup)) *etcdv1alpha1.EtcdBackup {
		b := testBackup(func(s *etcdv1alpha1.EtcdBackupSpec) { s.Verify = ptr.To(false) })
		if mutate != nil {
			mutate(b)
		}
		return b
	}
	complete := func(b *etcdv1alpha1.EtcdBackup) {
		apimeta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: etcdv1alpha1.BackupComplete, Status: metav1.ConditionTrue, Reason: etcdv1alpha1.ReasonBackupWritten})
	}
	deleting := func(b *etcdv1alpha1.EtcdBackup) { b.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }
	started := func(b *etcdv1alpha1.EtcdBackup) { b.Status.StartTime = ptr.To(metav1.NewTime(t0)) }
	for _, tc := range []struct {
		name     string
		old, cur *etcdv1alpha1.EtcdBackup
		want     bool
	}{
		{name: "finishes", old: backup(started), cur: backup(complete), want: true},
		{name: "is being deleted", old: backup(nil), cur: backup(deleting), want: true},
		{name: "starts", old: backup(nil), cur: backup(started)},
		{name: "a finished one is written again", old: backup(complete), cur: backup(complete)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := turnEnded().Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.cur})
			NewWithT(t).Expect(got).To(Equal(tc.want))
		})
	}
	g := NewWithT(t)
	g.Expect(turnEnded().Delete(event.DeleteEvent{Object: backup(nil)})).To(BeTrue(), "gone")
	g.Expect(turnEnded().Create(event.CreateEvent{Object: backup(nil)})).To(BeFalse(), "a new backup frees no turn")
}

// reconcileWith runs one pass over b with cached as the manager's cache
// and the pod cache, and live as the apiserver.
func reconcileWith(t *testing.T, b *etcdv1alpha1.EtcdBackup, cached, live client.Client) ctrl.Result {
	t.Helper()
	r := &BackupReconciler{Client: cached, APIReader: live, Pods: cached, Recorder: events.NewFakeRecorder(10),
		Clock: clocktesting.NewFakeClock(t0), AgentImage: testImage}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return res
}

// TestARunningJobIsNotPolled: while a backup's Job, or a deleted backup's
// delete Job, runs, a pass asks for no requeue: the Job watch and the pod
// watch start the next one. (The envtest suite shows that they do.)
func TestARunningJobIsNotPolled(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := testBackup(nil)
	b.Finalizers = []string{etcdv1alpha1.BackupFinalizer}
	job := backupJob(b, testCluster(false), testImage)
	job.UID = "job-1"
	job.OwnerReferences = []metav1.OwnerReference{{APIVersion: "etcd.tend.dev/v1alpha1", Kind: "EtcdBackup", Name: b.Name, UID: b.UID, Controller: ptr.To(true)}}
	p := jobPod(job, "nightly-backup-a", corev1.PodPending, waiting(stepVerify, "PodInitializing", ""))
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{done(stepBackup, 0, resultJSON(backupOK)), running(stepFetch)}
	cl := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(b, job, p).WithStatusSubresource(b, p).Build()

	g.Expect(reconcileWith(t, b, cl, cl)).To(Equal(ctrl.Result{}), "the backup's Job runs")
	got := &etcdv1alpha1.EtcdBackup{}
	g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
	g.Expect(apimeta.IsStatusConditionTrue(got.Status.Conditions, etcdv1alpha1.BackupComplete)).To(BeTrue())

	// Deleted: the backup's pod has stopped, and the delete Job runs.
	g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
	p.Status.Phase = corev1.PodSucceeded
	g.Expect(cl.Status().Update(ctx, p)).To(Succeed())
	g.Expect(cl.Delete(ctx, got)).To(Succeed())
	dj := deleteJob(b, testImage)
	g.Expect(cl.Create(ctx, dj)).To(Succeed())
	g.Expect(cl.Create(ctx, jobPod(dj, "nightly-delete-a", corev1.PodRunning, running(stepDelete)))).To(Succeed())
	g.Expect(reconcileWith(t, b, cl, cl)).To(Equal(ctrl.Result{}), "the delete Job runs")
	g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
	g.Expect(apimeta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.BackupDeleting).Message).To(ContainSubstring("Job nightly-delete is deleting the file"))
}

// TestALaggingPodCacheIsReadThrough: the Job controller records a pod's
// success that the pod cache does not show yet (the two are watched
// apart). The pass reads the pods live, and finds the backup done rather
// than failed for a Job that completed with no pod reporting.
func TestALaggingPodCacheIsReadThrough(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := testBackup(func(s *etcdv1alpha1.EtcdBackupSpec) { s.Verify = ptr.To(false) })
	b.Finalizers = []string{etcdv1alpha1.BackupFinalizer}
	job := backupJob(b, testCluster(false), testImage)
	job.UID = "job-1"
	job.OwnerReferences = []metav1.OwnerReference{{APIVersion: "etcd.tend.dev/v1alpha1", Kind: "EtcdBackup", Name: b.Name, UID: b.UID, Controller: ptr.To(true)}}
	job.Status = batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue}, {Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}
	cachedPod := jobPod(job, "nightly-backup-a", corev1.PodRunning, running(stepBackup))
	livePod := jobPod(job, "nightly-backup-a", corev1.PodSucceeded, exited(stepBackup, 0, &backupOK))
	cached := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(b, job, cachedPod).WithStatusSubresource(b).Build()
	live := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(b, job, livePod).Build()

	reconcileWith(t, b, cached, live)
	got := &etcdv1alpha1.EtcdBackup{}
	g.Expect(cached.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
	g.Expect(apimeta.IsStatusConditionTrue(got.Status.Conditions, etcdv1alpha1.BackupComplete)).To(BeTrue())
	g.Expect(apimeta.IsStatusConditionTrue(got.Status.Conditions, etcdv1alpha1.BackupFailed)).To(BeFalse())
	g.Expect(got.Status.Artifact).NotTo(BeNil())
}

// TestTheFileWaitsForAPodTheCacheDoesNotShow: a deleted backup's Job was
// stopped, and the pod cache shows none of its pods running, but the
// apiserver has one that the Job made just before: no delete Job is made
// while it may still write the file.
func TestTheFileWaitsForAPodTheCacheDoesNotShow(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	now := metav1.NewTime(t0)
	b := deletedBackup(now)
	job := backupJob(b, testCluster(false), testImage)
	job.UID = "job-1"
	cached := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(b).WithStatusSubresource(b).Build()
	live := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(b, jobPod(job, "nightly-backup-a", corev1.PodRunning, running(stepBackup))).Build()

	res := reconcileWith(t, b, cached, live)
	g.Expect(res).To(Equal(ctrl.Result{}), "the pod's arrival in the cache, and its end, start the next pass")
	var jobs batchv1.JobList
	g.Expect(cached.List(ctx, &jobs)).To(Succeed())
	g.Expect(jobs.Items).To(BeEmpty(), "no delete Job while a pod may write the file")
	got := &etcdv1alpha1.EtcdBackup{}
	g.Expect(cached.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
	g.Expect(apimeta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.BackupDeleting).Reason).To(Equal(etcdv1alpha1.ReasonStoppingBackup))

	// A pod that lost its Job (deleted with --cascade=orphan) is watched
	// by no mapping: it is looked at again.
	orphan := jobPod(job, "nightly-backup-b", corev1.PodRunning, running(stepBackup))
	orphan.OwnerReferences = nil
	g.Expect(cached.Create(ctx, orphan)).To(Succeed())
	g.Expect(reconcileWith(t, b, cached, live).RequeueAfter).To(Equal(requeueWaiting))
}
