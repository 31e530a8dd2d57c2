package etcdcluster

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestGoingPods(t *testing.T) {
	g := NewWithT(t)
	key := types.NamespacedName{Namespace: "ns", Name: "c"}
	other := types.NamespacedName{Namespace: "other", Name: "c"}
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	pod := func(name string, uid types.UID, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: t0.Add(time.Second)}
		}
		return p
	}
	var going goingPods
	going.add(key, "old-2", t0)

	// The cache has not seen the deletion: the pod shows as deleting, since
	// Tend deleted it; the other pods and clusters are as listed.
	pods := []corev1.Pod{pod("c-0", "a", false), pod("c-2", "old-2", false)}
	going.apply(key, pods)
	g.Expect(pods[0].DeletionTimestamp).To(BeNil())
	g.Expect(pods[1].DeletionTimestamp).NotTo(BeNil())
	g.Expect(pods[1].DeletionTimestamp.Time).To(Equal(t0))
	same := []corev1.Pod{pod("c-2", "old-2", false)}
	going.apply(other, same)
	g.Expect(same[0].DeletionTimestamp).To(BeNil(), "another namespace's cluster of the same name is not touched")

	// Again, until the cache shows it.
	pods = []corev1.Pod{pod("c-2", "old-2", false)}
	going.apply(key, pods)
	g.Expect(pods[0].DeletionTimestamp).NotTo(BeNil())

	// The cache shows the new pod of that name: the old one is forgotten.
	pods = []corev1.Pod{pod("c-2", "new-2", false)}
	going.apply(key, pods)
	g.Expect(pods[0].DeletionTimestamp).To(BeNil(), "the StatefulSet's new pod runs")
	g.Expect(going.byCluster).NotTo(HaveKey(key))

	// One the cache shows deleting is forgotten as well, its own time kept.
	going.add(key, "old-0", t0)
	pods = []corev1.Pod{pod("c-0", "old-0", true)}
	going.apply(key, pods)
	g.Expect(pods[0].DeletionTimestamp.Time).To(Equal(t0.Add(time.Second)))
	g.Expect(going.byCluster).NotTo(HaveKey(key))

	going.add(key, "old-1", t0)
	going.forget(key)
	pods = []corev1.Pod{pod("c-1", "old-1", false)}
	going.apply(key, pods)
	g.Expect(pods[0].DeletionTimestamp).To(BeNil(), "forgotten with its cluster")
}

func TestTrimMemberPodKeepsWhatAPassReads(t *testing.T) {
	g := NewWithT(t)
	in := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "c-0", Annotations: map[string]string{"a": "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "etcd", Image: "etcd:1"}},
			Volumes: []corev1.Volume{{Name: "data"}}, InitContainers: []corev1.Container{{Name: "init"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", HostIP: "192.0.2.1",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
	out, err := trimMemberPod(in)
	g.Expect(err).NotTo(HaveOccurred())
	p := out.(*corev1.Pod)
	g.Expect(p.ManagedFields).To(BeNil())
	g.Expect(p.Annotations).To(Equal(in.Annotations))
	g.Expect(p.Spec.Containers).To(Equal(in.Spec.Containers))
	g.Expect(p.Spec.NodeName).To(Equal("n"))
	g.Expect(p.Spec.Volumes).To(BeNil())
	g.Expect(p.Spec.InitContainers).To(BeNil())
	g.Expect(p.Status.HostIP).To(BeEmpty())
	g.Expect(p.Status.PodIP).To(Equal("10.0.0.1"))
	g.Expect(etcdRunning(p)).To(BeTrue())
	g.Expect(p.Status.Conditions).To(Equal(in.Status.Conditions))
}
