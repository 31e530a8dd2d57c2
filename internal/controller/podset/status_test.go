package podset

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
)

func TestCalculateStatus(t *testing.T) {
	ready := func(name string) *corev1.Pod { return pod(name, "node", corev1.PodRunning, true, time.Hour) }
	unready := func(name string) *corev1.Pod { return pod(name, "node", corev1.PodRunning, false, time.Hour) }
	type conds map[string]string // type -> "Status/Reason"
	for _, tc := range []struct {
		name     string
		replicas int32
		leader   bool
		obs      observation
		want     conds
		verdict  string // readinessOf: "State/Reason"
	}{
		{
			name: "all ready", replicas: 2,
			obs:     observation{active: []*corev1.Pod{ready("b"), ready("a")}, managed: true},
			want:    conds{"Available": "True/AllReplicasReady", "Progressing": "False/Stable", "ReplicaFailure": "False/NoFailure"},
			verdict: "Ready/AllReplicasReady",
		},
		{
			name: "scaling up", replicas: 3,
			obs:     observation{active: []*corev1.Pod{ready("a")}, managed: true},
			want:    conds{"Available": "False/ReplicasNotReady", "Progressing": "True/ScalingUp", "ReplicaFailure": "False/NoFailure"},
			verdict: "Reconciling/ScalingUp",
		},
		{
			name: "scaling down", replicas: 1,
			obs:     observation{active: []*corev1.Pod{ready("a"), ready("b")}, managed: true},
			want:    conds{"Available": "True/AllReplicasReady", "Progressing": "True/ScalingDown", "ReplicaFailure": "False/NoFailure"},
			verdict: "Reconciling/ScalingDown",
		},
		{
			name: "waiting for pods", replicas: 2,
			obs:     observation{active: []*corev1.Pod{ready("a"), unready("b")}, managed: true},
			want:    conds{"Available": "False/ReplicasNotReady", "Progressing": "True/WaitingForPods", "ReplicaFailure": "False/NoFailure"},
			verdict: "Reconciling/WaitingForPods",
		},
		{
			name: "quota refused a create", replicas: 2,
			obs: observation{active: []*corev1.Pod{ready("a")}, managed: true,
				failed: &failure{reason: "Forbidden", message: "exceeded quota"}},
			want:    conds{"Available": "False/ReplicasNotReady", "Progressing": "True/ScalingUp", "ReplicaFailure": "True/Forbidden"},
			verdict: "Reconciling/Forbidden",
		},
		{
			name: "the apiserver refuses the template as invalid", replicas: 1,
			obs:     observation{managed: true, failed: &failure{reason: "Invalid", message: "spec.containers[0].image: Required value"}},
			want:    conds{"Available": "False/ReplicasNotReady", "Progressing": "True/ScalingUp", "ReplicaFailure": "True/Invalid"},
			verdict: "Stalled/Invalid",
		},
		{
			name: "cache behind on the first visit", replicas: 1,
			obs:     observation{active: []*corev1.Pod{ready("a")}},
			want:    conds{"Available": "True/AllReplicasReady", "Progressing": "False/Stable", "ReplicaFailure": "Unknown/Unknown"},
			verdict: "Reconciling/Unknown",
		},
		{
			name: "ready but no leader yet", replicas: 1, leader: true,
			obs: observation{active: []*corev1.Pod{ready("a")}, managed: true,
				service: serviceObservation{ready: true}},
			want: conds{"Available": "False/NoLeader", "Progressing": "False/Stable", "ReplicaFailure": "False/NoFailure",
				"LeaderServiceReady": "True/ServiceSelectsLeader"},
			verdict: "Reconciling/NoLeader",
		},
		{
			name: "ready with a leader", replicas: 1, leader: true,
			obs: observation{active: []*corev1.Pod{ready("a")}, managed: true, leader: "a",
				service: serviceObservation{ready: true}},
			want: conds{"Available": "True/AllReplicasReady", "Progressing": "False/Stable", "ReplicaFailure": "False/NoFailure",
				"LeaderServiceReady": "True/ServiceSelectsLeader"},
			verdict: "Ready/AllReplicasReady",
		},
		{
			name: "a leader, and another owner's Service holds the leader Service's name", replicas: 1, leader: true,
			obs: observation{active: []*corev1.Pod{ready("a")}, managed: true, leader: "a",
				service: serviceObservation{taken: "Service web-leader already exists and has no controller"}},
			want: conds{"Available": "True/AllReplicasReady", "Progressing": "False/Stable", "ReplicaFailure": "False/NoFailure",
				"LeaderServiceReady": "False/ServiceNameTaken"},
			verdict: "Stalled/ServiceNameTaken",
		},
		{
			name: "paused short of its replicas", replicas: 3,
			obs:     observation{active: []*corev1.Pod{ready("a")}, paused: true},
			want:    conds{"Available": "False/ReplicasNotReady", "Progressing": "False/Paused", "ReplicaFailure": "Unknown/Unknown"},
			verdict: "NotReady/Paused",
		},
		{
			name: "zero replicas, the Service not seen yet", replicas: 0, leader: true,
			obs: observation{managed: true},
			want: conds{"Available": "True/AllReplicasReady", "Progressing": "False/Stable", "ReplicaFailure": "False/NoFailure",
				"LeaderServiceReady": "Unknown/Unknown"},
			verdict: "Reconciling/Unknown",
		},
	} {
		g := NewWithT(t)
		ps := &appsv1alpha1.PodSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 4},
			Spec:       appsv1alpha1.PodSetSpec{Replicas: &tc.replicas, LeaderElection: tc.leader},
		}
		st := calculateStatus(ps, tc.obs)
		got := conds{}
		for _, c := range st.Conditions {
			got[c.Type] = string(c.Status) + "/" + c.Reason
			g.Expect(c.ObservedGeneration).To(Equal(int64(4)))
		}
		g.Expect(got).To(Equal(tc.want), tc.name)
		g.Expect(st.Replicas).To(Equal(int32(len(tc.obs.active))), tc.name)
		g.Expect(st.Selector).To(Equal("apps.tend.dev/podset=web"))
		g.Expect(st.Leader).To(Equal(tc.obs.leader))
		v := readinessOf(st)
		g.Expect(v.State.String()+"/"+v.Reason).To(Equal(tc.verdict), tc.name)
		g.Expect(v.Message).NotTo(BeEmpty(), tc.name)
	}
}

func TestCalculateStatusSortsNamesAndKeepsTransitionTimes(t *testing.T) {
	g := NewWithT(t)
	replicas := int32(2)
	ps := &appsv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1alpha1.PodSetSpec{Replicas: &replicas}}
	obs := observation{active: []*corev1.Pod{
		pod("web-b", "n", corev1.PodRunning, true, 0), pod("web-a", "n", corev1.PodRunning, true, 0),
	}, managed: true}
	ps.Status = calculateStatus(ps, obs)
	g.Expect(ps.Status.PodNames).To(Equal([]string{"web-a", "web-b"}))
	g.Expect(ps.Status.ReadyReplicas).To(Equal(int32(2)))

	// Backdate the transition; an unchanged condition keeps it.
	then := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	for i := range ps.Status.Conditions {
		ps.Status.Conditions[i].LastTransitionTime = then
	}
	again := calculateStatus(ps, obs)
	g.Expect(meta.FindStatusCondition(again.Conditions, appsv1alpha1.ConditionAvailable).LastTransitionTime).To(Equal(then))
}

func TestCalculateStatusLeaderService(t *testing.T) {
	g := NewWithT(t)
	ps := &appsv1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 1},
		Spec:       appsv1alpha1.PodSetSpec{Replicas: new(int32), LeaderElection: true},
	}
	leaderService := func() *metav1.Condition {
		return meta.FindStatusCondition(ps.Status.Conditions, appsv1alpha1.ConditionLeaderServiceReady)
	}

	const taken = "Service web-leader already exists and is controlled by Deployment proxy"
	ps.Status = calculateStatus(ps, observation{managed: true, service: serviceObservation{taken: taken}})
	g.Expect(leaderService().Message).To(Equal(taken))

	// A pass that could not tell (it failed before the leader phase, or is
	// replacing the Service) keeps what the last one found.
	ps.Status = calculateStatus(ps, observation{})
	g.Expect(leaderService().Reason).To(Equal(appsv1alpha1.ReasonServiceNameTaken))

	ps.Status = calculateStatus(ps, observation{managed: true, service: serviceObservation{ready: true}})
	g.Expect(leaderService().Status).To(Equal(metav1.ConditionTrue))
	g.Expect(leaderService().Message).To(Equal("Service web-leader selects the pod labelled tend.dev/role=leader"))

	// Election off: the condition goes, whatever holds the name.
	ps.Spec.LeaderElection = false
	ps.Status = calculateStatus(ps, observation{managed: true, service: serviceObservation{taken: taken}})
	g.Expect(leaderService()).To(BeNil())
}
