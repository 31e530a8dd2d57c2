package etcdcluster

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/scheme"
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

// TestStartProblemsReadEventsOnlyAfterTheGrace: a new cluster's missing
// pods and Pending claims are what every start looks like; the Events
// are read for why only once they last startGrace.
func TestStartProblemsReadEventsOnlyAfterTheGrace(t *testing.T) {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "kv", UID: "u1"}}
	for _, tc := range []struct {
		name  string
		age   time.Duration
		lists int
	}{
		{"a StatefulSet and a claim made 5 s ago", 5 * time.Second, 0},
		{"made a minute ago", time.Minute, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lists := 0
			cl := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
				List: func(_ context.Context, _ client.WithWatch, list client.ObjectList, _ ...client.ListOption) error {
					if _, ok := list.(*corev1.EventList); ok {
						lists++
					}
					return nil
				},
			}).Build()
			r := &Reconciler{Client: cl, APIReader: cl, Pods: cl, Recorder: events.NewFakeRecorder(10)}
			made := metav1.NewTime(t0.Add(-tc.age))
			sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "kv", CreationTimestamp: made},
				Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1)}}
			pvc := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "data-kv-0", CreationTimestamp: made,
				Labels: map[string]string{labelClusterUID: "u1", LabelCluster: "kv"}}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
			if _, err := r.observeStartProblems(context.Background(), &scope{cluster: c, sts: sts, now: t0},
				memberData{pods: map[string]*corev1.Pod{}, pvcs: []corev1.PersistentVolumeClaim{pvc}}); err != nil {
				t.Fatal(err)
			}
			if lists != tc.lists {
				t.Errorf("listed Events %d times; want %d", lists, tc.lists)
			}
		})
	}
}
