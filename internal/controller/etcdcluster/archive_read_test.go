package etcdcluster

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/scheme"
)

// countedReader counts the reads that reach the apiserver.
type countedReader struct {
	client.Reader
	reads int
}

func (r *countedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.reads++
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r *countedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.reads++
	return r.Reader.List(ctx, list, opts...)
}

// TestArchiveAtRestReadsNoPods: a pass of an archived cluster at rest asks
// the agent that answered last and lists no pods; a changed Deployment, an
// agent that does not answer, or an address that another cluster's agent
// took over sends it back to the pod list.
func TestArchiveAtRestReadsNoPods(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	c := testCluster(func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Archive = &etcdv1alpha1.ClusterArchive{Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "bk", Prefix: "wal/"}}}
		s.Backup = &etcdv1alpha1.ClusterBackup{Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "bk", Prefix: "snaps/"}}}
	})
	verified := metav1.NewTime(now.Add(-time.Hour))
	c.Status.Archive = &etcdv1alpha1.ArchiveStatus{BaseBackup: "main-archive-base-0", BaseRevision: 100, LastRevision: 900,
		Verification: &etcdv1alpha1.ArchiveVerificationStatus{Time: &verified, Result: etcdv1alpha1.ReasonArchiveMatches}}

	base := archiveBaseBackup(c, 0, 0)
	g.Expect(controllerutil.SetControllerReference(c, base, scheme.Scheme)).To(Succeed())
	done := metav1.NewTime(now.Add(-2 * time.Hour))
	base.Status.CompletionTime = &done
	base.Status.Snapshot = &etcdv1alpha1.SnapshotInfo{Member: "main-0", Revision: 100}
	for _, typ := range []string{etcdv1alpha1.BackupComplete, etcdv1alpha1.BackupVerified} {
		apimeta.SetStatusCondition(&base.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "Test"})
	}
	dep := archiveDeployment(c, 100, 0, "tend:test", true)
	g.Expect(controllerutil.SetControllerReference(c, dep, scheme.Scheme)).To(Succeed())
	dep.Generation = 1
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "main-archive-x", Labels: archivePodLabels(c)},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.9.1.7"},
	}
	cached := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(c, base, dep).Build()
	live := &countedReader{Reader: fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(pod).Build()}

	answers := map[string]agentapi.ArchiveState{}
	asked := 0
	r := &Reconciler{Client: cached, APIReader: live, Pods: cached, Recorder: events.NewFakeRecorder(20), AgentImage: "tend:test",
		ArchiveState: func(_ context.Context, ip string) (agentapi.ArchiveState, error) {
			asked++
			st, ok := answers[ip]
			if !ok {
				return st, errors.New("connection refused")
			}
			return st, nil
		}}
	ours := agentapi.ArchiveState{Phase: agentapi.ArchiveArchiving, Owner: string(c.UID), BaseRevision: 100, FirstRevision: 101, LastRevision: 950, Segments: 3}
	answers["10.9.1.7"] = ours

	pass := func() *archiveObservation {
		s := &scope{cluster: c, now: now}
		g.Expect(r.reconcileArchive(ctx, s, &world{cluster: c, clock: now})).To(Succeed())
		return s.obs.archive
	}
	o := pass()
	g.Expect(o.ok).To(BeTrue(), o.message)
	g.Expect(o.status.LastRevision).To(Equal(int64(950)))
	g.Expect(live.reads).To(Equal(1), "the first pass lists the archive's pods")

	for range 3 {
		o = pass()
		g.Expect(o.ok).To(BeTrue(), o.message)
	}
	g.Expect(live.reads).To(Equal(1), "passes at rest ask the apiserver nothing")
	g.Expect(asked).To(Equal(4))

	// The Deployment changed (a new pod may run elsewhere): the pods are
	// listed again.
	dep.Generation = 2
	g.Expect(cached.Update(ctx, dep)).To(Succeed())
	g.Expect(pass().ok).To(BeTrue())
	g.Expect(live.reads).To(Equal(2))
	g.Expect(pass().ok).To(BeTrue())
	g.Expect(live.reads).To(Equal(2))

	// The address now belongs to another cluster's agent, then to none:
	// never taken for this cluster's archive.
	answers["10.9.1.7"] = agentapi.ArchiveState{Phase: agentapi.ArchiveArchiving, Owner: "uid-of-another", LastRevision: 77}
	o = pass()
	g.Expect(o.ok).To(BeFalse())
	g.Expect(o.reason).To(Equal(etcdv1alpha1.ReasonArchiveStarting))
	g.Expect(o.message).To(ContainSubstring(`owner "uid-of-another"`))
	g.Expect(live.reads).To(Equal(3), "an answer for another owner sends the pass back to the pod list")
	delete(answers, "10.9.1.7")
	o = pass()
	g.Expect(o.ok).To(BeFalse())
	g.Expect(live.reads).To(Equal(4))

	// The archive's pod moved: found by the list, then asked directly.
	g.Expect(live.Reader.(client.Client).Delete(ctx, pod)).To(Succeed())
	moved := pod.DeepCopy()
	moved.Name, moved.ResourceVersion, moved.Status.PodIP = "main-archive-y", "", "10.9.1.8"
	g.Expect(live.Reader.(client.Client).Create(ctx, moved)).To(Succeed())
	answers["10.9.1.8"] = ours
	g.Expect(pass().ok).To(BeTrue())
	g.Expect(pass().ok).To(BeTrue())
	g.Expect(live.reads).To(Equal(5))

	// The cluster is gone: so is the address.
	r.forget(client.ObjectKeyFromObject(c))
	_, kept := r.archiveAt.Load(client.ObjectKeyFromObject(c))
	g.Expect(kept).To(BeFalse())
}
