//go:build e2e

package framework

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultTimeout bounds a wait for pods and workloads on this one-node
// cluster. It is a bound on a failure, not an expectation of speed.
const DefaultTimeout = 3 * time.Minute

// pollInterval is how often a condition is checked.
const pollInterval = time.Second

// errStop marks an error that ends a wait at once: the awaited state can no
// longer come (a Job failed, a pod ended in the wrong phase).
type errStop struct{ err error }

func (e errStop) Error() string { return e.err.Error() }
func (e errStop) Unwrap() error { return e.err }

// Stop wraps err so that a condition of WaitFor ends the wait at once and
// fails the test with it.
func Stop(err error) error { return errStop{err} }

// WaitFor calls cond every second until it returns true, and fails the test
// when timeout passes first or cond returns an error wrapped with Stop. A
// plain error from cond is remembered and reported on timeout, so a
// condition can say what it saw ("phase Pending, reason ...") by returning
// false with an error.
func (c *Cluster) WaitFor(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		done, err := cond(ctx)
		var stop errStop
		switch {
		case errors.As(err, &stop):
			t.Fatalf("waiting for %s: %v", what, stop.err)
		case done:
			return
		case err != nil:
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				t.Fatalf("waiting for %s: not within %s; last seen: %v", what, timeout, last)
			}
			t.Fatalf("waiting for %s: not within %s", what, timeout)
		case <-time.After(pollInterval):
		}
	}
}

// WaitForPodPhase waits until pod ns/name reaches one of phases and returns
// it. A pod that ends (Succeeded or Failed) in another phase fails the test
// at once, with its logs.
func (c *Cluster) WaitForPodPhase(t testing.TB, ns, name string, phases ...corev1.PodPhase) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	c.WaitFor(t, DefaultTimeout, fmt.Sprintf("pod %s/%s in phase %v", ns, name, phases), func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
			return false, err
		}
		switch {
		case slices.Contains(phases, pod.Status.Phase):
			return true, nil
		case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
			return false, Stop(fmt.Errorf("the pod ended %s: %s\nits logs:\n%s", pod.Status.Phase, podSummary(pod), c.allLogs(ctx, pod)))
		}
		return false, fmt.Errorf("phase %s: %s", pod.Status.Phase, podSummary(pod))
	})
	return pod
}

// WaitForPodReady waits until pod ns/name is Ready and returns it.
func (c *Cluster) WaitForPodReady(t testing.TB, ns, name string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	c.WaitFor(t, DefaultTimeout, fmt.Sprintf("pod %s/%s Ready", ns, name), func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
			return false, err
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			return false, Stop(fmt.Errorf("the pod ended %s: %s", pod.Status.Phase, podSummary(pod)))
		}
		return false, fmt.Errorf("phase %s: %s", pod.Status.Phase, podSummary(pod))
	})
	return pod
}

// WaitForJobComplete waits until Job ns/name completes. A Job that fails
// ends the wait at once, with the logs of its pods.
func (c *Cluster) WaitForJobComplete(t testing.TB, ns, name string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	c.WaitFor(t, DefaultTimeout, fmt.Sprintf("Job %s/%s Complete", ns, name), func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job); err != nil {
			return false, err
		}
		for _, cond := range job.Status.Conditions {
			if cond.Status != corev1.ConditionTrue {
				continue
			}
			switch cond.Type {
			case batchv1.JobComplete:
				return true, nil
			case batchv1.JobFailed:
				return false, Stop(fmt.Errorf("the Job failed (%s: %s); its pods' logs:\n%s", cond.Reason, cond.Message, c.jobLogs(ctx, job)))
			}
		}
		return false, fmt.Errorf("active %d, succeeded %d, failed %d", job.Status.Active, job.Status.Succeeded, job.Status.Failed)
	})
	return job
}

// WaitForDeploymentAvailable waits until Deployment ns/name has rolled out:
// every replica updated and available.
func (c *Cluster) WaitForDeploymentAvailable(t testing.TB, ns, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	c.WaitFor(t, DefaultTimeout, fmt.Sprintf("Deployment %s/%s available", ns, name), func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return false, err
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		s := d.Status
		if s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want {
			return true, nil
		}
		return false, fmt.Errorf("replicas %d, updated %d, available %d, want %d", s.Replicas, s.UpdatedReplicas, s.AvailableReplicas, want)
	})
	return d
}

// PodLogs returns the log of one container of pod ns/name.
func (c *Cluster) PodLogs(t testing.TB, ns, name, container string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	data, err := c.Clientset.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of %s/%s %s: %v", ns, name, container, err)
	}
	return string(data)
}

// jobLogs returns the logs of a Job's pods, for a failure message.
func (c *Cluster) jobLogs(ctx context.Context, job *batchv1.Job) string {
	pods := &corev1.PodList{}
	if err := c.Client.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{"batch.kubernetes.io/job-name": job.Name}); err != nil {
		return "(cannot list the pods: " + err.Error() + ")"
	}
	var b strings.Builder
	for i := range pods.Items {
		fmt.Fprintf(&b, "--- pod %s: %s\n%s", pods.Items[i].Name, podSummary(&pods.Items[i]), c.allLogs(ctx, &pods.Items[i]))
	}
	return b.String()
}

// allLogs returns the logs of every container of pod.
func (c *Cluster) allLogs(ctx context.Context, pod *corev1.Pod) string {
	var b strings.Builder
	for _, ctr := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		data, err := c.Clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: ctr.Name}).DoRaw(ctx)
		if err != nil {
			fmt.Fprintf(&b, "[%s: no logs: %v]\n", ctr.Name, err)
			continue
		}
		fmt.Fprintf(&b, "[%s]\n%s\n", ctr.Name, strings.TrimRight(string(data), "\n"))
	}
	return b.String()
}

// podSummary says why a pod is where it is: each container's state.
func podSummary(pod *corev1.Pod) string {
	var parts []string
	for _, cond := range pod.Status.Conditions {
		if cond.Status != corev1.ConditionTrue && cond.Message != "" {
			parts = append(parts, fmt.Sprintf("%s: %s", cond.Type, cond.Message))
		}
	}
	for _, st := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		switch s := st.State; {
		case s.Waiting != nil:
			parts = append(parts, fmt.Sprintf("%s waiting (%s: %s)", st.Name, s.Waiting.Reason, s.Waiting.Message))
		case s.Terminated != nil:
			parts = append(parts, fmt.Sprintf("%s terminated (%s, exit code %d: %s)", st.Name, s.Terminated.Reason, s.Terminated.ExitCode, s.Terminated.Message))
		case s.Running != nil:
			parts = append(parts, st.Name+" running")
		}
	}
	if len(parts) == 0 {
		return "no container status yet"
	}
	return strings.Join(parts, "; ")
}
