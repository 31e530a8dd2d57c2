package etcdbackup

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tend-dev/tend/internal/agentapi"
)

// stepState is how far one step (container) of a pod got.
type stepState int

const (
	stepPending stepState = iota
	stepRunning
	stepSucceeded
	stepFailed
)

// step is one container of a Job's pod, as its status shows it.
type step struct {
	state stepState
	// result is the agent's Result, when the step is an agent's and wrote
	// one; a failed step may have one too (a hash mismatch has its
	// Verification).
	result *agentapi.Result
	// problem says why the step failed, or why it waits (an image that
	// cannot be pulled, a volume that cannot be mounted).
	problem string
	// terminal: a retry cannot help, and the Job fails at once.
	terminal   bool
	finishedAt time.Time
}

// podView is one pod of a Job.
type podView struct {
	name    string
	created time.Time
	steps   map[string]step
	// active is true until every container stopped.
	active bool
}

// readPod turns a pod's status into its steps: each agent step's Result
// from its termination message, and for a step that failed or waits, why.
// This is the one place where termination messages are parsed.
func readPod(pod *corev1.Pod) podView {
	v := podView{
		name:    pod.Name,
		created: pod.CreationTimestamp.Time,
		steps:   map[string]step{},
		active:  pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed,
	}
	statuses := append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		v.steps[cs.Name] = readStep(cs)
	}
	return v
}

// readStep reads one container's status.
func readStep(cs corev1.ContainerStatus) step {
	isAgent := agentSteps[cs.Name]
	switch {
	case cs.State.Terminated != nil:
		return readTerminated(cs.Name, isAgent, cs.State.Terminated)
	case cs.State.Running != nil:
		s := step{state: stepRunning}
		// A sidecar that restarted: say why it stopped last time.
		if t := cs.LastTerminationState.Terminated; t != nil && cs.RestartCount > 0 {
			s.problem = fmt.Sprintf("restarted %d times; it last stopped with %s", cs.RestartCount, describeExit(t))
		}
		return s
	case cs.State.Waiting != nil:
		s := step{state: stepPending}
		switch w := cs.State.Waiting; w.Reason {
		case "", "PodInitializing", "ContainerCreating":
		default:
			s.problem = w.Reason
			if w.Message != "" {
				s.problem += ": " + w.Message
			}
		}
		return s
	}
	return step{state: stepPending}
}

// readTerminated reads a container that stopped.
func readTerminated(name string, isAgent bool, t *corev1.ContainerStateTerminated) step {
	s := step{finishedAt: t.FinishedAt.Time, terminal: t.ExitCode == agentapi.ExitTerminal}
	if !isAgent {
		if t.ExitCode == 0 {
			s.state = stepSucceeded
			return s
		}
		s.state = stepFailed
		s.problem = describeExit(t)
		if msg := lastLines(t.Message, 3); msg != "" {
			s.problem += ": " + msg
		}
		return s
	}
	r, err := agentapi.ParseResult(t.Message, name)
	switch {
	case err == nil:
		s.result = &r
	case t.ExitCode == 0:
		// An agent always reports; a step that says nothing proved nothing.
		s.state, s.terminal = stepFailed, true
		s.problem = fmt.Sprintf("exited 0 but wrote no result (%v)", err)
		return s
	}
	if t.ExitCode == 0 && r.Error == "" {
		s.state = stepSucceeded
		return s
	}
	s.state = stepFailed
	switch {
	case s.result != nil && r.Error != "":
		s.problem = r.Error
		s.terminal = s.terminal || r.Terminal
	case s.result != nil:
		s.problem = describeExit(t)
	default:
		// Killed before it wrote a result: out of memory, a deadline, a
		// node that went away.
		s.problem = describeExit(t) + " before it wrote a result"
	}
	return s
}

// describeExit says how a container stopped, such as "exit code 137
// (OOMKilled)".
func describeExit(t *corev1.ContainerStateTerminated) string {
	d := fmt.Sprintf("exit code %d", t.ExitCode)
	if t.Reason != "" && t.Reason != "Error" && t.Reason != "Completed" {
		d += " (" + t.Reason + ")"
	}
	if t.Signal != 0 {
		d += fmt.Sprintf(", signal %d", t.Signal)
	}
	return d
}

// lastLines is the last n non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// jobView is a Job and its pods, newest pod first.
type jobView struct {
	name    string
	created time.Time
	// complete and failed are the Job controller's verdict.
	complete, failed bool
	// failure says why the Job failed, from its condition.
	failure string
	pods    []podView
}

// readJob reads a Job and its pods. pods must be the Job's own (controlled
// by its UID).
func readJob(job *batchv1.Job, pods []corev1.Pod) jobView {
	v := jobView{name: job.Name, created: job.CreationTimestamp.Time}
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			v.complete = true
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			v.failed = true
			v.failure = strings.TrimSuffix(c.Reason+": "+c.Message, ": ")
		}
	}
	for i := range pods {
		v.pods = append(v.pods, readPod(&pods[i]))
	}
	slices.SortFunc(v.pods, func(a, b podView) int {
		return cmp.Or(b.created.Compare(a.created), cmp.Compare(b.name, a.name))
	})
	return v
}

// ownedPods keeps the pods that the Job with uid controls: a Job of the
// same name that was deleted and made again leaves pods with its label.
func ownedPods(pods []corev1.Pod, job *batchv1.Job) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == job.UID {
			out = append(out, p)
		}
	}
	return out
}

// stepFailure is a step that failed: where, and why.
type stepFailure struct {
	pod, step, problem string
}

func (f stepFailure) String() string {
	return fmt.Sprintf("step %s of pod %s failed: %s", f.step, f.pod, f.problem)
}

// outcome is what a Job did, as far as its pods tell.
type outcome struct {
	// done: the Job's step of interest (backup, or delete) succeeded in
	// pod; result is its Result.
	done       bool
	pod        string
	result     *agentapi.Result
	finishedAt time.Time
	// verify is the verify step of the same pod: its Result when it
	// finished (matching or not); verifyAt when it did.
	verify   *agentapi.Result
	verifyAt time.Time
	// failed: the Job will not do what is left, for failure's reason.
	failed  bool
	failure string
	// retrying is the last failure while the Job tries again; waiting is
	// why the current pod's step waits.
	retrying string
	waiting  string
}

// complete tells whether the Job did all it is for: the main step, and
// the verification when it is on.
func (o outcome) complete(verify bool) bool { return o.done && (!verify || o.verify != nil) }

// observe tells what the Job did for step main (backup or delete), and,
// when verify is set, whether the verify step of the pod that did it
// matched. A terminal failure in any pod fails the Job (its
// podFailurePolicy says so), so it counts at once, before the Job
// controller says so.
func observe(job jobView, main string, verify bool) outcome {
	var o outcome
	var lastFailure *stepFailure
	for _, p := range job.pods {
		// Steps in pod order, so that the first failure is the cause.
		for _, name := range []string{stepBackup, stepFetch, stepRestore, stepEtcd, stepVerify, stepDelete} {
			s, ok := p.steps[name]
			if !ok {
				continue
			}
			if s.state == stepFailed && lastFailure == nil {
				lastFailure = &stepFailure{pod: p.name, step: name, problem: s.problem}
				if s.terminal {
					o.failed, o.failure = true, lastFailure.String()
				}
			}
		}
		if !o.done {
			if s := p.steps[main]; s.state == stepSucceeded {
				o.done, o.pod, o.result, o.finishedAt = true, p.name, s.result, s.finishedAt
				if v := p.steps[stepVerify]; verify && v.result != nil && v.result.Verification != nil {
					o.verify, o.verifyAt = v.result, v.finishedAt
				}
			}
		}
	}
	if len(job.pods) > 0 && job.pods[0].active {
		p := job.pods[0]
		for _, name := range []string{stepBackup, stepFetch, stepRestore, stepEtcd, stepVerify, stepDelete} {
			if s, ok := p.steps[name]; ok && s.problem != "" && s.state != stepFailed {
				o.waiting = fmt.Sprintf("step %s of pod %s: %s", name, p.name, s.problem)
				break
			}
		}
	}
	switch {
	case o.failed:
	case job.failed:
		o.failed = true
		o.failure = "the Job gave up (" + job.failure + ")"
		if lastFailure != nil {
			o.failure += "; the last failure: " + lastFailure.String()
		}
	case job.complete && !o.complete(verify):
		// The Job controller saw success that no step reported.
		o.failed = true
		o.failure = "the Job completed, but no pod reported the result of every step"
	case lastFailure != nil && !o.complete(verify):
		o.retrying = lastFailure.String()
	}
	return o
}
