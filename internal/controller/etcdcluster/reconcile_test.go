package etcdcluster

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/scheme"
)

// TestAFailedStatusWriteReturnsTheErrorAlone: a pass whose status write
// fails returns the error without a RequeueAfter (STYLE rule 16), so that
// the error's backoff, not the pass's own timer, decides the retry. A pure
// test: the fake client is the only way to fail the write on cue.
func TestAFailedStatusWriteReturnsTheErrorAlone(t *testing.T) {
	g := NewWithT(t)
	c := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "kv"},
		// Provided TLS without its Secrets: the pass asks to look again in
		// 30s and writes a status that says so.
		Spec: etcdv1alpha1.EtcdClusterSpec{TLS: etcdv1alpha1.TLS{Mode: etcdv1alpha1.TLSProvided,
			Secrets: &etcdv1alpha1.TLSSecrets{Server: "s", Peer: "p", Client: "c"}}},
	}
	refused := errors.New("the apiserver refused the write")
	cl := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(c).WithStatusSubresource(c).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
				return refused
			},
		}).Build()
	r := &Reconciler{Client: cl, APIReader: cl, Pods: cl, Recorder: events.NewFakeRecorder(10), Clock: clocktesting.NewFakeClock(t0)}

	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)})
	g.Expect(err).To(MatchError(refused))
	g.Expect(res).To(Equal(ctrl.Result{}))
}

// TestAGoneClusterIsForgotten: a cluster deleted without a pass seeing it
// (no finalizer: deletionPolicy Retain) leaves nothing in the reconciler's
// memory once a pass finds it gone.
func TestAGoneClusterIsForgotten(t *testing.T) {
	g := NewWithT(t)
	cl := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithIndex(&etcdv1alpha1.EtcdRestore{}, indexRestoreCluster, restoreClusterName).Build()
	r := &Reconciler{Client: cl, APIReader: cl, Pods: cl, Recorder: events.NewFakeRecorder(10), Clock: clocktesting.NewFakeClock(t0), MemberChangeInterval: time.Minute}
	key := types.NamespacedName{Namespace: "db", Name: "kv"}
	g.Expect(r.untilTick(key, t0)).To(BeZero())
	g.Expect(r.rolls.acquire(key, 1)).To(BeTrue())

	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	g.Expect(err).NotTo(HaveOccurred())
	_, looked := r.nextLook.Load(key)
	g.Expect(looked).To(BeFalse())
	g.Expect(r.rolls.acquire(types.NamespacedName{Namespace: "other", Name: "kv"}, 1)).To(BeTrue(), "the slot is free again")
}

// TestALeaderMoveIsRecordedWhateverTheStatusWrite: a pass that read a
// cluster older than the last status write (its write would conflict) and
// moved the leadership records the move on the live status, counted from
// the live count, and its own status write then succeeds on top of it. A
// pure test: the fake client holds the live object apart from the pass's
// stale copy.
func TestALeaderMoveIsRecordedWhateverTheStatusWrite(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "kv"}}
	cl := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(c).WithStatusSubresource(c).Build()
	r := &Reconciler{Client: cl, APIReader: cl, Pods: cl, Recorder: events.NewFakeRecorder(10), Clock: clocktesting.NewFakeClock(t0)}

	// The pass's read: a roll at revision "r2" with no move yet.
	stale := &etcdv1alpha1.EtcdCluster{}
	g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(c), stale)).To(Succeed())
	stale.Status.Update = &etcdv1alpha1.UpdateStatus{Revision: "r2", PendingMembers: []string{"kv-0", "kv-1"}}
	g.Expect(cl.Status().Update(ctx, stale)).To(Succeed())
	g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(c), stale)).To(Succeed())
	// A write the pass's read does not show: one move already made.
	live := stale.DeepCopy()
	live.Status.Update.LeaderMoves = 1
	g.Expect(cl.Status().Update(ctx, live)).To(Succeed())

	s := &scope{cluster: stale, before: stale.DeepCopy(), now: t0}
	u := stale.Status.Update.DeepCopy()
	u.PendingMembers = []string{"kv-1"}
	g.Expect(r.recordLeaderMove(ctx, s, u)).To(Succeed())
	g.Expect(u.LeaderMoves).To(Equal(int32(2)), "counted from the live status")
	got := &etcdv1alpha1.EtcdCluster{}
	g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
	g.Expect(got.Status.Update.LeaderMoves).To(Equal(int32(2)))

	// The pass's status write goes on top of what it recorded.
	s.cluster.Status.Update = u
	g.Expect(r.patchStatus(ctx, s.before, s.cluster)).To(Succeed())
	g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
	g.Expect(got.Status.Update.LeaderMoves).To(Equal(int32(2)))
	g.Expect(got.Status.Update.PendingMembers).To(Equal([]string{"kv-1"}))

	// A roll the live status does not hold yet starts its count at one.
	fresh := &etcdv1alpha1.UpdateStatus{Revision: "r3"}
	g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
	s = &scope{cluster: got, before: got.DeepCopy(), now: t0}
	g.Expect(r.recordLeaderMove(ctx, s, fresh)).To(Succeed())
	g.Expect(fresh.LeaderMoves).To(Equal(int32(1)))
}

func TestUnreachableRequeueSlowsAfterTwoMinutes(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	cluster := func(status metav1.ConditionStatus, reason string, since time.Duration) *etcdv1alpha1.EtcdCluster {
		c := &etcdv1alpha1.EtcdCluster{}
		c.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionAvailable, Status: status, Reason: reason,
			LastTransitionTime: metav1.NewTime(now.Add(-since))}}
		return c
	}
	for _, tc := range []struct {
		name string
		c    *etcdv1alpha1.EtcdCluster
		want time.Duration
	}{
		{"a new cluster, no condition yet", &etcdv1alpha1.EtcdCluster{}, requeueUnreachable},
		{"unreachable for a minute", cluster(metav1.ConditionFalse, etcdv1alpha1.ReasonUnreachable, time.Minute), requeueUnreachable},
		{"unreachable for two minutes", cluster(metav1.ConditionFalse, etcdv1alpha1.ReasonUnreachable, 2*time.Minute), requeueSteady},
		{"unreachable for a day", cluster(metav1.ConditionFalse, etcdv1alpha1.ReasonUnreachable, 24*time.Hour), requeueSteady},
		// Available until this pass: the members may be restarting.
		{"available for a day", cluster(metav1.ConditionTrue, "AsExpected", 24*time.Hour), requeueUnreachable},
		{"down for another reason for a day", cluster(metav1.ConditionFalse, "QuorumLost", 24*time.Hour), requeueUnreachable},
	} {
		if got := unreachableRequeue(tc.c, now); got != tc.want {
			t.Errorf("%s: requeue after %s; want %s", tc.name, got, tc.want)
		}
	}
}
