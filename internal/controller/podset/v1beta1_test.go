package podset

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	appsv1beta1 "github.com/tend-dev/tend/api/apps/v1beta1"
)

// The controller acts on v1alpha1 only; a PodSet written as v1beta1 reaches
// it through the conversion webhook, and behaves the same.
func TestV1beta1LeaderElection(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	ps := &appsv1beta1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kv"},
		Spec: appsv1beta1.PodSetSpec{
			Replicas: ptr.To[int32](2),
			Template: newPodSet(ns, "kv", 0, nil).Spec.Template,
			Leader:   &appsv1beta1.Leader{Election: appsv1beta1.LeaderElectionEnabled},
		},
	}
	create(t, ps)
	hub := &appsv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kv"}}
	var pods []corev1.Pod
	eventually(t, func(g Gomega) {
		pods = livePods(g, hub)
		g.Expect(pods).To(HaveLen(2))
	})
	for _, p := range pods {
		schedule(t, &p, true)
	}
	read := func(g Gomega) *appsv1beta1.PodSet {
		got := &appsv1beta1.PodSet{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(ps), got)).To(Succeed())
		return got
	}
	eventually(t, func(g Gomega) {
		got := read(g)
		g.Expect(got.Status.Leader).NotTo(BeEmpty())
		g.Expect(got.Status.ReadyReplicas).To(Equal(int32(2)))
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "kv-leader"}, &corev1.Service{})).To(Succeed())
	})

	// Election Disabled, written as v1beta1: the leader goes, and the
	// explicit setting reads back as written.
	got := read(g)
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Leader.Election = appsv1beta1.LeaderElectionDisabled
	g.Expect(env.Client.Patch(t.Context(), got, patch)).To(Succeed())
	eventually(t, func(g Gomega) {
		got := read(g)
		g.Expect(got.Status.Leader).To(BeEmpty())
		g.Expect(got.Spec.Leader).To(Equal(&appsv1beta1.Leader{Election: appsv1beta1.LeaderElectionDisabled}))
		for _, p := range livePods(g, hub) {
			g.Expect(p.Labels).NotTo(HaveKey(appsv1alpha1.LabelRole))
		}
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "kv-leader"}, &corev1.Service{})
		g.Expect(err).To(MatchError(ContainSubstring("not found")))
	})
}
