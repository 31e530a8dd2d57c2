package podset

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
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
	ps := newPodSet(env.Namespace(t), "stale", 0, nil)
	create(t, ps)
	// Wait until the running controller has written its status; with no
	// pods and no spec change it starts no other pass.
	var read *appsv1alpha1.PodSet
	eventually(t, func(g Gomega) {
		read = getPodSet(g, ps)
		g.Expect(read.Status.ObservedGeneration).To(Equal(read.Generation))
	})

	patches := 0
	r := &Reconciler{Client: countingStatus{Client: env.Client, patches: &patches}, APIReader: env.Client}
	withNames := func(names ...string) *appsv1alpha1.PodSet {
		out := read.DeepCopy()
		out.Status.PodNames = names
		out.Status.Replicas = int32(len(names))
		return out
	}

	// The first pass writes; the second reads the same (now stale) copy,
	// as from a cache that has not seen the first write.
	g.Expect(r.patchStatus(ctx, read, withNames("a"))).To(Succeed())
	g.Expect(r.patchStatus(ctx, read, withNames("a", "b"))).To(Succeed())
	g.Expect(patches).To(Equal(2), "one PATCH a write, none refused")
	g.Expect(getPodSet(g, ps).Status.PodNames).To(Equal([]string{"a", "b"}))

	// The same status again, from the same stale read: nothing to write.
	g.Expect(r.patchStatus(ctx, read, withNames("a", "b"))).To(Succeed())
	g.Expect(patches).To(Equal(2))

	// The status the stale read holds is not what the apiserver holds:
	// writing it back must not be skipped.
	g.Expect(r.patchStatus(ctx, read, read.DeepCopy())).To(Succeed())
	g.Expect(patches).To(Equal(3))
	g.Expect(getPodSet(g, ps).Status).To(Equal(read.Status))

	// Once the cache shows the write, it is what counts.
	fresh := getPodSet(g, ps)
	g.Expect(r.patchStatus(ctx, fresh, withNames("c"))).To(Succeed())
	g.Expect(getPodSet(g, ps).Status.PodNames).To(Equal([]string{"c"}))

	// A status computed for the spec before a change is refused, and says
	// why; the apiserver keeps what it had.
	changed := getPodSet(g, ps)
	changed.Spec.Replicas = ptr.To[int32](1)
	g.Expect(env.Client.Update(ctx, changed)).To(Succeed())
	err := r.patchStatus(ctx, fresh, withNames("old-spec"))
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
	err = r.patchStatus(ctx, oldRead, withNames("other-uid"))
	g.Expect(err).To(MatchError(ContainSubstring("the PodSet changed during the pass")))
	g.Expect(getPodSet(g, again).Status.PodNames).NotTo(ContainElement("other-uid"))
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
