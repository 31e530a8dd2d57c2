package etcdcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups="",resources=events,verbs=list

// waitingReasons are the container states that do not pass by themselves.
var waitingReasons = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "CrashLoopBackOff"}

// observeStartProblems says, in Kubernetes' own words, why member pods do
// not run: a StatefulSet that cannot create them (a ResourceQuota, an
// admission refusal), a pod that cannot be scheduled or whose container
// cannot start, a volume claim that stays Pending (no StorageClass, no
// capacity). It reads Events only when a pod has been missing, or a claim
// Pending, for startGrace, so a cluster that runs, or starts as it
// should, costs no request.
func (r *Reconciler) observeStartProblems(ctx context.Context, s *scope, data memberData) ([]string, error) {
	c := s.cluster
	var problems []string
	missing := false
	for i := range int(ptr.Deref(s.sts.Spec.Replicas, 0)) {
		name := memberName(c, i)
		pod := data.pods[name]
		if pod == nil {
			missing = true
			continue
		}
		if p := podProblem(pod, s.now); p != "" {
			problems = append(problems, p)
		}
	}
	if missing && s.now.Sub(s.sts.CreationTimestamp.Time) >= startGrace {
		msg, err := r.lastWarning(ctx, c.Namespace, "StatefulSet", s.sts.Name, "FailedCreate")
		if err != nil {
			return nil, err
		}
		if msg != "" {
			problems = append(problems, fmt.Sprintf("StatefulSet %s cannot create pods: %s", s.sts.Name, msg))
		}
	}
	for i := range data.pvcs {
		pvc := &data.pvcs[i]
		if _, ok := isMemberPVC(c, pvc); !ok || pvc.Status.Phase != corev1.ClaimPending || pvc.DeletionTimestamp != nil ||
			s.now.Sub(pvc.CreationTimestamp.Time) < startGrace {
			continue
		}
		msg, err := r.lastWarning(ctx, c.Namespace, "PersistentVolumeClaim", pvc.Name, "")
		if err != nil {
			return nil, err
		}
		if msg != "" {
			problems = append(problems, fmt.Sprintf("volume claim %s is Pending: %s", pvc.Name, msg))
		}
	}
	return problems, nil
}

// unschedulableGrace is how long a pod may stay unschedulable before it
// counts: the scheduler retries as nodes and volumes change. startGrace is
// how long a member pod may be missing, or its claim Pending, before the
// Events are read for why: every claim of a new cluster is Pending until
// its pod is scheduled, and reading the Events on each pass of each new
// cluster cost a LIST every few seconds apiece.
const (
	unschedulableGrace = 30 * time.Second
	startGrace         = 30 * time.Second
)

// podProblem is why pod cannot run, when Kubernetes says it will not by
// itself: unschedulable for a while (not for want of a volume, which its
// claim's own Events explain), or a container waiting for a reason that
// does not pass.
func podProblem(pod *corev1.Pod, now time.Time) string {
	if pod.DeletionTimestamp != nil {
		return ""
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable &&
			now.Sub(cond.LastTransitionTime.Time) >= unschedulableGrace && !strings.Contains(cond.Message, "unbound immediate PersistentVolumeClaims") {
			return fmt.Sprintf("pod %s cannot be scheduled: %s", pod.Name, cond.Message)
		}
	}
	for _, st := range pod.Status.ContainerStatuses {
		if w := st.State.Waiting; w != nil && slices.Contains(waitingReasons, w.Reason) {
			return fmt.Sprintf("pod %s: container %s is waiting, %s: %s", pod.Name, st.Name, w.Reason, w.Message)
		}
	}
	return ""
}

// lastWarning is the message of the newest Warning Event about the named
// object, of the given reason (any when empty); empty when there is none.
func (r *Reconciler) lastWarning(ctx context.Context, ns, kind, name, reason string) (string, error) {
	fields := client.MatchingFields{"involvedObject.kind": kind, "involvedObject.name": name, "type": corev1.EventTypeWarning}
	if reason != "" {
		fields["reason"] = reason
	}
	var events corev1.EventList
	if err := r.APIReader.List(ctx, &events, client.InNamespace(ns), fields); err != nil {
		return "", fmt.Errorf("listing the Events of %s %s: %w", kind, name, err)
	}
	var newest *corev1.Event
	for i := range events.Items {
		e := &events.Items[i]
		if newest == nil || eventTime(e).After(eventTime(newest)) {
			newest = e
		}
	}
	if newest == nil {
		return "", nil
	}
	return newest.Message, nil
}

// eventTime is when e last happened, whichever API recorded it.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	default:
		return e.CreationTimestamp.Time
	}
}
