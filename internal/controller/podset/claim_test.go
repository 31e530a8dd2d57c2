package podset

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
)

func TestDecideClaim(t *testing.T) {
	ps := &appsv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "ps-uid"}}
	deleting := ps.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	ours := *metav1.NewControllerRef(ps, appsv1alpha1.GroupVersion.WithKind("PodSet"))
	theirs := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: new(true)}
	podWith := func(label string, ref *metav1.OwnerReference, terminating bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{}}}
		if label != "" {
			p.Labels[appsv1alpha1.LabelPodSet] = label
		}
		if ref != nil {
			p.OwnerReferences = []metav1.OwnerReference{*ref}
		}
		if terminating {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		ps   *appsv1alpha1.PodSet
		pod  *corev1.Pod
		want claimAction
	}{
		{"ours and matching", ps, podWith("web", &ours, false), claimOwn},
		{"ours, relabelled", ps, podWith("other", &ours, false), claimRelease},
		{"ours, label removed", ps, podWith("", &ours, false), claimRelease},
		{"ours, relabelled, terminating", ps, podWith("other", &ours, true), claimIgnore},
		{"orphan matching", ps, podWith("web", nil, false), claimAdopt},
		{"orphan matching, terminating", ps, podWith("web", nil, true), claimIgnore},
		{"orphan matching, PodSet deleting", deleting, podWith("web", nil, false), claimIgnore},
		{"orphan not matching", ps, podWith("other", nil, false), claimIgnore},
		{"another controller's, matching", ps, podWith("web", &theirs, false), claimIgnore},
		{"a same-named PodSet's from before (other UID)", ps, podWith("web", &metav1.OwnerReference{
			APIVersion: ours.APIVersion, Kind: "PodSet", Name: "web", UID: types.UID("old"), Controller: new(true),
		}, false), claimIgnore},
	} {
		g := NewWithT(t)
		g.Expect(decideClaim(tc.ps, tc.pod)).To(Equal(tc.want), tc.name)
	}
}

func TestPodSetsOfPod(t *testing.T) {
	g := NewWithT(t)
	owner := metav1.OwnerReference{APIVersion: "apps.tend.dev/v1alpha1", Kind: "PodSet", Name: "old", UID: "u", Controller: new(true)}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Labels: map[string]string{appsv1alpha1.LabelPodSet: "new"},
		OwnerReferences: []metav1.OwnerReference{owner},
	}}
	// The pod index (what a pass lists) and the event mapping agree.
	g.Expect(podSetNamesOf(p)).To(Equal([]string{"old", "new"}))
	reqs := podSetsOfPod(t.Context(), p)
	g.Expect(reqs).To(HaveLen(2))
	g.Expect(reqs[0].Name).To(Equal("old"))
	g.Expect(reqs[1].Name).To(Equal("new"))

	p.Labels[appsv1alpha1.LabelPodSet] = "old"
	g.Expect(podSetsOfPod(t.Context(), p)).To(HaveLen(1))

	// A ReplicaSet's pod concerns no PodSet, unless its label names one.
	p.OwnerReferences[0].Kind = "ReplicaSet"
	p.OwnerReferences[0].APIVersion = "apps/v1"
	delete(p.Labels, appsv1alpha1.LabelPodSet)
	g.Expect(podSetsOfPod(t.Context(), p)).To(BeEmpty())
}
