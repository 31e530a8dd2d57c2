package etcd

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// b10TestPod is a member pod of a StatefulSet.
func b10TestPod(name, uid, image, ip string, ready, deleting bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid), OwnerReferences: []metav1.OwnerReference{
			{Kind: "StatefulSet", Name: b10Cluster, Controller: ptr.To(true)},
		}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: image}}},
		Status: corev1.PodStatus{PodIP: ip},
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	if deleting {
		p.DeletionTimestamp = &metav1.Time{Time: b10At(0)}
	}
	return p
}

func TestB10Pods(t *testing.T) {
	g := NewWithT(t)
	const old, next = "etcd:v3.5.35", "etcd:v3.6.16"
	pods := newB10Pods(3)
	pods.setTarget(old)
	for i, n := range []string{"b10-0", "b10-1", "b10-2"} {
		pods.update(b10TestPod(n, n+"-a", old, "", false, false), false, b10At(0))
		pods.update(b10TestPod(n, n+"-a", old, "10.0.0."+string(rune('1'+i)), true, false), false, b10At(1000+i))
	}
	job := b10TestPod("b10-init", "job", old, "10.0.0.9", true, false)
	job.OwnerReferences[0].Kind = "Job"
	pods.update(job, false, b10At(1500))
	done, _ := pods.Done()
	g.Expect(done).To(Equal(b10At(1002)), "the third member Ready; a Job's pod does not count")
	g.Expect(pods.IP("b10-1")).To(Equal("10.0.0.2"))
	g.Expect(pods.IP("b10-init")).To(BeEmpty())

	patch := b10At(5000)
	pods.setTarget(next)
	done, changed := pods.Done()
	g.Expect(done).To(BeZero())

	// b10-2 restarts: going, gone, a new pod, Ready.
	pods.update(b10TestPod("b10-2", "b10-2-a", old, "10.0.0.3", true, true), false, b10At(6000))
	g.Expect(changed).To(BeClosed())
	g.Expect(pods.IP("b10-2")).To(BeEmpty(), "a pod that is going is not dialled")
	pods.update(b10TestPod("b10-2", "b10-2-a", old, "10.0.0.3", false, true), true, b10At(7000))
	pods.update(b10TestPod("b10-2", "b10-2-b", next, "", false, false), false, b10At(7100))
	pods.update(b10TestPod("b10-2", "b10-2-b", next, "10.0.0.4", true, false), false, b10At(15000))
	g.Expect(pods.IP("b10-2")).To(Equal("10.0.0.4"))
	// b10-1, then b10-0, gone at once (the Deleted event alone).
	for i, n := range []string{"b10-1", "b10-0"} {
		at := 20000 + 20000*i
		pods.update(b10TestPod(n, n+"-a", old, "x", true, false), true, b10At(at))
		pods.update(b10TestPod(n, n+"-b", next, "y", true, false), false, b10At(at+9000))
		if i == 0 {
			done, _ = pods.Done()
			g.Expect(done).To(BeZero(), "b10-0 still runs the old image")
		}
	}
	done, _ = pods.Done()
	g.Expect(done).To(Equal(b10At(49000)))

	list := pods.snapshot()
	first, ok := b10FirstGoing(list, patch)
	g.Expect(ok).To(BeTrue())
	g.Expect(first).To(Equal(b10At(6000)))
	_, ok = b10FirstGoing(list, b10At(50000))
	g.Expect(ok).To(BeFalse())

	restarts := b10Restarts(list, patch)
	g.Expect(restarts).To(HaveLen(3))
	g.Expect(restarts[0]).To(Equal(b10Restart{member: "b10-2", going: b10At(6000), back: b10At(15000)}))
	g.Expect(restarts[1].member).To(Equal("b10-1"))
	g.Expect(restarts[2].took()).To(Equal(9 * time.Second))

	var whats []string
	for _, m := range b10PodMarks(list) {
		whats = append(whats, m.what)
	}
	g.Expect(whats).To(ContainElements("pod b10-2 (b10-2) going", "pod b10-2 (b10-2) seen, v3.6.16", "pod b10-0 (b10-0) Ready"))
}
