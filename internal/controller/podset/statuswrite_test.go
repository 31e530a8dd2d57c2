package podset

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
)

// TestStatusWriteFromAStaleRead drives patchStatus against the real
// apiserver with the PodSet that a pass read from a cache which has not
// seen the pass's own previous write: the write is taken at once (no 409,
// no second PATCH), the same status is not written twice, a status that
// equals the stale cached one is still written, and a status computed for
// an older spec or another PodSet of the same name is refused.
func TestStatusWriteFromAStaleRead(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ps, read := settledPodSet(t, "stale")
	// The clock moves past the spacing of progress writes before each
	// write (TestProgressWritesAreSpaced tests the spacing).
	r, patches := countingReconciler(ticking{clocktesting.NewFakeClock(time.Now())})
	withNames := func(names ...string) *appsv1alpha1.PodSet {
		out := read.DeepCopy()
		out.Status.PodNames = names
		out.Status.Replicas = int32(len(names))
		return out
	}

	// The first pass writes; the second reads the same (now stale) copy,
	// as from a cache that has not seen the first write.
	g.Expect(noWait(r.patchStatus(ctx, read, withNames("a")))).To(Succeed())
	g.Expect(noWait(r.patchStatus(ctx, read, withNames("a", "b")))).To(Succeed())
	g.Expect(*patches).To(Equal(2), "one PATCH a write, none refused")
	g.Expect(getPodSet(g, ps).Status.PodNames).To(Equal([]string{"a", "b"}))

	// The same status again, from the same stale read: nothing to write.
	g.Expect(noWait(r.patchStatus(ctx, read, withNames("a", "b")))).To(Succeed())
	g.Expect(*patches).To(Equal(2))

	// The status the stale read holds is not what the apiserver holds:
	// writing it back must not be skipped.
	g.Expect(noWait(r.patchStatus(ctx, read, read.DeepCopy()))).To(Succeed())
	g.Expect(*patches).To(Equal(3))
	g.Expect(getPodSet(g, ps).Status).To(Equal(read.Status))

	// Once the cache shows the write, it is what counts.
	fresh := getPodSet(g, ps)
	g.Expect(noWait(r.patchStatus(ctx, fresh, withNames("c")))).To(Succeed())
	g.Expect(getPodSet(g, ps).Status.PodNames).To(Equal([]string{"c"}))

	// A status computed for the spec before a change is refused, and says
	// why; the apiserver keeps what it had.
	changed := getPodSet(g, ps)
	changed.Spec.Replicas = ptr.To[int32](1)
	g.Expect(env.Client.Update(ctx, changed)).To(Succeed())
	err := noWait(r.patchStatus(ctx, fresh, withNames("old-spec")))
	g.Expect(err).To(MatchError(ContainSubstring("the PodSet changed during the pass")))
	g.Expect(getPodSet(g, ps).Status.PodNames).NotTo(ContainElement("old-spec"))

	// Nor does a status reach another PodSet of the same name.
	g.Expect(env.Client.Delete(ctx, changed)).To(Succeed())
	again := newPodSet(ps.Namespace, ps.Name, 0, nil)
	g.Expect(env.Client.Create(ctx, again)).To(Succeed())
	recreated := getPodSet(g, again)
	oldRead := fresh.DeepCopy() // the old PodSet, at the new one's generation
	oldRead.Generation = recreated.Generation
	oldRead.ResourceVersion = recreated.ResourceVersion
	err = noWait(r.patchStatus(ctx, oldRead, withNames("other-uid")))
	g.Expect(err).To(MatchError(ContainSubstring("the PodSet changed during the pass")))
	g.Expect(getPodSet(g, again).Status.PodNames).NotTo(ContainElement("other-uid"))
}

// settledPodSet creates a PodSet of no pods and returns it once the
// running controller has written its status: with no pods and no spec
// change, it starts no other pass.
func settledPodSet(t *testing.T, name string) (ps, read *appsv1alpha1.PodSet) {
	ps = newPodSet(env.Namespace(t), name, 0, nil)
	create(t, ps)
	eventually(t, func(g Gomega) {
		read = getPodSet(g, ps)
		g.Expect(read.Status.ObservedGeneration).To(Equal(read.Generation))
	})
	return ps, read
}

// countingReconciler is a Reconciler on the test apiserver that counts its
// status patches.
func countingReconciler(clk clock.PassiveClock) (*Reconciler, *int) {
	patches := new(int)
	return &Reconciler{Client: countingStatus{Client: env.Client, patches: patches}, APIReader: env.Client, Clock: clk}, patches
}

// countingStatus counts its status patches, and sends them on.
type countingStatus struct {
	client.Client
	patches *int
}

func (c countingStatus) Status() client.SubResourceWriter {
	return countingWriter{SubResourceWriter: c.Client.Status(), patches: c.patches}
}

type countingWriter struct {
	client.SubResourceWriter
	patches *int
}

func (w countingWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	*w.patches++
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// ticking is a clock that moves past progressInterval each time it is
// read, so that every write in a test is due.
type ticking struct{ *clocktesting.FakeClock }

func (t ticking) Now() time.Time {
	t.Step(2 * progressInterval)
	return t.FakeClock.Now()
}

var _ clock.PassiveClock = ticking{}

// noWait passes on patchStatus's error, and fails the test if it held the
// write back.
func noWait(wait time.Duration, err error) error {
	if wait != 0 {
		return errHeldBack
	}
	return err
}

var errHeldBack = errors.New("the write was held back")

// TestProgressWritesAreSpaced: a status that only moves counts is written
// at most once per progressInterval, and the pass is told when to come
// back; one that changes a condition goes at once.
func TestProgressWritesAreSpaced(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ps, read := settledPodSet(t, "spaced")
	clk := clocktesting.NewFakeClock(time.Now())
	r, patches := countingReconciler(clk)
	progress := func(ready int32) *appsv1alpha1.PodSet {
		out := read.DeepCopy()
		out.Status.Replicas, out.Status.ReadyReplicas = 3, ready
		return out
	}

	wait, err := r.patchStatus(ctx, read, progress(0))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wait).To(BeZero(), "the first write goes at once")
	g.Expect(*patches).To(Equal(1))

	clk.Step(300 * time.Millisecond)
	wait, err = r.patchStatus(ctx, read, progress(1))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wait).To(Equal(progressInterval-300*time.Millisecond), "a count moved: held back until the interval is over")
	g.Expect(*patches).To(Equal(1))

	// A condition that changes its status goes at once.
	changed := progress(1)
	changed.Status.Conditions = append(changed.Status.Conditions, metav1.Condition{
		Type: "Example", Status: metav1.ConditionTrue, Reason: "Because", LastTransitionTime: metav1.Now(),
	})
	wait, err = r.patchStatus(ctx, read, changed)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wait).To(BeZero())
	g.Expect(*patches).To(Equal(2))

	// Once the interval is over, the count goes too.
	next := changed.DeepCopy()
	next.Status.ReadyReplicas = 2
	clk.Step(progressInterval)
	wait, err = r.patchStatus(ctx, read, next)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wait).To(BeZero())
	g.Expect(*patches).To(Equal(3))
	g.Expect(getPodSet(g, ps).Status.ReadyReplicas).To(Equal(int32(2)))
}

func TestOnlyProgress(t *testing.T) {
	g := NewWithT(t)
	cond := func(status metav1.ConditionStatus, reason, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: "Available", Status: status, Reason: reason, Message: msg, ObservedGeneration: 1}}
	}
	base := appsv1alpha1.PodSetStatus{Replicas: 3, ReadyReplicas: 1, ObservedGeneration: 1, Selector: "a=b",
		Conditions: cond(metav1.ConditionFalse, "ReplicasNotReady", "1 of 3 pods are Ready")}
	with := func(f func(*appsv1alpha1.PodSetStatus)) appsv1alpha1.PodSetStatus {
		out := *base.DeepCopy()
		f(&out)
		return out
	}
	g.Expect(onlyProgress(base, with(func(s *appsv1alpha1.PodSetStatus) {
		s.ReadyReplicas, s.PodNames = 2, []string{"x"}
		s.Conditions = cond(metav1.ConditionFalse, "ReplicasNotReady", "2 of 3 pods are Ready")
	}))).To(BeTrue())
	for name, f := range map[string]func(*appsv1alpha1.PodSetStatus){
		"condition status":    func(s *appsv1alpha1.PodSetStatus) { s.Conditions = cond(metav1.ConditionTrue, "ReplicasNotReady", "") },
		"condition reason":    func(s *appsv1alpha1.PodSetStatus) { s.Conditions = cond(metav1.ConditionFalse, "Other", "") },
		"a new condition":     func(s *appsv1alpha1.PodSetStatus) { s.Conditions = append(s.Conditions, metav1.Condition{Type: "X"}) },
		"observed generation": func(s *appsv1alpha1.PodSetStatus) { s.ObservedGeneration = 2 },
		"leader":              func(s *appsv1alpha1.PodSetStatus) { s.Leader = "p" },
		"selector":            func(s *appsv1alpha1.PodSetStatus) { s.Selector = "c=d" },
	} {
		g.Expect(onlyProgress(base, with(f))).To(BeFalse(), name)
	}
}
