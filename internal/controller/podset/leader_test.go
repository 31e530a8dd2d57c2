package podset

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

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

func TestServiceTakenMessageAndReport(t *testing.T) {
	ps := &appsv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "new"}}
	svc := func(refs ...metav1.OwnerReference) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db-leader", Namespace: "ns", OwnerReferences: refs}}
	}
	controller := func(apiVersion, kind, name, uid string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}
	}
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		want string // what the message says of the Service's holder
	}{
		{name: "made by hand", svc: svc(), want: "Service db-leader already exists and has no controller,"},
		{name: "owned but not controlled", want: "Service db-leader already exists and has no controller,",
			svc: svc(metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "1"})},
		{name: "another controller's", want: "Service db-leader already exists and is controlled by Deployment proxy,",
			svc: svc(controller("apps/v1", "Deployment", "proxy", "1"))},
		{name: "another PodSet's", want: "is controlled by PodSet other,",
			svc: svc(controller("apps.tend.dev/v1alpha1", "PodSet", "other", "1"))},
		{name: "an earlier PodSet of the same name", want: "is controlled by an earlier PodSet db (UID old) that the garbage collector has yet to clean up after,",
			svc: svc(controller("apps.tend.dev/v1alpha1", "PodSet", "db", "old"))},
	} {
		g := NewWithT(t)
		msg := serviceTakenMessage(ps, tc.svc)
		g.Expect(msg).To(ContainSubstring(tc.want), tc.name)
		g.Expect(msg).To(ContainSubstring("delete that Service or have its owner name it otherwise; or turn leader election off"), tc.name)
	}

	g := NewWithT(t)
	msg := serviceTakenMessage(ps, svc())
	cond := func(status metav1.ConditionStatus, reason, message string) []metav1.Condition {
		return []metav1.Condition{{Type: appsv1alpha1.ConditionLeaderServiceReady, Status: status, Reason: reason, Message: message}}
	}
	g.Expect(conditionSays(nil, msg)).To(BeFalse(), "a new clash")
	g.Expect(conditionSays(cond(metav1.ConditionTrue, appsv1alpha1.ReasonServiceSelectsLeader, ""), msg)).To(BeFalse(), "a clash after a good Service")
	g.Expect(conditionSays(cond(metav1.ConditionFalse, appsv1alpha1.ReasonServiceNameTaken, msg), msg)).To(BeTrue(), "the same clash")
	g.Expect(conditionSays(cond(metav1.ConditionFalse, appsv1alpha1.ReasonServiceNameTaken,
		serviceTakenMessage(ps, svc(controller("apps/v1", "Deployment", "proxy", "1")))), msg)).To(BeFalse(), "another holder")
}

func TestPodSetsOfService(t *testing.T) {
	ref := func(kind, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: appsv1alpha1.GroupVersion.String(), Kind: kind, Name: name, UID: "1", Controller: ptr.To(true)}}
	}
	for _, tc := range []struct {
		name string
		svc  metav1.ObjectMeta
		want []string
	}{
		{name: "a PodSet's leader Service", svc: metav1.ObjectMeta{Name: "db-leader", OwnerReferences: ref("PodSet", "db")}, want: []string{"db"}},
		{name: "another owner's Service with a leader Service's name", svc: metav1.ObjectMeta{Name: "db-leader"}, want: []string{"db"}},
		{name: "a PodSet's Service of another name", svc: metav1.ObjectMeta{Name: "db", OwnerReferences: ref("PodSet", "web")}, want: []string{"web"}},
		{name: "an unrelated Service", svc: metav1.ObjectMeta{Name: "db"}},
		{name: "only the suffix", svc: metav1.ObjectMeta{Name: "-leader"}},
	} {
		g := NewWithT(t)
		tc.svc.Namespace = "ns"
		var got []string
		for _, req := range podSetsOfService(context.Background(), &corev1.Service{ObjectMeta: tc.svc}) {
			g.Expect(req.Namespace).To(Equal("ns"))
			got = append(got, req.Name)
		}
		g.Expect(got).To(Equal(tc.want), tc.name)
	}
	name, ok := podSetOfLeaderService(appsv1alpha1.LeaderServiceName("web"))
	NewWithT(t).Expect([]any{name, ok}).To(Equal([]any{"web", true}), "the inverse of LeaderServiceName")
}
