package podset

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	"github.com/tend-dev/tend/internal/scheme"
	"github.com/tend-dev/tend/internal/testenv"
)

func condition(g Gomega, ps *appsv1alpha1.PodSet, t string) string {
	c := meta.FindStatusCondition(getPodSet(g, ps).Status.Conditions, t)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason
}

// kstatusOf is what kstatus (the wait of Helm and Flux) says of ps now.
func kstatusOf(g Gomega, ps *appsv1alpha1.PodSet) kstatus.Status {
	st, _, err := env.KStatus(context.Background(), ps)
	g.Expect(err).NotTo(HaveOccurred())
	return st
}

func TestScaleUpAndDown(t *testing.T) {
	ns := env.Namespace(t)
	ps := newPodSet(ns, "web", 3, nil)
	create(t, ps)

	var pods []corev1.Pod
	eventually(t, func(g Gomega) {
		pods = livePods(g, ps)
		g.Expect(pods).To(HaveLen(3))
		got := getPodSet(g, ps)
		g.Expect(got.Status.Replicas).To(Equal(int32(3)))
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(got.Status.Selector).To(Equal("apps.tend.dev/podset=web"))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionProgressing)).To(Equal("True/WaitingForPods"))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionReplicaFailure)).To(Equal("False/NoFailure"))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionReady)).To(Equal("False/WaitingForPods"))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionReconciling)).To(Equal("True/WaitingForPods"))
		g.Expect(kstatusOf(g, ps)).To(Equal(kstatus.InProgressStatus))
	})
	for _, p := range pods {
		g := NewWithT(t)
		g.Expect(metav1.IsControlledBy(&p, getPodSet(g, ps))).To(BeTrue(), "pod %s has a ControllerRef", p.Name)
		g.Expect(p.Labels).To(HaveKeyWithValue("app", "web"))
		g.Expect(p.GenerateName).To(Equal("web-"))
		schedule(t, &p, true)
	}
	eventually(t, func(g Gomega) {
		got := getPodSet(g, ps)
		g.Expect(got.Status.ReadyReplicas).To(Equal(int32(3)))
		g.Expect(got.Status.PodNames).To(HaveLen(3))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionAvailable)).To(Equal("True/AllReplicasReady"))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionProgressing)).To(Equal("False/Stable"))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionReady)).To(Equal("True/AllReplicasReady"))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionReconciling)).To(BeEmpty())
		g.Expect(condition(g, ps, appsv1alpha1.ConditionStalled)).To(BeEmpty())
		g.Expect(kstatusOf(g, ps)).To(Equal(kstatus.CurrentStatus))
	})
	// What a scrape of the manager reads: the same counts and conditions.
	eventually(t, func(g Gomega) {
		for state, want := range map[string]float64{"desired": 3, "current": 3, "ready": 3} {
			v, ok, err := testenv.Gauge("tend_podset_replicas", map[string]string{"namespace": ns, "name": "web", "state": state})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(BeTrue(), state)
			g.Expect(v).To(Equal(want), state)
		}
		v, ok, err := testenv.Gauge("tend_resource_condition", map[string]string{
			"kind": "PodSet", "namespace": ns, "name": "web", "type": "Ready", "status": "True", "reason": "AllReplicasReady"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok && v == 1).To(BeTrue())
	})

	// Up to 5 through the /scale subresource, as kubectl scale and an HPA do.
	scale := &autoscalingv1.Scale{}
	g := NewWithT(t)
	g.Expect(env.Client.SubResource("scale").Get(t.Context(), ps, scale)).To(Succeed())
	g.Expect(scale.Status.Replicas).To(Equal(int32(3)))
	g.Expect(scale.Status.Selector).To(Equal("apps.tend.dev/podset=web"))
	scale.Spec.Replicas = 5
	g.Expect(env.Client.SubResource("scale").Update(t.Context(), ps, client.WithSubResourceBody(scale))).To(Succeed())
	eventually(t, func(g Gomega) { g.Expect(livePods(g, ps)).To(HaveLen(5)) })

	// Down to 3: the two new, unscheduled pods go, never a Ready one.
	ready := map[string]bool{}
	for _, p := range pods {
		ready[p.Name] = true
	}
	setReplicas(t, ps, 3)
	eventually(t, func(g Gomega) {
		left := livePods(g, ps)
		g.Expect(left).To(HaveLen(3))
		for _, p := range left {
			g.Expect(ready).To(HaveKey(p.Name))
		}
	})

	// To zero.
	setReplicas(t, ps, 0)
	eventually(t, func(g Gomega) {
		g.Expect(livePods(g, ps)).To(BeEmpty())
		g.Expect(getPodSet(g, ps).Status.Replicas).To(BeZero())
	})

	// Deleted, its series go with it.
	g.Expect(env.Client.Delete(t.Context(), ps)).To(Succeed())
	eventually(t, func(g Gomega) {
		_, ok, err := testenv.Gauge("tend_podset_replicas", map[string]string{"namespace": ns, "name": "web", "state": "desired"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeFalse())
	})
}

func setReplicas(t *testing.T, ps *appsv1alpha1.PodSet, n int32) {
	t.Helper()
	g := NewWithT(t)
	fresh := getPodSet(g, ps)
	patch := client.MergeFrom(fresh.DeepCopy())
	fresh.Spec.Replicas = &n
	g.Expect(env.Client.Patch(t.Context(), fresh, patch)).To(Succeed())
}

func TestDeletedPodIsRecreated(t *testing.T) {
	ps := newPodSet(env.Namespace(t), "web", 2, nil)
	create(t, ps)
	var pods []corev1.Pod
	eventually(t, func(g Gomega) {
		pods = livePods(g, ps)
		g.Expect(pods).To(HaveLen(2))
	})
	deleteNow(t, &pods[0])
	eventually(t, func(g Gomega) {
		now := livePods(g, ps)
		g.Expect(now).To(HaveLen(2))
		g.Expect([]string{now[0].Name, now[1].Name}).NotTo(ContainElement(pods[0].Name))
	})
}

func TestAdoptsOrphansAndReleasesRelabelledPods(t *testing.T) {
	ns := env.Namespace(t)
	ps := newPodSet(ns, "web", 1, nil)
	orphan := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan", Labels: map[string]string{appsv1alpha1.LabelPodSet: "web"}},
		Spec:       ps.Spec.Template.Spec,
	}
	create(t, orphan)
	create(t, ps)

	// The orphan is adopted and counts: no second pod is created.
	eventually(t, func(g Gomega) {
		pods := livePods(g, ps)
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pods[0].Name).To(Equal("orphan"))
		g.Expect(metav1.IsControlledBy(&pods[0], getPodSet(g, ps))).To(BeTrue())
		g.Expect(getPodSet(g, ps).Status.PodNames).To(Equal([]string{"orphan"}))
	})

	// Relabelled, it is released and replaced.
	g := NewWithT(t)
	fresh := &corev1.Pod{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(orphan), fresh)).To(Succeed())
	patch := client.MergeFrom(fresh.DeepCopy())
	fresh.Labels[appsv1alpha1.LabelPodSet] = "debugging"
	g.Expect(env.Client.Patch(t.Context(), fresh, patch)).To(Succeed())
	eventually(t, func(g Gomega) {
		released := &corev1.Pod{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(orphan), released)).To(Succeed())
		g.Expect(metav1.GetControllerOf(released)).To(BeNil())
		pods := livePods(g, ps)
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pods[0].Name).NotTo(Equal("orphan"))
	})
}

func TestRefusedCreatesSetReplicaFailureAndRecover(t *testing.T) {
	ns := env.Namespace(t)
	g := NewWithT(t)
	// A quota of one pod. envtest runs no quota controller, so the test
	// writes the quota's status as kube-controller-manager would; the
	// apiserver's admission then enforces it.
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}},
	}
	create(t, quota)
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	g.Expect(env.Client.Status().Update(t.Context(), quota)).To(Succeed())

	ps := newPodSet(ns, "web", 3, nil)
	create(t, ps)
	eventually(t, func(g Gomega) {
		g.Expect(livePods(g, ps)).To(HaveLen(1))
		got := getPodSet(g, ps)
		c := meta.FindStatusCondition(got.Status.Conditions, appsv1alpha1.ConditionReplicaFailure)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(string(metav1.StatusReasonForbidden)))
		g.Expect(c.Message).To(ContainSubstring("exceeded quota"))
	})

	// With room again the PodSet goes on, at most at its backoff's pace.
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(quota), quota)).To(Succeed())
	quota.Spec.Hard[corev1.ResourcePods] = resource.MustParse("10")
	g.Expect(env.Client.Update(t.Context(), quota)).To(Succeed())
	quota.Status.Hard = quota.Spec.Hard
	g.Expect(env.Client.Status().Update(t.Context(), quota)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(livePods(g, ps)).To(HaveLen(3))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionReplicaFailure)).To(Equal("False/NoFailure"))
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
}

func TestRefusedDeletesSetReplicaFailureAndRecover(t *testing.T) {
	ns := env.Namespace(t)
	g := NewWithT(t)
	ps := newPodSet(ns, "web", 2, nil)
	create(t, ps)
	eventually(t, func(g Gomega) { g.Expect(livePods(g, ps)).To(HaveLen(2)) })

	// An admission policy refuses every pod delete in the namespace, as a
	// policy engine or a mistaken webhook might.
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "false", Message: "pod deletes are paused", Reason: ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns},
			}},
		},
	}
	create(t, policy)
	create(t, binding)
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), binding)
		_ = env.Client.Delete(context.Background(), policy)
	})
	// The apiserver loads policies asynchronously: wait until it refuses a
	// (dry-run) delete.
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}, Spec: ps.Spec.Template.Spec}
	create(t, probe)
	eventually(t, func(g Gomega) {
		g.Expect(env.Client.Delete(context.Background(), probe, client.DryRunAll)).To(MatchError(ContainSubstring("pod deletes are paused")))
	})

	setReplicas(t, ps, 1)
	eventually(t, func(g Gomega) {
		c := meta.FindStatusCondition(getPodSet(g, ps).Status.Conditions, appsv1alpha1.ConditionReplicaFailure)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(string(metav1.StatusReasonForbidden)))
		g.Expect(c.Message).To(ContainSubstring("pod deletes are paused"))
	})
	g.Expect(livePods(g, ps)).To(HaveLen(2))

	// Deletes allowed again, the next retry deletes the pod: the refused
	// delete left nothing for the PodSet to wait for.
	g.Expect(env.Client.Delete(t.Context(), binding)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(livePods(g, ps)).To(HaveLen(1))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionReplicaFailure)).To(Equal("False/NoFailure"))
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
}

func TestStatusWrittenByOthersIsCorrected(t *testing.T) {
	ps := newPodSet(env.Namespace(t), "web", 2, nil)
	create(t, ps)
	var pods []corev1.Pod
	eventually(t, func(g Gomega) {
		pods = livePods(g, ps)
		g.Expect(pods).To(HaveLen(2))
		g.Expect(getPodSet(g, ps).Status.Replicas).To(Equal(int32(2)))
	})
	// Another writer scribbles on the status; the controller's cached
	// PodSet is now stale, so its next write conflicts, and the pass after
	// recomputes from what it observes.
	g := NewWithT(t)
	scribbled := getPodSet(g, ps)
	scribbled.Status.Replicas, scribbled.Status.ReadyReplicas, scribbled.Status.PodNames = 42, 42, []string{"nobody"}
	g.Expect(env.Client.Status().Update(t.Context(), scribbled)).To(Succeed())
	schedule(t, &pods[0], true)
	eventually(t, func(g Gomega) {
		got := getPodSet(g, ps)
		g.Expect(got.Status.Replicas).To(Equal(int32(2)))
		g.Expect(got.Status.ReadyReplicas).To(Equal(int32(1)))
		g.Expect(got.Status.PodNames).To(ConsistOf(pods[0].Name, pods[1].Name))
	})
}

func TestSteadyStateWritesNothing(t *testing.T) {
	ps := newPodSet(env.Namespace(t), "web", 2, nil)
	create(t, ps)
	var pods []corev1.Pod
	eventually(t, func(g Gomega) {
		pods = livePods(g, ps)
		g.Expect(pods).To(HaveLen(2))
	})
	for _, p := range pods {
		schedule(t, &p, true)
	}
	var rv string
	eventually(t, func(g Gomega) {
		got := getPodSet(g, ps)
		g.Expect(got.Status.ReadyReplicas).To(Equal(int32(2)))
		rv = got.ResourceVersion
	})
	// A pod event that changes nothing the PodSet reports (an annotation)
	// starts a pass; the pass must not write.
	g := NewWithT(t)
	for i := range 3 {
		fresh := &corev1.Pod{}
		g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(&pods[0]), fresh)).To(Succeed())
		patch := client.MergeFrom(fresh.DeepCopy())
		fresh.Annotations = map[string]string{"touched": string(rune('a' + i))}
		g.Expect(env.Client.Patch(t.Context(), fresh, patch)).To(Succeed())
	}
	g.Consistently(func(g Gomega) {
		g.Expect(getPodSet(g, ps).ResourceVersion).To(Equal(rv))
		g.Expect(livePods(g, ps)).To(HaveLen(2))
	}).WithTimeout(3 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}

func TestLeaderElection(t *testing.T) {
	ns := env.Namespace(t)
	ps := newPodSet(ns, "db", 3, func(s *appsv1alpha1.PodSetSpec) { s.LeaderElection = true })

	// Watch the pods from the start and keep the most leaders ever labelled
	// at once. Watch events come in resourceVersion order, so this replays
	// every state the apiserver held.
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.Scheme})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(t.Context(), &corev1.PodList{}, client.InNamespace(ns))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var mu sync.Mutex
	maxLeaders := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		leaders := map[string]bool{}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			leaders[p.Name] = ev.Type != watch.Deleted && p.Labels[appsv1alpha1.LabelRole] == appsv1alpha1.RoleLeader
			n := 0
			for _, l := range leaders {
				if l {
					n++
				}
			}
			mu.Lock()
			maxLeaders = max(maxLeaders, n)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })

	create(t, ps)
	var pods []corev1.Pod
	eventually(t, func(g Gomega) {
		pods = livePods(g, ps)
		g.Expect(pods).To(HaveLen(3))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionAvailable)).To(Equal("False/ReplicasNotReady"))
	})
	// The Service exists before any leader, and selects the leader only.
	g := NewWithT(t)
	svc := &corev1.Service{}
	eventually(t, func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "db-leader"}, svc)).To(Succeed())
	})
	g.Expect(svc.Spec.Selector).To(HaveKeyWithValue(appsv1alpha1.LabelRole, appsv1alpha1.RoleLeader))
	g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))

	for _, p := range pods {
		schedule(t, &p, true)
	}
	leader := func(g Gomega) string {
		got := getPodSet(g, ps)
		g.Expect(got.Status.Leader).NotTo(BeEmpty())
		var labelled []string
		for _, p := range livePods(g, ps) {
			if p.Labels[appsv1alpha1.LabelRole] == appsv1alpha1.RoleLeader {
				labelled = append(labelled, p.Name)
			}
		}
		g.Expect(labelled).To(Equal([]string{got.Status.Leader}))
		return got.Status.Leader
	}
	var first string
	eventually(t, func(g Gomega) {
		first = leader(g)
		g.Expect(condition(g, ps, appsv1alpha1.ConditionAvailable)).To(Equal("True/AllReplicasReady"))
	})

	// The leader turns unready: another Ready pod takes over.
	for _, p := range pods {
		if p.Name == first {
			setReady(t, &p, false)
		}
	}
	var second string
	eventually(t, func(g Gomega) {
		second = leader(g)
		g.Expect(second).NotTo(Equal(first))
	})

	// The leader is deleted: the last Ready pod takes over.
	for _, p := range pods {
		if p.Name == second {
			deleteNow(t, &p)
		}
	}
	eventually(t, func(g Gomega) {
		third := leader(g)
		g.Expect(third).NotTo(Equal(first))
		g.Expect(third).NotTo(Equal(second))
	})

	// Election off: the label and the Service go.
	fresh := getPodSet(g, ps)
	patch := client.MergeFrom(fresh.DeepCopy())
	fresh.Spec.LeaderElection = false
	g.Expect(env.Client.Patch(t.Context(), fresh, patch)).To(Succeed())
	eventually(t, func(g Gomega) {
		g.Expect(getPodSet(g, ps).Status.Leader).To(BeEmpty())
		for _, p := range livePods(g, ps) {
			g.Expect(p.Labels).NotTo(HaveKey(appsv1alpha1.LabelRole))
		}
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "db-leader"}, &corev1.Service{})
		g.Expect(err).To(MatchError(ContainSubstring("not found")))
	})

	mu.Lock()
	defer mu.Unlock()
	g.Expect(maxLeaders).To(Equal(1), "never two pods labelled leader at once")
}

// eventsAbout lists the Events with reason whose regarding object is obj.
func eventsAbout(g Gomega, obj client.Object, reason string) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(obj.GetNamespace()))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.UID == obj.GetUID() && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func TestLeaderServiceNameTaken(t *testing.T) {
	ns := env.Namespace(t)
	g := NewWithT(t)
	// Another controller's Service holds the leader Service's name. envtest
	// runs no garbage collector, so its owner need not exist.
	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-leader", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "Deployment", Name: "proxy", UID: "6b9e4c1e-0000-4000-8000-000000000001",
			Controller: ptr.To(true),
		}}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "proxy"}, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	create(t, foreign)
	ps := newPodSet(ns, "db", 2, func(s *appsv1alpha1.PodSetSpec) { s.LeaderElection = true })
	create(t, ps)

	// The PodSet says so, names the Service and its owner, and says what to do.
	var pods []corev1.Pod
	eventually(t, func(g Gomega) {
		pods = livePods(g, ps)
		g.Expect(pods).To(HaveLen(2))
		c := meta.FindStatusCondition(getPodSet(g, ps).Status.Conditions, appsv1alpha1.ConditionLeaderServiceReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(appsv1alpha1.ReasonServiceNameTaken))
		g.Expect(c.Message).To(And(
			ContainSubstring("Service db-leader"), ContainSubstring("Deployment proxy"),
			ContainSubstring("delete that Service"), ContainSubstring("turn leader election off")))
	})
	// The pods turn Ready: a leader is labelled all the same, and the passes
	// that their events start report the clash again in the status only.
	for _, p := range pods {
		schedule(t, &p, true)
	}
	eventually(t, func(g Gomega) {
		got := getPodSet(g, ps)
		g.Expect(got.Status.Leader).NotTo(BeEmpty())
		g.Expect(condition(g, ps, appsv1alpha1.ConditionAvailable)).To(Equal("True/AllReplicasReady"))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionLeaderServiceReady)).To(Equal("False/ServiceNameTaken"))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionStalled)).To(Equal("True/ServiceNameTaken"))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionReady)).To(Equal("False/ServiceNameTaken"))
		g.Expect(kstatusOf(g, ps)).To(Equal(kstatus.FailedStatus))
	})
	// One Warning Event about the Service, emitted once: a second one would
	// have made the recorder write a series.
	g.Consistently(func(g Gomega) {
		evs := eventsAbout(g, getPodSet(g, ps), appsv1alpha1.ReasonServiceNameTaken)
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Type).To(Equal(corev1.EventTypeWarning))
		g.Expect(evs[0].Related).NotTo(BeNil())
		g.Expect(evs[0].Related.Name).To(Equal("db-leader"))
		g.Expect(evs[0].Note).To(ContainSubstring("Deployment proxy"))
		g.Expect(evs[0].Series).To(BeNil())
	}).WithTimeout(3 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	// The other Service is left as it was.
	got := &corev1.Service{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(foreign), got)).To(Succeed())
	g.Expect(got.Spec.Selector).To(Equal(map[string]string{"app": "proxy"}))
	g.Expect(got.OwnerReferences).To(Equal(foreign.OwnerReferences))

	// Its owner lets the name go: that Service's own delete event starts
	// the pass that creates the PodSet's Service.
	g.Expect(env.Client.Delete(t.Context(), got)).To(Succeed())
	eventually(t, func(g Gomega) {
		svc := &corev1.Service{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(foreign), svc)).To(Succeed())
		g.Expect(metav1.IsControlledBy(svc, getPodSet(g, ps))).To(BeTrue())
		g.Expect(svc.Spec.Selector).To(HaveKeyWithValue(appsv1alpha1.LabelRole, appsv1alpha1.RoleLeader))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionLeaderServiceReady)).To(Equal("True/ServiceSelectsLeader"))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionStalled)).To(BeEmpty())
		g.Expect(kstatusOf(g, ps)).To(Equal(kstatus.CurrentStatus))
	})
}

func TestLeaderServiceNameOfOthersIgnoredWithoutElection(t *testing.T) {
	ns := env.Namespace(t)
	g := NewWithT(t)
	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-leader"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "other"}, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	create(t, foreign)
	ps := newPodSet(ns, "web", 1, nil)
	create(t, ps)
	// Without leader election the name is not the PodSet's business: the
	// pass succeeds and reports nothing about it.
	eventually(t, func(g Gomega) {
		got := getPodSet(g, ps)
		g.Expect(livePods(g, ps)).To(HaveLen(1))
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, appsv1alpha1.ConditionLeaderServiceReady)).To(BeNil())
	})
	got := &corev1.Service{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(foreign), got)).To(Succeed())
	g.Expect(got.Spec.Selector).To(Equal(map[string]string{"app": "other"}))
}

// A paused PodSet gets no pod created or deleted, even when its spec asks
// or a pod goes; its status says so and kstatus waits. Resumed, it catches
// up.
func TestPauseStopsChangesUntilResumed(t *testing.T) {
	ps := newPodSet(env.Namespace(t), "web", 2, nil)
	create(t, ps)
	var pods []corev1.Pod
	eventually(t, func(g Gomega) {
		pods = livePods(g, ps)
		g.Expect(pods).To(HaveLen(2))
	})
	setPaused := func(value string) {
		t.Helper()
		g := NewWithT(t)
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%s}}}`, appsv1alpha1.AnnotationPaused, value)
		g.Expect(env.Client.Patch(t.Context(), getPodSet(g, ps), client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	}
	setPaused(`"true"`)
	eventually(t, func(g Gomega) {
		g.Expect(condition(g, ps, appsv1alpha1.ConditionProgressing)).To(Equal("False/Paused"))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionReady)).To(Equal("False/Paused"))
	})

	g := NewWithT(t)
	scaled := getPodSet(g, ps)
	scaled.Spec.Replicas = ptr.To[int32](3)
	g.Expect(env.Client.Update(t.Context(), scaled)).To(Succeed())
	deleteNow(t, &pods[0])
	eventually(t, func(g Gomega) {
		got := getPodSet(g, ps)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(got.Status.Replicas).To(Equal(int32(1)), "the status follows the pods")
		g.Expect(kstatusOf(g, got)).To(Equal(kstatus.InProgressStatus))
	})
	g.Consistently(func(g Gomega) {
		g.Expect(livePods(g, ps)).To(HaveLen(1))
	}).WithTimeout(3*time.Second).WithPolling(100*time.Millisecond).Should(Succeed(), "no pod is created while paused")

	setPaused("null")
	eventually(t, func(g Gomega) {
		g.Expect(livePods(g, ps)).To(HaveLen(3))
		g.Expect(condition(g, ps, appsv1alpha1.ConditionProgressing)).NotTo(Equal("False/Paused"))
	})
}
