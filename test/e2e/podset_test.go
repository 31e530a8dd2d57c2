//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// podSetTimeout bounds each wait for the PodSet: pods start from local
// images on one node, so anything slower is a bug worth a failure.
const podSetTimeout = 2 * time.Minute

// The busybox sample really runs: pods reach Ready on the node, follow
// kubectl scale up and down, come back when deleted, and the garbage
// collector removes them with the PodSet.
func TestPodSetRunsScalesAndHeals(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.Namespace(t)
	ps := sleepers(ns, "sleepers", 3, false)
	if err := cluster.Client.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	// kubectl wait, as scripts and GitOps tools do, then the pods it vouches for.
	cluster.WaitReady(t, podSetTimeout, ns, "podset/sleepers")
	pods := waitPodSetReady(t, ps, 3)
	for _, p := range pods {
		if p.Spec.NodeName != cluster.Settings.NodeName || p.Status.PodIP == "" {
			t.Errorf("pod %s is on node %q with IP %q; want it running on %s", p.Name, p.Spec.NodeName, p.Status.PodIP, cluster.Settings.NodeName)
		}
	}

	// kubectl scale goes through the /scale subresource (and, as kubectl
	// prefers v1beta1, through the conversion webhook).
	cluster.Kubectl(t, "-n", ns, "scale", "podset/sleepers", "--replicas=5")
	// Ready of the new generation only: kubectl wait compares the
	// condition's observedGeneration with the PodSet's generation.
	cluster.WaitReady(t, podSetTimeout, ns, "podset/sleepers")
	if now, err := readyPods(ctx, ps); err != nil || len(now) != 5 {
		t.Errorf("kubectl wait returned with %d pods Ready (%v); want 5", len(now), err)
	}
	waitPodSetReady(t, ps, 5)
	cluster.Kubectl(t, "-n", ns, "scale", "podset/sleepers", "--replicas=1")
	pods = waitPodSetReady(t, ps, 1)

	// A deleted pod is replaced.
	if err := cluster.Client.Delete(ctx, &pods[0]); err != nil {
		t.Fatal(err)
	}
	cluster.WaitFor(t, podSetTimeout, "a replacement pod", func(ctx context.Context) (bool, error) {
		now, err := readyPods(ctx, ps)
		return len(now) == 1 && now[0].Name != pods[0].Name, err
	})

	// Deleting the PodSet lets the garbage collector delete its pods.
	if err := cluster.Client.Delete(ctx, ps); err != nil {
		t.Fatal(err)
	}
	cluster.WaitFor(t, podSetTimeout, "the garbage collector to delete the pods", func(ctx context.Context) (bool, error) {
		var list corev1.PodList
		err := cluster.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{appsv1alpha1.LabelPodSet: ps.Name})
		return err == nil && len(list.Items) == 0, err
	})
}

// With leaderElection, one Ready pod is labelled leader and the leader
// Service's endpoints hold it alone; when that pod is deleted another is
// labelled and the endpoints follow.
func TestPodSetLeaderFailover(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.Namespace(t)
	ps := sleepers(ns, "db", 3, true)
	if err := cluster.Client.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	waitPodSetReady(t, ps, 3)
	first := waitLeaderServed(t, ps, "")

	if err := cluster.Client.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	second := waitLeaderServed(t, ps, first.Name)
	if second.Name == first.Name {
		t.Fatalf("the leader is still %s", first.Name)
	}
	waitPodSetReady(t, ps, 3)
}

// sleepers is the busybox PodSet of config/samples, in ns.
func sleepers(ns, name string, replicas int32, leader bool) *appsv1alpha1.PodSet {
	return &appsv1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1alpha1.PodSetSpec{
			Replicas:       ptr.To(replicas),
			LeaderElection: leader,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": name}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{
						Name: "sleep", Image: cluster.Settings.BusyboxImage, ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{"sleep", "3600"},
					}},
				},
			},
		},
	}
}

// readyPods lists ps's live pods that are Running and Ready.
func readyPods(ctx context.Context, ps *appsv1alpha1.PodSet) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := cluster.Client.List(ctx, &list, client.InNamespace(ps.Namespace), client.MatchingLabels{appsv1alpha1.LabelPodSet: ps.Name}); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list.Items, func(p corev1.Pod) bool {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			return true
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status != corev1.ConditionTrue
			}
		}
		return true
	}), nil
}

// waitPodSetReady waits until ps has exactly n live pods, all Running and
// Ready, and its status says so, and returns the pods.
func waitPodSetReady(t *testing.T, ps *appsv1alpha1.PodSet, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	cluster.WaitFor(t, podSetTimeout, fmt.Sprintf("%d Ready pods of PodSet %s", n, ps.Name), func(ctx context.Context) (bool, error) {
		got := &appsv1alpha1.PodSet{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(ps), got); err != nil {
			return false, err
		}
		var err error
		if pods, err = readyPods(ctx, ps); err != nil {
			return false, err
		}
		var all corev1.PodList
		if err := cluster.Client.List(ctx, &all, client.InNamespace(ps.Namespace), client.MatchingLabels{appsv1alpha1.LabelPodSet: ps.Name}); err != nil {
			return false, err
		}
		live := slices.DeleteFunc(all.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
		st := got.Status
		if len(pods) != n || len(live) != n || st.ReadyReplicas != int32(n) || st.Replicas != int32(n) || len(st.PodNames) != n {
			return false, fmt.Errorf("%d Ready of %d live pods; status %d/%d, podNames %v", len(pods), len(live), st.ReadyReplicas, st.Replicas, st.PodNames)
		}
		return true, nil
	})
	return pods
}

// waitLeaderServed waits until exactly one pod of ps, other than notName, is
// labelled leader and named in status, and the leader Service's endpoints
// hold its address alone. It returns the leader.
func waitLeaderServed(t *testing.T, ps *appsv1alpha1.PodSet, notName string) *corev1.Pod {
	t.Helper()
	var leader *corev1.Pod
	cluster.WaitFor(t, podSetTimeout, "the leader and its Service endpoints", func(ctx context.Context) (bool, error) {
		var list corev1.PodList
		if err := cluster.Client.List(ctx, &list, client.InNamespace(ps.Namespace), client.MatchingLabels{
			appsv1alpha1.LabelPodSet: ps.Name, appsv1alpha1.LabelRole: appsv1alpha1.RoleLeader,
		}); err != nil {
			return false, err
		}
		if len(list.Items) > 1 {
			return false, errStopf("%d pods are labelled leader at once", len(list.Items))
		}
		if len(list.Items) == 0 || list.Items[0].Name == notName {
			return false, fmt.Errorf("no new leader labelled yet")
		}
		leader = &list.Items[0]
		got := &appsv1alpha1.PodSet{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(ps), got); err != nil {
			return false, err
		}
		if got.Status.Leader != leader.Name {
			return false, fmt.Errorf("status.leader is %q, the label is on %s", got.Status.Leader, leader.Name)
		}
		var eps discoveryv1.EndpointSliceList
		if err := cluster.Client.List(ctx, &eps, client.InNamespace(ps.Namespace), client.MatchingLabels{
			discoveryv1.LabelServiceName: appsv1alpha1.LeaderServiceName(ps.Name),
		}); err != nil {
			return false, err
		}
		var ready []string
		for _, s := range eps.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					ready = append(ready, e.Addresses...)
				}
			}
		}
		if len(ready) != 1 || ready[0] != leader.Status.PodIP {
			return false, fmt.Errorf("the Service's ready endpoints are %v, want only the leader %s at %s", ready, leader.Name, leader.Status.PodIP)
		}
		return true, nil
	})
	return leader
}

// errStopf fails a wait at once: what it saw must never happen.
func errStopf(format string, args ...any) error {
	return framework.Stop(fmt.Errorf(format, args...))
}
