package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
)

// fakeArchives are `tend archive` agents faked at their /status boundary,
// by pod IP.
type fakeArchives struct {
	mu     sync.Mutex
	states map[string]agentapi.ArchiveState
}

func (f *fakeArchives) state(ctx context.Context, podIP string) (agentapi.ArchiveState, error) {
	if _, ok := ctx.Deadline(); !ok {
		return agentapi.ArchiveState{}, errors.New("reading an archive's state without a deadline")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.states[podIP]
	if !ok {
		return st, fmt.Errorf("dial tcp %s:8080: connect: connection refused", podIP)
	}
	return st, nil
}

func (f *fakeArchives) set(podIP string, st agentapi.ArchiveState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.states[podIP] = st
}

// finishBackup plays the etcdbackup controller: b is Complete and
// Verified at rev.
func finishBackup(g Gomega, b *etcdv1alpha1.EtcdBackup, rev int64) {
	now := metav1.Now()
	b.Status.CompletionTime = &now
	b.Status.Snapshot = &etcdv1alpha1.SnapshotInfo{Member: "roll-0", Revision: rev}
	for _, t := range []string{etcdv1alpha1.BackupComplete, etcdv1alpha1.BackupVerified} {
		apimeta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: "Test", Message: "test"})
	}
	g.Expect(env.Client.Status().Update(context.Background(), b)).To(Succeed())
}

// runArchivePod plays the Deployment controller: a running pod of the
// archive at ip.
func runArchivePod(g Gomega, c *etcdv1alpha1.EtcdCluster, dep *appsv1.Deployment, ip string) {
	ctx := context.Background()
	t := dep.Spec.Template
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: dep.Name + "-0", Labels: t.Labels}, Spec: *t.Spec.DeepCopy()}
	g.Expect(env.Client.Create(ctx, pod)).To(Succeed())
	pod.Status.Phase, pod.Status.PodIP = corev1.PodRunning, ip
	g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
}

// TestArchiveRunsFromABaseAndReportsItsWindow: spec.archive takes a base
// backup, runs the agent's Deployment from its revision once it is done,
// reports the window the agent reads out, starts again from a new base
// when the agent finds the history compacted past it, and goes away with
// spec.archive, leaving the segments.
func TestArchiveRunsFromABaseAndReportsItsWindow(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s3 := &etcdv1alpha1.S3Location{Bucket: "backups", Prefix: "etcd/", Endpoint: "http://s3.test:9000", ForcePathStyle: true,
		CredentialsSecretRef: &corev1.LocalObjectReference{Name: "s3-credentials"}}
	c, _ := startRollCluster(t, g, "v3.6.16", func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Backup = &etcdv1alpha1.ClusterBackup{Destination: etcdv1alpha1.BackupDestination{S3: s3}}
		s.Archive = &etcdv1alpha1.ClusterArchive{Destination: etcdv1alpha1.BackupDestination{S3: s3}}
	})
	base := &etcdv1alpha1.EtcdBackup{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "roll-archive-base-0"}, base)).To(Succeed())
		got := getCluster(g, c)
		cond := condition(got, etcdv1alpha1.ConditionContinuousArchiving)
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(etcdv1alpha1.ReasonWaitingForBaseBackup))
		g.Expect(got.Status.Archive.Location).To(Equal(fmt.Sprintf("s3://backups/etcd/%s/roll/archive-%s", c.Namespace, c.UID)))
	}, wait).Should(Succeed())
	ownedBy(g, base, c)
	g.Expect(base.Annotations).To(HaveKeyWithValue(etcdv1alpha1.AnnotationKeepArtifact, "true"), "the segments need their base after the cluster")
	g.Expect(base.Spec.Destination.S3).To(Equal(s3))
	finishBackup(g, base, 4321)

	dep := &appsv1.Deployment{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "roll-archive"}, dep)).To(Succeed())
	}, wait).Should(Succeed())
	ownedBy(g, dep, c)
	g.Expect(dep.Spec.Strategy.Type).To(Equal(appsv1.RecreateDeploymentStrategyType), "two agents never write at once")
	g.Expect(dep.Spec.Replicas).To(Equal(ptr.To[int32](1)))
	pod := dep.Spec.Template
	g.Expect(pod.Labels).NotTo(HaveKey(LabelCluster), "the member pod cache, Services and budget never take it")
	g.Expect(pod.Spec.AutomountServiceAccountToken).To(Equal(ptr.To(false)))
	g.Expect(pod.Spec.Containers[0].Command).To(ContainElements(
		"archive", "--base-revision=4321", "--owner="+string(c.UID), "--compression=Zstd", "--segment-max-age=10s",
		fmt.Sprintf("--to=s3://backups/etcd/%s/roll/archive-%s", c.Namespace, c.UID), "--s3-endpoint=http://s3.test:9000", "--s3-force-path-style",
	))
	g.Expect(pod.Spec.Containers[0].Env).To(ContainElement(HaveField("Name", "AWS_SECRET_ACCESS_KEY")))

	runArchivePod(g, c, dep, "10.9.1.7")
	at := time.Date(2026, 11, 28, 14, 3, 0, 0, time.UTC)
	archives.set("10.9.1.7", agentapi.ArchiveState{
		Phase: agentapi.ArchiveArchiving, Owner: string(c.UID), BaseRevision: 4321, FirstRevision: 4322, FirstTime: at, LastRevision: 5000, LastTime: at.Add(time.Minute), Segments: 7,
	})
	poke(g, c)
	g.Eventually(func(g Gomega) {
		got := getCluster(g, c)
		cond := condition(got, etcdv1alpha1.ConditionContinuousArchiving)
		g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), cond.Message)
		g.Expect(cond.Reason).To(Equal(etcdv1alpha1.ReasonArchiving))
		g.Expect(got.Status.Archive).To(SatisfyAll(
			HaveField("BaseBackup", "roll-archive-base-0"), HaveField("BaseRevision", int64(4321)),
			HaveField("FirstRevision", int64(4322)), HaveField("LastRevision", int64(5000)), HaveField("Segments", int32(7)),
			HaveField("LastTime.Time", BeTemporally("==", at.Add(time.Minute))),
		))
	}, wait).Should(Succeed())

	// The agent finds the history compacted past its next revision: a new
	// base, and the Deployment follows it.
	archives.set("10.9.1.7", agentapi.ArchiveState{Phase: agentapi.ArchiveBroken, Cause: agentapi.ArchiveCauseCompacted, Owner: string(c.UID),
		Message: "etcd compacted its history past revision 5001", BaseRevision: 4321, LastRevision: 5000})
	poke(g, c)
	next := &etcdv1alpha1.EtcdBackup{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "roll-archive-base-1"}, next)).To(Succeed())
		got := getCluster(g, c)
		g.Expect(got.Status.Archive.Epoch).To(BeEquivalentTo(1))
		g.Expect(condition(got, etcdv1alpha1.ConditionContinuousArchiving).Reason).To(Equal(etcdv1alpha1.ReasonWaitingForBaseBackup))
	}, wait).Should(Succeed())
	g.Expect(eventReasons(g, c)).To(ContainElement("ArchiveBroken"))
	finishBackup(g, next, 9000)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(dep), dep)).To(Succeed())
		g.Expect(dep.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--base-revision=9000"))
	}, wait).Should(Succeed())

	// spec.archive goes: so do the Deployment, the status and the condition.
	patchSpec(g, c, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Archive = nil })
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(dep), dep)
		g.Expect(apierrors.IsNotFound(err) || dep.DeletionTimestamp != nil).To(BeTrue())
		got := getCluster(g, c)
		g.Expect(got.Status.Archive).To(BeNil())
		g.Expect(slices.ContainsFunc(got.Status.Conditions, func(c metav1.Condition) bool {
			return c.Type == etcdv1alpha1.ConditionContinuousArchiving
		})).To(BeFalse())
	}, wait).Should(Succeed())
}

// TestArchiveLeavesSomeoneElsesDeploymentAlone: a Deployment of the
// archive's name that Tend did not make is reported, never changed.
func TestArchiveLeavesSomeoneElsesDeploymentAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	labels := map[string]string{"app": "mine"}
	mine := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "roll-archive"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}},
	}
	g.Expect(env.Client.Create(ctx, mine)).To(Succeed())
	s3 := &etcdv1alpha1.S3Location{Bucket: "backups"}
	c, _ := startRollClusterIn(g, ns, "v3.6.16", func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Backup = &etcdv1alpha1.ClusterBackup{Destination: etcdv1alpha1.BackupDestination{S3: s3}}
		s.Archive = &etcdv1alpha1.ClusterArchive{Destination: etcdv1alpha1.BackupDestination{S3: s3}}
	})
	g.Eventually(func(g Gomega) {
		cond := condition(getCluster(g, c), etcdv1alpha1.ConditionContinuousArchiving)
		g.Expect(cond.Reason).To(Equal(etcdv1alpha1.ReasonArchiveBroken))
		g.Expect(cond.Message).To(ContainSubstring("Deployment roll-archive exists but is not"))
	}, wait).Should(Succeed())
	got := &appsv1.Deployment{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mine), got)).To(Succeed())
	g.Expect(got.Spec.Template.Spec.Containers[0].Image).To(Equal("busybox"))
	g.Expect(got.OwnerReferences).To(BeEmpty())
}
