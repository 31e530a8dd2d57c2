package podset

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
)

func TestPlanLeader(t *testing.T) {
	ready := func(name string, age time.Duration) *corev1.Pod {
		return pod(name, "node", corev1.PodRunning, true, age)
	}
	unready := func(name string, age time.Duration) *corev1.Pod {
		return pod(name, "node", corev1.PodRunning, false, age)
	}
	terminating := func(p *corev1.Pod) *corev1.Pod {
		p.DeletionTimestamp = &metav1.Time{}
		return p
	}
	name := func(p *corev1.Pod) string {
		if p == nil {
			return ""
		}
		return p.Name
	}
	for _, tc := range []struct {
		name          string
		pods          []*corev1.Pod
		enabled       bool
		keep          string
		unlabel       []string
		candidate     string
		wantCandidate bool
	}{
		{
			name: "no pods, no leader", enabled: true,
		},
		{
			name: "the oldest Ready pod is the candidate", enabled: true,
			pods:      []*corev1.Pod{ready("young", time.Minute), unready("oldest", time.Hour), ready("old", 10*time.Minute)},
			candidate: "old",
		},
		{
			name: "a Ready leader keeps the role, though older pods exist", enabled: true,
			pods: []*corev1.Pod{ready("old", time.Hour), leaderPod(ready("young", time.Minute))},
			keep: "young",
		},
		{
			name: "an unready leader loses the label, and a candidate is named", enabled: true,
			pods:      []*corev1.Pod{leaderPod(unready("was", time.Hour)), ready("next", time.Minute)},
			unlabel:   []string{"was"},
			candidate: "next",
		},
		{
			name: "a terminating leader loses the label", enabled: true,
			pods:      []*corev1.Pod{leaderPod(terminating(ready("was", time.Hour))), ready("next", time.Minute)},
			unlabel:   []string{"was"},
			candidate: "next",
		},
		{
			name: "two leaders: the older keeps it", enabled: true,
			pods:    []*corev1.Pod{leaderPod(ready("young", time.Minute)), leaderPod(ready("old", time.Hour))},
			keep:    "old",
			unlabel: []string{"young"},
		},
		{
			name: "nobody Ready: no candidate", enabled: true,
			pods: []*corev1.Pod{unready("a", time.Hour), pod("b", "", corev1.PodPending, false, 0)},
		},
		{
			name: "election off: every label goes", enabled: false,
			pods:    []*corev1.Pod{leaderPod(ready("a", time.Hour)), ready("b", time.Minute)},
			unlabel: []string{"a"},
		},
	} {
		g := NewWithT(t)
		plan := planLeader(tc.pods, tc.enabled)
		g.Expect(name(plan.keep)).To(Equal(tc.keep), tc.name)
		g.Expect(names(plan.unlabel)).To(ConsistOf(tc.unlabel), tc.name)
		g.Expect(name(plan.candidate)).To(Equal(tc.candidate), tc.name)
	}
}

func TestLeaderService(t *testing.T) {
	ps := func(containers ...corev1.Container) *appsv1alpha1.PodSet {
		return &appsv1alpha1.PodSet{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"},
			Spec:       appsv1alpha1.PodSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: containers}}},
		}
	}
	g := NewWithT(t)

	svc := leaderService(ps(corev1.Container{Name: "sleep"}))
	g.Expect(svc.Name).To(Equal("db-leader"))
	g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone), "no ports: headless")
	g.Expect(svc.Spec.Selector).To(Equal(map[string]string{
		appsv1alpha1.LabelPodSet: "db", appsv1alpha1.LabelRole: appsv1alpha1.RoleLeader,
	}))

	svc = leaderService(ps(corev1.Container{Name: "app", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}))
	g.Expect(svc.Spec.ClusterIP).To(BeEmpty())
	g.Expect(svc.Spec.Ports).To(Equal([]corev1.ServicePort{{
		Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080, TargetPort: intstr.FromInt32(8080),
	}}))

	// Several ports, one unnamed and one repeated in a second container.
	svc = leaderService(ps(
		corev1.Container{Name: "a", Ports: []corev1.ContainerPort{{ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {Name: "http", ContainerPort: 80}}},
		corev1.Container{Name: "b", Ports: []corev1.ContainerPort{{ContainerPort: 80}}},
	))
	g.Expect(svc.Spec.Ports).To(HaveLen(2))
	g.Expect(svc.Spec.Ports[0].Name).To(Equal("port-53-UDP"))
	g.Expect(svc.Spec.Ports[1].Name).To(Equal("http"))
}
