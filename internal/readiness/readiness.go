package readiness

import (
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The condition types, the same in every Tend API group.
const (
	Ready       = "Ready"
	Reconciling = "Reconciling"
	Stalled     = "Stalled"
)

// ReasonNotObserved is Reconciling's reason when a pass failed before it
// reconciled the latest generation; the next pass retries.
const ReasonNotObserved = "GenerationNotObserved"

// State is a pass's verdict on an object.
type State int

const (
	// StateReady: the latest generation is reconciled and nothing is left
	// to do.
	StateReady State = iota
	// StateReconciling: Tend is working on it, or waits for something
	// that comes by itself (pods to start, a Job to finish).
	StateReconciling
	// StateStalled: Tend cannot go on until a person acts.
	StateStalled
	// StateNotReady: neither working nor stuck, but not ready: a paused
	// cluster, whose spec changes wait for a person to resume it. kstatus
	// reads it as in progress, so a wait on it lasts until it resumes.
	StateNotReady
)

// String names the state as the conditions do (NotReady: Ready False
// alone).
func (s State) String() string {
	switch s {
	case StateReady:
		return Ready
	case StateReconciling:
		return Reconciling
	case StateStalled:
		return Stalled
	}
	return "NotReady"
}

// Summary is a verdict with its cause: the reason and message that the
// Ready condition carries when False, and Reconciling or Stalled when
// True; when Ready, what Ready's True says.
type Summary struct {
	State   State
	Reason  string
	Message string
}

// Set writes the Ready, Reconciling and Stalled conditions of an object
// whose metadata.generation is generation and whose status says observed
// (the generation that the last successful pass reconciled). A Ready
// summary of a generation not observed becomes Reconciling: the pass
// failed, and what it saw may not be all there is.
func Set(conds *[]metav1.Condition, generation, observed int64, s Summary) {
	if s.State == StateReady && observed != generation {
		s = Summary{State: StateReconciling, Reason: ReasonNotObserved, Message: fmt.Sprintf(
			"Generation %d is not reconciled yet (the last pass failed; it is retried)", generation)}
	}
	set := func(t string, status metav1.ConditionStatus) {
		apimeta.SetStatusCondition(conds, metav1.Condition{
			Type: t, Status: status, Reason: s.Reason, Message: s.Message, ObservedGeneration: generation,
		})
	}
	if s.State == StateReady {
		set(Ready, metav1.ConditionTrue)
	} else {
		set(Ready, metav1.ConditionFalse)
	}
	if s.State == StateReconciling {
		set(Reconciling, metav1.ConditionTrue)
	} else {
		apimeta.RemoveStatusCondition(conds, Reconciling)
	}
	if s.State == StateStalled {
		set(Stalled, metav1.ConditionTrue)
	} else {
		apimeta.RemoveStatusCondition(conds, Stalled)
	}
}

// From is a summary in state st with the reason and message of c, or of
// fallback when c is nil (a condition a pass has not set yet).
func From(st State, c *metav1.Condition, fallback string) Summary {
	if c == nil {
		return Summary{State: st, Reason: "Unknown", Message: fallback}
	}
	return Summary{State: st, Reason: c.Reason, Message: c.Message}
}
