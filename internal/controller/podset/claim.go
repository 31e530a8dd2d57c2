package podset

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
)

// claimAction is what a PodSet does with a pod it found.
type claimAction int

const (
	claimIgnore  claimAction = iota // not ours, and not ours to take
	claimOwn                        // ours, and it matches
	claimAdopt                      // an orphan that matches: take it
	claimRelease                    // ours, but it no longer matches: let go
)

// decideClaim says what ps does with pod. A pod matches when its
// apps.tend.dev/podset label names ps. Only orphans are adopted, never a pod
// another controller owns; nothing is adopted or released while either side
// is being deleted (ReplicaSet's claimPods rules).
func decideClaim(ps *appsv1alpha1.PodSet, pod *corev1.Pod) claimAction {
	matches := pod.Labels[appsv1alpha1.LabelPodSet] == ps.Name
	ref := metav1.GetControllerOfNoCopy(pod)
	switch {
	case ref != nil && ref.UID == ps.UID && matches:
		return claimOwn
	case ref != nil && ref.UID == ps.UID:
		if pod.DeletionTimestamp != nil {
			return claimIgnore
		}
		return claimRelease
	case ref != nil:
		return claimIgnore
	case matches && pod.DeletionTimestamp == nil && ps.DeletionTimestamp == nil:
		return claimAdopt
	default:
		return claimIgnore
	}
}

// claim applies decideClaim to every pod found for the PodSet and returns
// the pods it owns afterwards. Adoption and release are patches guarded by
// the pod's resourceVersion, so that a pod changed meanwhile is judged again
// on the next pass rather than claimed on stale facts.
func (r *Reconciler) claim(ctx context.Context, ps *appsv1alpha1.PodSet, found []*corev1.Pod) ([]*corev1.Pod, error) {
	var owned []*corev1.Pod
	checked := false
	for _, pod := range found {
		switch decideClaim(ps, pod) {
		case claimOwn:
			owned = append(owned, pod)
		case claimAdopt:
			// The cache may not show yet that the PodSet is being deleted; a
			// read from the apiserver makes sure before taking new pods.
			if !checked {
				if err := r.checkAdoptable(ctx, ps); err != nil {
					return nil, err
				}
				checked = true
			}
			adopted := pod.DeepCopy()
			patch := client.MergeFromWithOptions(pod, client.MergeFromWithOptimisticLock{})
			if err := controllerutil.SetControllerReference(ps, adopted, r.Scheme()); err != nil {
				return nil, fmt.Errorf("adopting pod %s: %w", pod.Name, err)
			}
			if err := r.Patch(ctx, adopted, patch); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, fmt.Errorf("adopting pod %s: %w", pod.Name, err)
			}
			owned = append(owned, adopted)
		case claimRelease:
			released := pod.DeepCopy()
			patch := client.MergeFromWithOptions(pod, client.MergeFromWithOptimisticLock{})
			if err := controllerutil.RemoveControllerReference(ps, released, r.Scheme()); err != nil {
				return nil, fmt.Errorf("releasing pod %s: %w", pod.Name, err)
			}
			if err := r.Patch(ctx, released, patch); err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("releasing pod %s: %w", pod.Name, err)
			}
		}
	}
	return owned, nil
}

// checkAdoptable fails unless the apiserver still has ps, with the same UID,
// not being deleted.
func (r *Reconciler) checkAdoptable(ctx context.Context, ps *appsv1alpha1.PodSet) error {
	fresh := &appsv1alpha1.PodSet{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ps), fresh); err != nil {
		return fmt.Errorf("checking the PodSet before adopting pods: %w", err)
	}
	if fresh.UID != ps.UID {
		return fmt.Errorf("the PodSet was replaced (UID %s, cached %s); not adopting pods", fresh.UID, ps.UID)
	}
	if fresh.DeletionTimestamp != nil {
		return fmt.Errorf("the PodSet is being deleted; not adopting pods")
	}
	return nil
}

// podSetControllerOf returns o's controller reference if it is a PodSet.
func podSetControllerOf(o client.Object) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(o)
	if ref == nil || ref.Kind != "PodSet" || !strings.HasPrefix(ref.APIVersion, appsv1alpha1.GroupVersion.Group+"/") {
		return nil
	}
	return ref
}
