package etcdbackup

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
)

const wait = 20 * time.Second

// newCluster creates an EtcdCluster and its connection ConfigMap, and
// writes its Available condition, as the EtcdCluster controller would.
func newCluster(t *testing.T, ns, name string, available, auth bool) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	c.Spec.Auth.Enabled = auth
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-connection"},
		Data:       map[string]string{"endpoints": "https://" + name + "-0:2379"},
	})).To(Succeed())
	setAvailable(t, c, available)
	return c
}

// setAvailable writes c's Available condition.
func setAvailable(t *testing.T, c *etcdv1alpha1.EtcdCluster, available bool) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(c), c)).To(Succeed())
	cond := metav1.Condition{Type: etcdv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: etcdv1alpha1.ReasonQuorumHealthy, Message: "3 of 3 voting members are healthy"}
	if !available {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, etcdv1alpha1.ReasonQuorumLost, "1 of 3 voting members are healthy"
	}
	apimeta.SetStatusCondition(&c.Status.Conditions, cond)
	g.Expect(env.Client.Status().Update(context.Background(), c)).To(Succeed())
}

func newBackup(t *testing.T, ns, name, cluster string, mutate func(*etcdv1alpha1.EtcdBackupSpec)) *etcdv1alpha1.EtcdBackup {
	t.Helper()
	b := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: etcdv1alpha1.EtcdBackupSpec{
			ClusterRef: etcdv1alpha1.ClusterReference{Name: cluster},
			BackupOptions: etcdv1alpha1.BackupOptions{Destination: etcdv1alpha1.BackupDestination{
				S3: &etcdv1alpha1.S3Location{Bucket: "backups", Prefix: "etcd/", CredentialsSecretRef: &corev1.LocalObjectReference{Name: "s3"}},
			}},
		},
	}
	if mutate != nil {
		mutate(&b.Spec)
	}
	NewWithT(t).Expect(env.Client.Create(context.Background(), b)).To(Succeed())
	return b
}

func getBackup(g Gomega, b *etcdv1alpha1.EtcdBackup) *etcdv1alpha1.EtcdBackup {
	got := &etcdv1alpha1.EtcdBackup{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(b), got)).To(Succeed())
	return got
}

func backupCondition(b *etcdv1alpha1.EtcdBackup, t string) metav1.Condition {
	if c := apimeta.FindStatusCondition(b.Status.Conditions, t); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func getJob(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	NewWithT(t).Eventually(func() error {
		return env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, job)
	}, wait).Should(Succeed(), "Job %s", name)
	return job
}

// runPod plays the kubelet: it creates a pod of job as the Job
// controller would, and writes the steps' statuses.
func runPod(t *testing.T, job *batchv1.Job, name string, phase corev1.PodPhase, init []corev1.ContainerStatus, main ...corev1.ContainerStatus) *corev1.Pod {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	labels := map[string]string{batchv1.JobNameLabel: job.Name}
	for k, v := range job.Spec.Template.Labels {
		labels[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: job.Namespace, Name: name, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}},
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	g.Expect(env.Client.Create(ctx, pod)).To(Succeed())
	setPodStatus(t, pod, phase, init, main...)
	return pod
}

// setPodStatus writes the pod's status, as the kubelet does.
func setPodStatus(t *testing.T, pod *corev1.Pod, phase corev1.PodPhase, init []corev1.ContainerStatus, main ...corev1.ContainerStatus) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	fill := func(cs []corev1.ContainerStatus, spec []corev1.Container) []corev1.ContainerStatus {
		out := make([]corev1.ContainerStatus, len(cs))
		for i, s := range cs {
			for _, c := range spec {
				if c.Name == s.Name {
					s.Image = c.Image
				}
			}
			if s.State.Terminated != nil && s.State.Terminated.FinishedAt.IsZero() {
				s.State.Terminated.FinishedAt = metav1.Now()
			}
			out[i] = s
		}
		return out
	}
	pod.Status = corev1.PodStatus{
		Phase:                 phase,
		InitContainerStatuses: fill(init, pod.Spec.InitContainers),
		ContainerStatuses:     fill(main, pod.Spec.Containers),
	}
	g.Expect(env.Client.Status().Update(context.Background(), pod)).To(Succeed())
}

// exited is a step that stopped with code and the agent's result r (nil
// for a step that writes none).
func exited(name string, code int32, r *agentapi.Result) corev1.ContainerStatus {
	msg := ""
	if r != nil {
		msg = resultJSON(*r)
	}
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}}
}

// eventReasons lists the reasons of the Events about obj.
func eventReasons(g Gomega, obj client.Object) []string {
	var list eventsv1.EventList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(obj.GetNamespace()))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == obj.GetName() && e.Regarding.UID == obj.GetUID() {
			out = append(out, e.Reason)
		}
	}
	return out
}

func TestBackupCompletesThenVerifies(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	newCluster(t, ns, "kv", true, true)
	b := newBackup(t, ns, "first", "kv", nil)

	job := getJob(t, ns, "first-backup")
	g.Expect(metav1.IsControlledBy(job, b)).To(BeTrue())
	g.Expect(job.Labels).To(HaveKeyWithValue(etcdv1alpha1.LabelBackupCluster, "kv"))
	spec := job.Spec.Template.Spec
	g.Expect(containerNames(spec.InitContainers)).To(Equal([]string{"backup", "fetch", "restore", "etcd"}))
	g.Expect(containerNames(spec.Containers)).To(Equal([]string{"verify"}))
	g.Expect(spec.InitContainers[0].Args).To(ContainElements("--to=s3://backups/etcd/"+ns+"/first.db", "--owner="+string(b.UID)))
	g.Expect(spec.Containers[0].Env).To(ContainElement(HaveField("Name", "ETCD_ROOT_PASSWORD")), "the cluster has auth on")
	g.Expect(getBackup(g, b).Finalizers).To(ContainElement(etcdv1alpha1.BackupFinalizer), "artifactPolicy Delete guards the file")
	g.Eventually(func(g Gomega) {
		got := getBackup(g, b)
		g.Expect(got.Status.Phase).To(Equal(etcdv1alpha1.BackupPhaseRunning))
		g.Expect(got.Status.JobName).To(Equal("first-backup"))
		g.Expect(got.Status.StartTime).NotTo(BeNil())
		g.Expect(backupCondition(got, etcdv1alpha1.BackupVerified).Status).To(Equal(metav1.ConditionUnknown))
		g.Expect(backupCondition(got, etcdv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(backupCondition(got, etcdv1alpha1.ConditionReconciling).Reason).To(Equal(etcdv1alpha1.ReasonBackupRunning))
		g.Expect(kstatusOf(g, got)).To(Equal(kstatus.InProgressStatus))
	}, wait).Should(Succeed())

	// The backup step wrote the file; the test restore runs. The pod
	// changes, not the Job: the pod watch starts the pass (a running Job
	// is not polled: TestARunningJobIsNotPolled).
	pod := runPod(t, job, "first-backup-a", corev1.PodPending,
		[]corev1.ContainerStatus{exited("backup", 0, &backupOK), running("fetch"), waiting("restore", "PodInitializing", ""), waiting("etcd", "PodInitializing", "")},
		waiting("verify", "PodInitializing", ""))
	g.Eventually(func(g Gomega) {
		got := getBackup(g, b)
		g.Expect(backupCondition(got, etcdv1alpha1.BackupComplete).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(backupCondition(got, etcdv1alpha1.BackupVerified).Reason).To(Equal(etcdv1alpha1.ReasonVerifying))
		g.Expect(backupCondition(got, etcdv1alpha1.ConditionReconciling).Reason).To(Equal(etcdv1alpha1.ReasonVerifying),
			"Complete is not Ready while the test restore runs")
		g.Expect(got.Status.Phase).To(Equal(etcdv1alpha1.BackupPhaseVerifying))
		g.Expect(got.Status.Artifact).To(Equal(&etcdv1alpha1.Artifact{URI: "s3://backups/etcd/" + ns + "/first.db", SizeBytes: 10, SHA256: "abc", Compression: "None"}))
		g.Expect(got.Status.Snapshot.Revision).To(Equal(int64(41)))
		g.Expect(got.Status.CompletionTime).NotTo(BeNil())
	}, wait).Should(Succeed())

	// The restored store matches the live cluster: again only the pod's
	// status changes.
	setPodStatus(t, pod, corev1.PodSucceeded,
		[]corev1.ContainerStatus{exited("backup", 0, &backupOK), exited("fetch", 0, &agentapi.Result{Op: "fetch"}), exited("restore", 0, nil), exited("etcd", 0, nil)},
		exited("verify", 0, &verifyOK))
	g.Eventually(func(g Gomega) {
		got := getBackup(g, b)
		g.Expect(backupCondition(got, etcdv1alpha1.BackupVerified).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(backupCondition(got, etcdv1alpha1.BackupFailed).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(got.Status.Phase).To(Equal(etcdv1alpha1.BackupPhaseVerified))
		g.Expect(got.Status.Snapshot.Revision).To(Equal(int64(42)), "the verified exact revision")
		g.Expect(got.Status.Snapshot.HashKV).To(Equal(ptr.To[int64](99)))
		g.Expect(got.Status.Verification.HashMatches).To(BeTrue())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		ready := backupCondition(got, etcdv1alpha1.ConditionReady)
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(ready.Reason).To(Equal(etcdv1alpha1.ReasonHashMatches))
		g.Expect(backupCondition(got, etcdv1alpha1.ConditionReconciling).Type).To(BeEmpty())
		g.Expect(kstatusOf(g, got)).To(Equal(kstatus.CurrentStatus))
	}, wait).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(eventReasons(g, b)).To(ContainElements("JobCreated", "Completed", "Verified"))
	}, wait).Should(Succeed())
}

func TestFailedVerification(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	newCluster(t, ns, "kv", true, false)
	b := newBackup(t, ns, "bad", "kv", nil)
	job := getJob(t, ns, "bad-backup")
	g.Expect(job.Spec.Template.Spec.Containers[0].Env).To(BeEmpty(), "no root password without auth")
	runPod(t, job, "bad-backup-a", corev1.PodFailed,
		[]corev1.ContainerStatus{exited("backup", 0, &backupOK), exited("fetch", 0, &agentapi.Result{Op: "fetch"}), exited("restore", 0, nil), exited("etcd", 0, nil)},
		exited("verify", 2, &verifyBad))
	g.Eventually(func(g Gomega) {
		got := getBackup(g, b)
		g.Expect(backupCondition(got, etcdv1alpha1.BackupComplete).Status).To(Equal(metav1.ConditionTrue), "the file was written")
		v := backupCondition(got, etcdv1alpha1.BackupVerified)
		g.Expect(v.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(v.Reason).To(Equal(etcdv1alpha1.ReasonHashMismatch))
		g.Expect(v.Message).To(ContainSubstring("7 keys and hash 98, where the cluster has 7 keys and hash 99"))
		f := backupCondition(got, etcdv1alpha1.BackupFailed)
		g.Expect(f.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(f.Message).To(ContainSubstring("do not restore from it"))
		g.Expect(got.Status.Phase).To(Equal(etcdv1alpha1.BackupPhaseFailed))
		g.Expect(backupCondition(got, etcdv1alpha1.ConditionStalled).Reason).To(Equal(etcdv1alpha1.ReasonHashMismatch))
		g.Expect(backupCondition(got, etcdv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(kstatusOf(g, got)).To(Equal(kstatus.FailedStatus))
	}, wait).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(eventReasons(g, b)).To(ContainElements("VerificationFailed", "Failed"))
	}, wait).Should(Succeed())
}

func TestFailedBackupSaysWhy(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	newCluster(t, ns, "kv", true, false)
	b := newBackup(t, ns, "refused", "kv", func(s *etcdv1alpha1.EtcdBackupSpec) { s.Verify = ptr.To(false) })
	job := getJob(t, ns, "refused-backup")
	runPod(t, job, "refused-backup-a", corev1.PodFailed, nil,
		exited("backup", 2, &agentapi.Result{Op: "backup", Error: "s3://backups/etcd/x.db was written by another owner", Terminal: true}))
	g.Eventually(func(g Gomega) {
		got := getBackup(g, b)
		f := backupCondition(got, etcdv1alpha1.BackupFailed)
		g.Expect(f.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(f.Reason).To(Equal(etcdv1alpha1.ReasonBackupFailed))
		g.Expect(f.Message).To(ContainSubstring("Step backup of pod refused-backup-a failed: s3://backups/etcd/x.db was written by another owner"))
		g.Expect(f.Message).To(ContainSubstring("kubectl logs -n " + ns + " job/refused-backup"))
		g.Expect(backupCondition(got, etcdv1alpha1.BackupVerified).Type).To(BeEmpty(), "no Verified condition without verification")
	}, wait).Should(Succeed())
}

func TestBackupWaitsForItsCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	b := newBackup(t, ns, "early", "kv", nil)
	g.Eventually(func(g Gomega) {
		c := backupCondition(getBackup(g, b), etcdv1alpha1.BackupComplete)
		g.Expect(c.Reason).To(Equal(etcdv1alpha1.ReasonClusterNotFound))
		g.Expect(c.Message).To(ContainSubstring("Waiting for EtcdCluster kv, which does not exist"))
	}, wait).Should(Succeed())

	c := newCluster(t, ns, "kv", false, false)
	g.Eventually(func(g Gomega) {
		got := getBackup(g, b)
		cond := backupCondition(got, etcdv1alpha1.BackupComplete)
		g.Expect(cond.Reason).To(Equal(etcdv1alpha1.ReasonClusterNotAvailable))
		g.Expect(cond.Message).To(ContainSubstring("Waiting for EtcdCluster kv to be Available (Available is False, QuorumLost: 1 of 3 voting members are healthy)"))
		g.Expect(got.Status.Phase).To(Equal(etcdv1alpha1.BackupPhasePending))
	}, wait).Should(Succeed())
	g.Consistently(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "early-backup"}, &batchv1.Job{}))
	}, 2*time.Second).Should(BeTrue(), "no Job while the cluster is not Available")

	// The cluster's becoming Available wakes the backup at once, well
	// before its 30s requeue.
	setAvailable(t, c, true)
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "early-backup"}, &batchv1.Job{})
	}, requeueWaiting/3).Should(Succeed())
}

func TestOneBackupAtATimePerCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	newCluster(t, ns, "kv", true, false)
	newCluster(t, ns, "other", true, false)
	noVerify := func(s *etcdv1alpha1.EtcdBackupSpec) { s.Verify = ptr.To(false) }
	first := newBackup(t, ns, "one", "kv", noVerify)
	second := newBackup(t, ns, "two", "kv", noVerify)
	newBackup(t, ns, "three", "other", noVerify)

	// Exactly one of the two runs; which one depends on the creation
	// second. The other says whom it waits for.
	var running, waitingB *etcdv1alpha1.EtcdBackup
	g.Eventually(func(g Gomega) {
		var jobs batchv1.JobList
		g.Expect(env.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{etcdv1alpha1.LabelBackupCluster: "kv"})).To(Succeed())
		g.Expect(jobs.Items).To(HaveLen(1))
		running, waitingB = first, second
		if jobs.Items[0].Name == "two-backup" {
			running, waitingB = second, first
		}
		c := backupCondition(getBackup(g, waitingB), etcdv1alpha1.BackupComplete)
		g.Expect(c.Reason).To(Equal(etcdv1alpha1.ReasonWaitingForOtherBackup))
		g.Expect(c.Message).To(ContainSubstring("EtcdBackup " + running.Name))
	}, wait).Should(Succeed())
	getJob(t, ns, "three-backup") // another cluster's backup does not wait
	g.Consistently(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: waitingB.Name + "-backup"}, &batchv1.Job{}))
	}, time.Second).Should(BeTrue())

	// The running backup finishes. No Job controller runs here, so its
	// Job never ends: its finishing (turnEnded) starts the waiting one,
	// which asks for no requeue.
	runPod(t, getJob(t, ns, running.Name+"-backup"), running.Name+"-a", corev1.PodSucceeded, nil, exited("backup", 0, &backupOK))
	job := getJob(t, ns, waitingB.Name+"-backup")
	g.Expect(metav1.IsControlledBy(job, waitingB)).To(BeTrue())
	g.Expect(backupCondition(getBackup(g, running), etcdv1alpha1.BackupComplete).Status).To(Equal(metav1.ConditionTrue))
}

func TestDeleteRunsTheDeleteJobThenLetsGo(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	newCluster(t, ns, "kv", true, false)
	b := newBackup(t, ns, "gone", "kv", func(s *etcdv1alpha1.EtcdBackupSpec) {
		s.Verify = ptr.To(false)
		s.Destination = etcdv1alpha1.BackupDestination{Volume: &etcdv1alpha1.VolumeLocation{ClaimName: "backups", Path: "kv"}}
	})
	runPod(t, getJob(t, ns, "gone-backup"), "gone-backup-a", corev1.PodSucceeded, nil, exited("backup", 0, &backupOK))
	g.Eventually(func(g Gomega) {
		g.Expect(getBackup(g, b).Status.Phase).To(Equal(etcdv1alpha1.BackupPhaseComplete))
	}, wait).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, b)).To(Succeed())
	dj := getJob(t, ns, "gone-delete")
	g.Expect(dj.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"artifact", "delete", "--uri=file:///backup/kv/gone.db", "--owner=" + string(b.UID)}))
	g.Eventually(func(g Gomega) {
		got := getBackup(g, b)
		d := backupCondition(got, etcdv1alpha1.BackupDeleting)
		g.Expect(d.Reason).To(Equal(etcdv1alpha1.ReasonDeletingArtifact))
		g.Expect(d.Message).To(ContainSubstring("Job gone-delete is deleting the file pvc://backups/kv/gone.db"))
		g.Expect(got.Status.Phase).To(Equal(etcdv1alpha1.BackupPhaseDeleting))
	}, wait).Should(Succeed())

	runPod(t, dj, "gone-delete-a", corev1.PodSucceeded, nil, exited("delete", 0, &agentapi.Result{Op: "delete"}))
	g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(b), b)) }, wait).Should(BeTrue())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(dj), &batchv1.Job{}))
	}, wait).Should(BeTrue(), "the delete Job is cleaned up")
}

func TestDeletingARunningBackupStopsItFirst(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	newCluster(t, ns, "kv", true, false)
	b := newBackup(t, ns, "busy", "kv", nil)
	job := getJob(t, ns, "busy-backup")
	pod := runPod(t, job, "busy-backup-a", corev1.PodPending, []corev1.ContainerStatus{running("backup")})
	g.Eventually(func(g Gomega) { g.Expect(getBackup(g, b).Status.StartTime).NotTo(BeNil()) }, wait).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, b)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}))
	}, wait).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		d := backupCondition(getBackup(g, b), etcdv1alpha1.BackupDeleting)
		g.Expect(d.Reason).To(Equal(etcdv1alpha1.ReasonStoppingBackup))
		g.Expect(d.Message).To(ContainSubstring("Waiting for pod busy-backup-a of the backup to stop"))
	}, wait).Should(Succeed())
	g.Consistently(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "busy-delete"}, &batchv1.Job{}))
	}, time.Second).Should(BeTrue(), "nothing deletes the file while a pod may still write it")

	// The garbage collector's part: the orphaned pod goes. The pod watch
	// starts the pass that makes the delete Job.
	g.Expect(env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
	getJob(t, ns, "busy-delete")
}

func TestFailedDeletionAndTheWayOut(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	newCluster(t, ns, "kv", true, false)
	b := newBackup(t, ns, "stuck", "kv", func(s *etcdv1alpha1.EtcdBackupSpec) { s.Verify = ptr.To(false) })
	runPod(t, getJob(t, ns, "stuck-backup"), "stuck-backup-a", corev1.PodSucceeded, nil, exited("backup", 0, &backupOK))
	g.Eventually(func(g Gomega) { g.Expect(getBackup(g, b).Status.Phase).To(Equal(etcdv1alpha1.BackupPhaseComplete)) }, wait).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, b)).To(Succeed())
	runPod(t, getJob(t, ns, "stuck-delete"), "stuck-delete-a", corev1.PodFailed, nil,
		exited("delete", 2, &agentapi.Result{Op: "delete", Error: "AccessDenied: the credentials may not delete objects", Terminal: true}))
	g.Eventually(func(g Gomega) {
		d := backupCondition(getBackup(g, b), etcdv1alpha1.BackupDeleting)
		g.Expect(d.Reason).To(Equal(etcdv1alpha1.ReasonArtifactDeletionFailed))
		g.Expect(d.Message).To(ContainSubstring("AccessDenied: the credentials may not delete objects"))
		g.Expect(d.Message).To(ContainSubstring(`set the annotation etcd.tend.dev/keep-artifact: "true" to keep the file`))
	}, wait).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(eventReasons(g, b)).To(ContainElement("ArtifactDeletionFailed")) }, wait).Should(Succeed())

	patch := client.MergeFrom(getBackup(g, b))
	kept := getBackup(g, b)
	kept.Annotations = map[string]string{etcdv1alpha1.AnnotationKeepArtifact: "true"}
	g.Expect(env.Client.Patch(ctx, kept, patch)).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(b), b)) }, wait).Should(BeTrue())
}

func TestRetainLetsGoAtOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	newCluster(t, ns, "kv", true, false)
	b := newBackup(t, ns, "kept", "kv", func(s *etcdv1alpha1.EtcdBackupSpec) {
		s.ArtifactPolicy = etcdv1alpha1.ArtifactRetain
		s.Verify = ptr.To(false)
	})
	runPod(t, getJob(t, ns, "kept-backup"), "kept-backup-a", corev1.PodSucceeded, nil, exited("backup", 0, &backupOK))
	g.Eventually(func(g Gomega) { g.Expect(getBackup(g, b).Status.Phase).To(Equal(etcdv1alpha1.BackupPhaseComplete)) }, wait).Should(Succeed())
	g.Expect(getBackup(g, b).Finalizers).To(BeEmpty())
	g.Expect(env.Client.Delete(ctx, b)).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(b), b)) }, wait).Should(BeTrue())
	g.Consistently(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kept-delete"}, &batchv1.Job{}))
	}, time.Second).Should(BeTrue())
}

func TestDeletingABackupThatNeverRanLetsGoAtOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	b := newBackup(t, ns, "never", "missing", nil)
	g.Eventually(func(g Gomega) {
		got := getBackup(g, b)
		g.Expect(got.Finalizers).To(ContainElement(etcdv1alpha1.BackupFinalizer))
		g.Expect(backupCondition(got, etcdv1alpha1.BackupComplete).Reason).To(Equal(etcdv1alpha1.ReasonClusterNotFound))
	}, wait).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, b)).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(b), b)) }, wait).Should(BeTrue())
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "never-delete"}, &batchv1.Job{}))).To(BeTrue(),
		"no file was written, so there is none to delete")
}

// TestARestoreHoldsTheBackupAndItsFile: a backup that a cluster's restore
// reads (its restore finalizer) keeps its file while deleted, until the
// restore lets it go; a finalizer of a cluster that is gone is dropped.
func TestARestoreHoldsTheBackupAndItsFile(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		cluster func(c *etcdv1alpha1.EtcdCluster) types.UID
		held    bool
	}{
		{name: "by a cluster that restores from it", cluster: func(c *etcdv1alpha1.EtcdCluster) types.UID { return c.UID }, held: true},
		{name: "by a cluster that is gone", cluster: func(*etcdv1alpha1.EtcdCluster) types.UID { return "a-deleted-clusters-uid" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := env.Namespace(t)
			c := newCluster(t, ns, "kv", true, false)
			b := newBackup(t, ns, "held", "kv", func(s *etcdv1alpha1.EtcdBackupSpec) {
				s.Verify = ptr.To(false)
				s.Destination = etcdv1alpha1.BackupDestination{Volume: &etcdv1alpha1.VolumeLocation{ClaimName: "backups", Path: "kv"}}
			})
			runPod(t, getJob(t, ns, "held-backup"), "held-backup-a", corev1.PodSucceeded, nil, exited("backup", 0, &backupOK))
			g.Eventually(func(g Gomega) {
				g.Expect(getBackup(g, b).Status.Phase).To(Equal(etcdv1alpha1.BackupPhaseComplete))
			}, wait).Should(Succeed())
			restore := etcdv1alpha1.RestoreFinalizer(tc.cluster(c))
			got := getBackup(g, b)
			patch := client.MergeFrom(got.DeepCopy())
			got.Finalizers = append(got.Finalizers, restore)
			g.Expect(env.Client.Patch(ctx, got, patch)).To(Succeed())

			g.Expect(env.Client.Delete(ctx, b)).To(Succeed())
			if !tc.held {
				getJob(t, ns, "held-delete") // the file goes at once
				g.Eventually(func(g Gomega) { g.Expect(getBackup(g, b).Finalizers).NotTo(ContainElement(restore)) }, wait).Should(Succeed())
				return
			}
			g.Eventually(func(g Gomega) {
				d := backupCondition(getBackup(g, b), etcdv1alpha1.BackupDeleting)
				g.Expect(d.Reason).To(Equal(etcdv1alpha1.ReasonInUseByRestore))
				g.Expect(d.Message).To(ContainSubstring("EtcdCluster kv restores from this backup"))
			}, wait).Should(Succeed())
			g.Consistently(func() bool {
				return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "held-delete"}, &batchv1.Job{}))
			}, 2*time.Second).Should(BeTrue(), "no file is deleted while the restore reads it")

			// The restore is done.
			got = getBackup(g, b)
			patch = client.MergeFrom(got.DeepCopy())
			controllerutil.RemoveFinalizer(got, restore)
			g.Expect(env.Client.Patch(ctx, got, patch)).To(Succeed())
			getJob(t, ns, "held-delete")
		})
	}
}
