package podset

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/testenv"
)

// The suite runs the podset controller, through the same manager assembly
// as `tend manager` (so with its narrowed pod cache), against a real
// apiserver. envtest runs no scheduler, kubelet or garbage collector: the
// tests bind pods and set their readiness themselves, and check owner
// references rather than garbage collection (the e2e tests cover that).
// The manager also serves the conversion webhook that envtest points the
// PodSet CRD at, so PodSets can be written as v1beta1 too.

var env = testenv.New()

func TestMain(m *testing.M) {
	os.Exit(env.RunWith(m, func(ctx context.Context) error {
		podsetOpts := DefaultOptions()
		return env.StartManager(ctx, "0", []manager.Controller{Controller(&podsetOpts)})
	}))
}

// Helpers shared by the tests.

func newPodSet(ns, name string, replicas int32, mutate func(*appsv1alpha1.PodSetSpec)) *appsv1alpha1.PodSet {
	ps := &appsv1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1alpha1.PodSetSpec{
			Replicas: ptr.To(replicas),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "sleep", Image: "docker.io/library/busybox:1.35.0", Command: []string{"sleep", "3600"},
				}}},
			},
		},
	}
	if mutate != nil {
		mutate(&ps.Spec)
	}
	return ps
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	NewWithT(t).Expect(env.Client.Create(t.Context(), obj)).To(Succeed())
}

// livePods lists ps's pods from the apiserver: labelled for it, neither
// terminating nor finished.
func livePods(g Gomega, ps *appsv1alpha1.PodSet) []corev1.Pod {
	var list corev1.PodList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ps.Namespace),
		client.MatchingLabels{appsv1alpha1.LabelPodSet: ps.Name})).To(Succeed())
	return slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return !isActive(&p) })
}

func getPodSet(g Gomega, ps *appsv1alpha1.PodSet) *appsv1alpha1.PodSet {
	out := &appsv1alpha1.PodSet{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(ps), out)).To(Succeed())
	return out
}

// eventually waits for assertion, polling the apiserver.
func eventually(t *testing.T, assertion func(g Gomega)) {
	t.Helper()
	NewWithT(t).Eventually(assertion).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
}

// schedule binds a pod to a node, as the scheduler would, and marks it
// Running and Ready or not, as the kubelet would.
func schedule(t *testing.T, p *corev1.Pod, ready bool) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	if p.Spec.NodeName == "" {
		g.Expect(env.Client.SubResource("binding").Create(ctx, p, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
			Target:     corev1.ObjectReference{Kind: "Node", Name: "node-1"},
		})).To(Succeed())
	}
	setReady(t, p, ready)
}

// setReady sets a pod's phase to Running and its Ready condition.
func setReady(t *testing.T, p *corev1.Pod, ready bool) {
	t.Helper()
	g := NewWithT(t)
	fresh := &corev1.Pod{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(p), fresh)).To(Succeed())
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	fresh.Status.Phase = corev1.PodRunning
	fresh.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	g.Expect(env.Client.Status().Update(t.Context(), fresh)).To(Succeed())
}

// deleteNow deletes a pod without a grace period; envtest has no kubelet to
// finish a graceful delete.
func deleteNow(t *testing.T, p *corev1.Pod) {
	t.Helper()
	NewWithT(t).Expect(env.Client.Delete(t.Context(), p, client.GracePeriodSeconds(0))).To(Succeed())
}
