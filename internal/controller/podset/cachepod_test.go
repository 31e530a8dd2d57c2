package podset

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
)

// fullPods are pods as the apiserver serves them, with everything a kubelet
// and the controller put on them, in every state a pass judges: scheduled
// or not, each phase, Ready or not or unknown, terminating, the leader,
// owned by this PodSet, by another, or by none, and matching or not.
func fullPods(ps *appsv1alpha1.PodSet) []*corev1.Pod {
	base := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	var pods []*corev1.Pod
	i := 0
	for _, node := range []string{"", "node-1"} {
		for _, phase := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed} {
			for _, ready := range []corev1.ConditionStatus{"", corev1.ConditionTrue, corev1.ConditionFalse} {
				for _, variant := range []string{"plain", "leader", "terminating", "orphan", "foreign", "unmatched"} {
					i++
					p := fullPod(ps, fmt.Sprintf("p-%03d", i), base.Add(time.Duration(i%7)*time.Second), node, phase, ready)
					switch variant {
					case "leader":
						p.Labels[appsv1alpha1.LabelRole] = appsv1alpha1.RoleLeader
					case "terminating":
						p.DeletionTimestamp = ptr.To(metav1.NewTime(base.Add(time.Minute)))
					case "orphan":
						p.OwnerReferences = nil
					case "foreign":
						p.OwnerReferences[0].UID = "someone-else"
					case "unmatched":
						p.Labels[appsv1alpha1.LabelPodSet] = "other"
					}
					pods = append(pods, p)
				}
			}
		}
	}
	return pods
}

func fullPod(ps *appsv1alpha1.PodSet, name string, created time.Time, node string, phase corev1.PodPhase, ready corev1.ConditionStatus) *corev1.Pod {
	conds := []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created)},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created)},
		{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: metav1.NewTime(created)},
	}
	if ready != "" {
		conds = append(conds, corev1.PodCondition{Type: corev1.PodReady, Status: ready, Reason: "ContainersNotReady", Message: "containers with unready status: [app]", LastTransitionTime: metav1.NewTime(created)})
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ps.Namespace, UID: types.UID("uid-" + name), ResourceVersion: "42", GenerateName: ps.Name + "-",
			CreationTimestamp: metav1.NewTime(created),
			Labels:            map[string]string{appsv1alpha1.LabelPodSet: ps.Name, "app": "web"},
			Annotations:       map[string]string{"note": "kept"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps.tend.dev/v1alpha1", Kind: "PodSet", Name: ps.Name, UID: ps.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "tend", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "app", Image: "busybox:1.37", Command: []string{"sleep", "3600"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}},
			}},
			Volumes: []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}}},
		},
		Status: corev1.PodStatus{
			Phase: phase, Conditions: conds, PodIP: "10.0.0.1", HostIP: "192.168.0.1",
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: ready == corev1.ConditionTrue, RestartCount: 3, Image: "busybox:1.37"}},
		},
	}
}

func trimmed(t *testing.T, pods []*corev1.Pod) []*corev1.Pod {
	t.Helper()
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		in := p.DeepCopy()
		o, err := trimPod(in)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = o.(*corev1.Pod)
		if !equalJSON(in, p) {
			t.Fatalf("trimPod changed its input %s", p.Name)
		}
	}
	return out
}

// nonNil names the pods that are not nil.
func nonNil(pods ...*corev1.Pod) []string {
	var n []string
	for _, p := range pods {
		if p != nil {
			n = append(n, p.Name)
		}
	}
	return n
}

func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// TestTrimmedPodsDecideAlike checks that every decision a pass makes on
// pods comes out the same on the trimmed pods the cache keeps as on whole
// ones: claim, rank and order for scale-down, readiness and activity, the
// leader plan, and the status.
func TestTrimmedPodsDecideAlike(t *testing.T) {
	g := NewWithT(t)
	ps := &appsv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "ps-uid"}, Spec: appsv1alpha1.PodSetSpec{Replicas: ptr.To[int32](3)}}
	full := fullPods(ps)
	trim := trimmed(t, full)
	for i := range full {
		f, tr := full[i], trim[i]
		g.Expect(decideClaim(ps, tr)).To(Equal(decideClaim(ps, f)), "decideClaim, pod %s", f.Name)
		g.Expect(podRank(tr)).To(Equal(podRank(f)), "podRank, pod %s", f.Name)
		g.Expect(isReady(tr)).To(Equal(isReady(f)), "isReady, pod %s", f.Name)
		g.Expect(isActive(tr)).To(Equal(isActive(f)), "isActive, pod %s", f.Name)
		g.Expect(canLead(tr)).To(Equal(canLead(f)), "canLead, pod %s", f.Name)
		g.Expect(podSetNamesOf(tr)).To(Equal(podSetNamesOf(f)), "podSetNamesOf, pod %s", f.Name)
		g.Expect(tr.ManagedFields).To(BeNil())
		g.Expect(tr.Spec.Containers).To(BeEmpty())
		g.Expect(tr.Status.ContainerStatuses).To(BeEmpty())
	}
	for _, n := range []int{1, 10, len(full)} {
		g.Expect(names(toDelete(trim, n))).To(Equal(names(toDelete(full, n))), "toDelete %d", n)
	}
	for _, enabled := range []bool{true, false} {
		pf, pt := planLeader(full, enabled), planLeader(trim, enabled)
		g.Expect(nonNil(pt.keep, pt.candidate)).To(Equal(nonNil(pf.keep, pf.candidate)), "planLeader(%t)", enabled)
		g.Expect(names(pt.unlabel)).To(Equal(names(pf.unlabel)), "planLeader(%t) unlabel", enabled)
	}
	var activeFull, activeTrim []*corev1.Pod
	for i := range full {
		if isActive(full[i]) {
			activeFull, activeTrim = append(activeFull, full[i]), append(activeTrim, trim[i])
		}
	}
	// The conditions' transition times are the clock's, and differ.
	stFull := calculateStatus(ps, observation{active: activeFull, managed: true})
	stTrim := calculateStatus(ps, observation{active: activeTrim, managed: true})
	for i := range stFull.Conditions {
		stFull.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	for i := range stTrim.Conditions {
		stTrim.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	g.Expect(stTrim).To(Equal(stFull))
}

// TestAPatchOfATrimmedPodChangesOnlyWhatChanged checks that the writes a
// pass makes on a cached pod (the leader label, adoption) patch only what
// they change, and never what the cache left out.
func TestAPatchOfATrimmedPodChangesOnlyWhatChanged(t *testing.T) {
	g := NewWithT(t)
	ps := &appsv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "ps-uid"}}
	cached := trimmed(t, []*corev1.Pod{fullPod(ps, "p", time.Now(), "node-1", corev1.PodRunning, corev1.ConditionTrue)})[0]
	changed := cached.DeepCopy()
	changed.Labels[appsv1alpha1.LabelRole] = appsv1alpha1.RoleLeader
	data, err := client.MergeFromWithOptions(cached, client.MergeFromWithOptimisticLock{}).Data(changed)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(MatchJSON(`{"metadata":{"labels":{"tend.dev/role":"leader"},"resourceVersion":"42"}}`))
}
