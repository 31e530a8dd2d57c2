package etcdcluster

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodProblem(t *testing.T) {
	waiting := func(reason string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kv-0"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "etcd", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "the reason"}}}}}}
	}
	unschedulable := func(since time.Time, msg string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kv-0"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg, LastTransitionTime: metav1.Time{Time: since}}}}}
	}
	deleting := waiting("ImagePullBackOff")
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{name: "an image that cannot be pulled", pod: waiting("ImagePullBackOff"), want: "pod kv-0: container etcd is waiting, ImagePullBackOff: the reason"},
		{name: "a crash loop", pod: waiting("CrashLoopBackOff"), want: "CrashLoopBackOff"},
		{name: "unschedulable", pod: unschedulable(t0.Add(-time.Minute), "0/1 nodes are available: 1 Insufficient cpu."),
			want: "pod kv-0 cannot be scheduled: 0/1 nodes are available: 1 Insufficient cpu."},
		{name: "unschedulable for a moment", pod: unschedulable(t0.Add(-time.Second), "0/1 nodes are available: 1 Insufficient cpu.")},
		{name: "waiting for its volume, which the claim explains", pod: unschedulable(t0.Add(-time.Hour), "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.")},
		{name: "creating its container passes by itself", pod: waiting("ContainerCreating")},
		{name: "a pod being deleted", pod: deleting},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			if tc.want == "" {
				g.Expect(podProblem(tc.pod, t0)).To(BeEmpty())
				return
			}
			g.Expect(podProblem(tc.pod, t0)).To(ContainSubstring(tc.want))
		})
	}
}
