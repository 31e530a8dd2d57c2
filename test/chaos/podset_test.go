//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
)

// podSetTimeout bounds the wait for a PodSet to converge after a kill: the
// new manager must first wait out the killed one's Lease.
const podSetTimeout = 3 * time.Minute

// The manager is killed at a random point of each of a series of PodSet
// scale-ups and scale-downs. After each, the PodSet converges; a watch of
// its pods never sees more live pods than the larger of the old and new
// spec; no pod is ever without a controller; and when the PodSet is
// deleted, the garbage collector takes all of its pods.
func TestPodSetManagerKills(t *testing.T) {
	r := scenario(t, "PodSet scale, manager SIGKILL")
	ctx := t.Context()
	ns := cluster.Namespace(t)
	wc := watchClient(t)
	ps := sleepers(ns, "chaos", 2)
	if err := cluster.Client.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	w := watchPods(t, wc, ns, client.MatchingLabels{appsv1alpha1.LabelPodSet: ps.Name}, 2)
	defer func() { _ = w.stop() }()
	waitPodSet(t, ps, 2)

	current := 2
	r.Duplicates, r.Orphans = 0, 0
	for i := range kills() {
		rng := random(t)
		target := rng.IntN(7)
		if target == current {
			target = (target + 1) % 7
		}
		delay := time.Duration(rng.Int64N(int64(2500 * time.Millisecond)))
		w.setAllowed(max(current, target))
		setReplicas(t, ps, int32(target))
		time.Sleep(delay)
		k := r.killManager(t, fmt.Sprintf("kill %d (scale %d → %d, %s in)", i+1, current, target, delay.Round(time.Millisecond)))
		waitPodSet(t, ps, target)
		w.setAllowed(target)
		t.Logf("Kill %d: scale %d → %d, manager %s killed %s in, a new one led after %.1fs, converged", i+1, current, target, k.Pod, delay.Round(time.Millisecond), k.Takeover.Seconds())
		current = target
		r.Runs++
		above, evidence, orphans, _ := w.result()
		r.Duplicates, r.Orphans = above, len(orphans)
		if above > 0 {
			t.Fatalf("duplicate pods above the spec: %s", evidence)
		}
		if len(orphans) > 0 {
			t.Fatalf("pods without a controller: %v", orphans)
		}
	}

	// Deleting the PodSet lets the garbage collector delete its pods: none
	// is left behind.
	if err := cluster.Client.Delete(ctx, ps); err != nil {
		t.Fatal(err)
	}
	cluster.WaitFor(t, podSetTimeout, "the garbage collector to delete the pods", func(ctx context.Context) (bool, error) {
		var list corev1.PodList
		if err := cluster.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		if len(list.Items) > 0 {
			r.Orphans = len(list.Items)
			return false, fmt.Errorf("%d pods are left", len(list.Items))
		}
		return true, nil
	})
	above, evidence, orphans, events := w.result()
	if err := w.stop(); err != nil {
		t.Fatalf("the pod watch failed: %v", err)
	}
	r.Duplicates, r.Orphans = above, len(orphans)
	r.Restarts = restartsNow(t)
	t.Logf("The pod watch saw %d events; most pods above the spec: %d %s", events, above, evidence)
	if above > 0 || len(orphans) > 0 {
		t.Fatalf("duplicates %d (%s), orphans %v", above, evidence, orphans)
	}
}

// restartsNow is the manager containers' restart count now.
func restartsNow(t *testing.T) int {
	t.Helper()
	pods, _, err := managerPods(t.Context(), cluster.Client)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := managerRestarts(pods)
	return int(n)
}

// sleepers is a busybox PodSet, as config/samples has it.
func sleepers(ns, name string, replicas int32) *appsv1alpha1.PodSet {
	return &appsv1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1alpha1.PodSetSpec{
			Replicas: ptr.To(replicas),
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

func setReplicas(t *testing.T, ps *appsv1alpha1.PodSet, n int32) {
	t.Helper()
	got := &appsv1alpha1.PodSet{}
	if err := cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(ps), got); err != nil {
		t.Fatal(err)
	}
	orig := got.DeepCopy()
	got.Spec.Replicas = ptr.To(n)
	if err := cluster.Client.Patch(t.Context(), got, client.MergeFrom(orig)); err != nil {
		t.Fatalf("scaling PodSet %s to %d: %v", ps.Name, n, err)
	}
}

// waitPodSet waits until ps has converged on n pods: exactly n live pods,
// all Ready, and a status that says so for the current generation.
func waitPodSet(t *testing.T, ps *appsv1alpha1.PodSet, n int) {
	t.Helper()
	cluster.WaitFor(t, podSetTimeout, fmt.Sprintf("PodSet %s converged on %d Ready pods", ps.Name, n), func(ctx context.Context) (bool, error) {
		got := &appsv1alpha1.PodSet{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(ps), got); err != nil {
			return false, err
		}
		var all corev1.PodList
		if err := cluster.Client.List(ctx, &all, client.InNamespace(ps.Namespace), client.MatchingLabels{appsv1alpha1.LabelPodSet: ps.Name}); err != nil {
			return false, err
		}
		live := slices.DeleteFunc(all.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
		ready := 0
		for i := range live {
			if podReady(&live[i]) {
				ready++
			}
		}
		st := got.Status
		if len(live) != n || ready != n || st.ReadyReplicas != int32(n) || st.Replicas != int32(n) || st.ObservedGeneration != got.Generation {
			return false, fmt.Errorf("%d Ready of %d live pods; status %d/%d at generation %d of %d", ready, len(live), st.ReadyReplicas, st.Replicas, st.ObservedGeneration, got.Generation)
		}
		return true, nil
	})
}
