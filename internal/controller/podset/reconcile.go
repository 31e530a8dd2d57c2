package podset

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	"github.com/tend-dev/tend/internal/readiness"
)

// Reconcile brings one PodSet's pods in line with its spec: claim, scale,
// elect, then write the status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	ps := &appsv1alpha1.PodSet{}
	if err := r.Get(ctx, req.NamespacedName, ps); err != nil {
		if apierrors.IsNotFound(err) {
			r.expectations.forget(req.NamespacedName)
			r.statuses.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if ps.DeletionTimestamp != nil {
		// The garbage collector deletes the pods through their ControllerRef.
		r.expectations.forget(req.NamespacedName)
		r.statuses.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	found, err := r.listPods(ctx, ps)
	if err != nil {
		return ctrl.Result{}, err
	}
	obs := observation{paused: ps.Paused()}
	var owned []*corev1.Pod
	if obs.paused {
		// No adoption or release: only the pods it already controls.
		for _, p := range found {
			if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == ps.UID {
				owned = append(owned, p)
			}
		}
	} else if owned, err = r.claim(ctx, ps, found); err != nil {
		return ctrl.Result{}, err
	}

	var all []*corev1.Pod // owned, terminating ones included, for the leader phase
	for _, p := range owned {
		all = append(all, p)
		if isActive(p) {
			obs.active = append(obs.active, p)
		}
	}
	before := ps.DeepCopy()
	defer func() {
		ps.Status = calculateStatus(ps, obs)
		if retErr == nil {
			ps.Status.ObservedGeneration = ps.Generation
		}
		readiness.Set(&ps.Status.Conditions, ps.Generation, ps.Status.ObservedGeneration, readinessOf(ps.Status))
		wait, err := r.patchStatus(ctx, before, ps)
		if err != nil {
			retErr = errors.Join(retErr, err)
			res = ctrl.Result{} // with an error, its backoff decides the retry
		} else if wait > 0 && (res.RequeueAfter == 0 || wait < res.RequeueAfter) {
			res.RequeueAfter = wait // the held-back status write
		}
	}()

	if obs.paused {
		obs.leader = ps.Status.Leader
		return ctrl.Result{}, nil
	}
	var result ctrl.Result
	synced, wait := r.expectations.satisfied(req.NamespacedName, owned)
	if synced {
		obs.managed = true
		if err := r.manageReplicas(ctx, ps, obs.active, &obs); err != nil {
			return ctrl.Result{}, err
		}
	} else {
		// The pod events that settle the expectations start the next pass;
		// the expiry is the backstop.
		result.RequeueAfter = wait
	}
	obs.service, err = r.reconcileLeaderService(ctx, ps)
	if err != nil {
		return ctrl.Result{}, err
	}
	obs.leader, err = r.reconcileLeader(ctx, ps, all)
	if err != nil {
		return ctrl.Result{}, err
	}
	return result, nil
}

// listPods returns the pods the PodSet may own: those its label selects and
// those that still name it as controller though their label changed.
func (r *Reconciler) listPods(ctx context.Context, ps *appsv1alpha1.PodSet) ([]*corev1.Pod, error) {
	var list corev1.PodList
	// The pods are the cache's own, not copies: a pass only reads them, and
	// copies a pod before it changes one (claim, setRole). Copying every
	// pod of every pass was 4% of the manager's CPU in B1's 100 sets × 100.
	if err := r.List(ctx, &list, client.InNamespace(ps.Namespace),
		client.MatchingFields{indexPodSets: ps.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	pods := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return pods, nil
}

// manageReplicas creates or deletes pods to reach spec.replicas, in
// slow-start batches, recording each one in the expectations first-hand.
func (r *Reconciler) manageReplicas(ctx context.Context, ps *appsv1alpha1.PodSet, active []*corev1.Pod, obs *observation) error {
	diff := int(ps.DesiredReplicas()) - len(active)
	key := client.ObjectKeyFromObject(ps)
	switch {
	case diff > 0:
		n := min(diff, burstReplicas)
		var mu sync.Mutex
		var names []string
		created, err := slowStart(n, func() error {
			name, err := r.expectations.creating(key, func() (string, error) {
				pod, err := newPod(ps)
				if err != nil {
					return "", err
				}
				if err := r.Create(ctx, pod); err != nil {
					return "", err
				}
				return pod.Name, nil // the apiserver's generated name
			})
			if err != nil {
				return err
			}
			mu.Lock()
			names = append(names, name)
			mu.Unlock()
			return nil
		})
		if created > 0 {
			r.event(ps, corev1.EventTypeNormal, "SuccessfulCreate", "Create",
				fmt.Sprintf("Created %d pods: %s", created, summarize(names)))
		}
		if err != nil {
			obs.failed = failureOf(err, appsv1alpha1.ReasonFailedCreate, "create", n-created)
			r.event(ps, corev1.EventTypeWarning, "FailedCreate", "Create", obs.failed.message)
			return fmt.Errorf("creating pods: %w", err)
		}
	case diff < 0:
		victims := toDelete(active, min(-diff, burstReplicas))
		var mu sync.Mutex
		var names []string
		i := 0
		deleted, err := slowStart(len(victims), func() error {
			mu.Lock()
			pod := victims[i]
			i++
			mu.Unlock()
			err := r.expectations.deleting(key, pod.Name, func() error {
				return r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
			})
			if err != nil {
				return err
			}
			mu.Lock()
			names = append(names, pod.Name)
			mu.Unlock()
			return nil
		})
		if deleted > 0 {
			r.event(ps, corev1.EventTypeNormal, "SuccessfulDelete", "Delete",
				fmt.Sprintf("Deleted %d pods: %s", deleted, summarize(names)))
		}
		if err != nil {
			obs.failed = failureOf(err, appsv1alpha1.ReasonFailedDelete, "delete", len(victims)-deleted)
			r.event(ps, corev1.EventTypeWarning, "FailedDelete", "Delete", obs.failed.message)
			return fmt.Errorf("deleting pods: %w", err)
		}
	}
	return nil
}

// failureOf turns a refused create or delete into the ReplicaFailure
// condition's reason (the apiserver's, when it gave one) and message.
func failureOf(err error, fallback, verb string, left int) *failure {
	reason := string(apierrors.ReasonForError(err))
	if reason == "" || reason == "Unknown" {
		reason = fallback
	}
	return &failure{reason: reason, message: fmt.Sprintf(
		"Failed to %s %d pods; retrying with backoff: %v", verb, left, err)}
}

// summarize lists up to five names and counts the rest, so that an Event
// about 500 pods stays readable.
func summarize(names []string) string {
	const shown = 5
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

func (r *Reconciler) event(ps *appsv1alpha1.PodSet, eventType, reason, action, note string) {
	r.Recorder.Eventf(ps, nil, eventType, reason, action, "%s", note)
}
