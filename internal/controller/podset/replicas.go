package podset

import (
	"cmp"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
)

// burstReplicas caps the creates or deletes of one pass, so that a PodSet
// scaled to thousands does not hold a worker for minutes; the next pass goes
// on once the cache has caught up. ReplicaSet uses the same cap.
const burstReplicas = 500

// slowStart calls fn count times, in batches of 1, 2, 4, … running
// concurrently within a batch, and stops after the first batch in which a
// call failed. It returns how many calls succeeded and the first error. A
// create refused by a quota therefore costs one call, not count.
func slowStart(count int, fn func() error) (int, error) {
	done := 0
	for batch := min(1, count); done < count; batch = min(2*batch, count-done) {
		errs := make(chan error, batch)
		var wg sync.WaitGroup
		for range batch {
			wg.Go(func() { errs <- fn() })
		}
		wg.Wait()
		close(errs)
		var first error
		for err := range errs {
			if err == nil {
				done++
			} else if first == nil {
				first = err
			}
		}
		if first != nil {
			return done, first
		}
	}
	return done, nil
}

// batchSizes returns the batch sizes slowStart uses for count calls when all
// succeed; for tests and docs.
func batchSizes(count int) []int {
	var sizes []int
	for batch, done := min(1, count), 0; done < count; batch = min(2*batch, count-done) {
		sizes = append(sizes, batch)
		done += batch
	}
	return sizes
}

// podRank orders a pod for scale-down: lower ranks are deleted first.
// Unscheduled pods go first, then pending, then unready ones; among equals
// the leader goes last and the newest goes first, so that the pods that have
// run longest, and the leader, survive.
func podRank(p *corev1.Pod) int {
	switch {
	case p.Spec.NodeName == "":
		return 0
	case p.Status.Phase == corev1.PodPending:
		return 1
	case !isReady(p):
		return 2
	case p.Labels[appsv1alpha1.LabelRole] == appsv1alpha1.RoleLeader:
		return 4
	default:
		return 3
	}
}

// toDelete picks n pods of active to delete, in the order podRank gives.
func toDelete(active []*corev1.Pod, n int) []*corev1.Pod {
	ranked := slices.Clone(active)
	slices.SortStableFunc(ranked, func(a, b *corev1.Pod) int {
		if c := cmp.Compare(podRank(a), podRank(b)); c != 0 {
			return c
		}
		// Newest first; names break ties so the choice is repeatable.
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return ranked[:min(n, len(ranked))]
}

// isReady reports whether the pod's Ready condition is True.
func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// isActive reports whether a pod counts towards the replicas: neither
// terminating nor finished.
func isActive(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}
