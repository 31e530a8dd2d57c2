package podset

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	"github.com/tend-dev/tend/internal/readiness"
)

// failure is a create or delete that the apiserver refused in this pass.
type failure struct {
	reason  string
	message string
}

// observation is what a pass saw and did, the input of the status.
type observation struct {
	active []*corev1.Pod // owned, neither terminating nor finished
	leader string
	// paused: the PodSet is annotated tend.dev/paused=true; the pass
	// changed nothing.
	paused bool
	// managed is true when the pass compared the count with the spec (the
	// cache was up to date); failed is set when a create or delete failed.
	managed bool
	failed  *failure
	// service is what the leader phase found at the leader Service's name.
	service serviceObservation
}

// selectorOf returns the label selector of ps's pods.
func selectorOf(ps *appsv1alpha1.PodSet) labels.Selector {
	return labels.SelectorFromSet(labels.Set{appsv1alpha1.LabelPodSet: ps.Name})
}

// calculateStatus computes ps's status from what a pass observed. It starts
// from the current status, so that conditions keep their transition times,
// and leaves observedGeneration to the caller.
func calculateStatus(ps *appsv1alpha1.PodSet, obs observation) appsv1alpha1.PodSetStatus {
	st := *ps.Status.DeepCopy()
	desired := ps.DesiredReplicas()
	var ready int32
	names := make([]string, 0, len(obs.active))
	for _, p := range obs.active {
		names = append(names, p.Name)
		if isReady(p) {
			ready++
		}
	}
	slices.Sort(names)
	current := int32(len(obs.active))
	st.Replicas, st.ReadyReplicas, st.PodNames = current, ready, names
	if len(names) == 0 {
		st.PodNames = nil
	}
	st.Leader = obs.leader
	st.Selector = selectorOf(ps).String()

	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: ps.Generation,
		})
	}
	readyMsg := fmt.Sprintf("%d of %d pods are Ready", ready, desired)
	switch {
	case ready < desired:
		set(appsv1alpha1.ConditionAvailable, metav1.ConditionFalse, appsv1alpha1.ReasonReplicasNotReady, readyMsg)
	case ps.Spec.LeaderElection && desired > 0 && obs.leader == "":
		set(appsv1alpha1.ConditionAvailable, metav1.ConditionFalse, appsv1alpha1.ReasonNoLeader,
			readyMsg+"; no pod is labelled leader yet")
	default:
		set(appsv1alpha1.ConditionAvailable, metav1.ConditionTrue, appsv1alpha1.ReasonAllReplicasReady, readyMsg)
	}

	switch {
	case obs.paused:
		set(appsv1alpha1.ConditionProgressing, metav1.ConditionFalse, appsv1alpha1.ReasonPaused,
			fmt.Sprintf("The annotation %s is \"true\": Tend changes no pod until it is removed (kubectl tend resume); %d of %d pods exist", appsv1alpha1.AnnotationPaused, current, desired))
	case current < desired:
		set(appsv1alpha1.ConditionProgressing, metav1.ConditionTrue, appsv1alpha1.ReasonScalingUp,
			fmt.Sprintf("%d of %d pods exist; creating the rest", current, desired))
	case current > desired:
		set(appsv1alpha1.ConditionProgressing, metav1.ConditionTrue, appsv1alpha1.ReasonScalingDown,
			fmt.Sprintf("%d pods exist, %d desired; deleting the rest", current, desired))
	case ready < desired:
		set(appsv1alpha1.ConditionProgressing, metav1.ConditionTrue, appsv1alpha1.ReasonWaitingForPods, readyMsg)
	default:
		set(appsv1alpha1.ConditionProgressing, metav1.ConditionFalse, appsv1alpha1.ReasonStable, readyMsg)
	}

	switch {
	case obs.failed != nil:
		set(appsv1alpha1.ConditionReplicaFailure, metav1.ConditionTrue, obs.failed.reason, obs.failed.message)
	case obs.managed:
		set(appsv1alpha1.ConditionReplicaFailure, metav1.ConditionFalse, appsv1alpha1.ReasonNoFailure, "")
	case meta.FindStatusCondition(st.Conditions, appsv1alpha1.ConditionReplicaFailure) == nil:
		set(appsv1alpha1.ConditionReplicaFailure, metav1.ConditionUnknown, appsv1alpha1.ReasonUnknown,
			"Waiting for the cache to show the last creates and deletes")
	}

	svcName := appsv1alpha1.LeaderServiceName(ps.Name)
	switch {
	case !ps.Spec.LeaderElection:
		meta.RemoveStatusCondition(&st.Conditions, appsv1alpha1.ConditionLeaderServiceReady)
	case obs.service.taken != "":
		set(appsv1alpha1.ConditionLeaderServiceReady, metav1.ConditionFalse, appsv1alpha1.ReasonServiceNameTaken, obs.service.taken)
	case obs.service.ready:
		set(appsv1alpha1.ConditionLeaderServiceReady, metav1.ConditionTrue, appsv1alpha1.ReasonServiceSelectsLeader,
			fmt.Sprintf("Service %s selects the pod labelled %s=%s", svcName, appsv1alpha1.LabelRole, appsv1alpha1.RoleLeader))
	case meta.FindStatusCondition(st.Conditions, appsv1alpha1.ConditionLeaderServiceReady) == nil:
		set(appsv1alpha1.ConditionLeaderServiceReady, metav1.ConditionUnknown, appsv1alpha1.ReasonUnknown,
			fmt.Sprintf("Waiting for the Service %s", svcName))
	}
	return st
}

// readinessOf is the verdict of the Ready, Reconciling and Stalled
// conditions, from the conditions that calculateStatus set. A pod the
// apiserver refuses as invalid, and a leader Service name held by another
// object, need a person; a refused create for any other reason (a quota,
// an admission webhook) is retried, so it counts as reconciling.
func readinessOf(st appsv1alpha1.PodSetStatus) readiness.Summary {
	find := func(t string) *metav1.Condition { return meta.FindStatusCondition(st.Conditions, t) }
	available, progressing := find(appsv1alpha1.ConditionAvailable), find(appsv1alpha1.ConditionProgressing)
	failure, service := find(appsv1alpha1.ConditionReplicaFailure), find(appsv1alpha1.ConditionLeaderServiceReady)
	is := func(c *metav1.Condition, s metav1.ConditionStatus) bool { return c != nil && c.Status == s }
	switch {
	case is(progressing, metav1.ConditionFalse) && progressing.Reason == appsv1alpha1.ReasonPaused:
		// Neither working nor stuck: waiting for a person to resume it.
		return readiness.From(readiness.StateNotReady, progressing, "")
	case is(service, metav1.ConditionFalse) && service.Reason == appsv1alpha1.ReasonServiceNameTaken:
		return readiness.From(readiness.StateStalled, service, "")
	case is(failure, metav1.ConditionTrue) && failure.Reason == string(metav1.StatusReasonInvalid):
		return readiness.From(readiness.StateStalled, failure, "")
	case is(failure, metav1.ConditionTrue):
		return readiness.From(readiness.StateReconciling, failure, "")
	case !is(progressing, metav1.ConditionFalse):
		return readiness.From(readiness.StateReconciling, progressing, "Waiting for the first pass")
	case !is(available, metav1.ConditionTrue):
		return readiness.From(readiness.StateReconciling, available, "Waiting for the first pass")
	case !is(failure, metav1.ConditionFalse):
		return readiness.From(readiness.StateReconciling, failure, "Waiting for the cache to show the last creates and deletes")
	case service != nil && service.Status != metav1.ConditionTrue:
		return readiness.From(readiness.StateReconciling, service, "")
	}
	return readiness.From(readiness.StateReady, available, "")
}
