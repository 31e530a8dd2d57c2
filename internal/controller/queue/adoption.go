package queue

import sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"

// plan is what a pass does about the queue's existence.
type plan int

const (
	// planManage: the queue exists and is this Queue's; repair drift.
	planManage plan = iota
	// planAdopt: the queue exists, Tend did not create it, and the spec
	// allows taking it over.
	planAdopt
	// planRefuse: the queue exists, Tend did not create it, and adoption is
	// None. Nothing is touched until the user decides.
	planRefuse
	// planCreate: there is no queue, and the spec allows creating it.
	planCreate
	// planWait: there is no queue, and adoption Adopt forbids creating it.
	planWait
)

// observed is what a pass learned of the queue in SQS.
type observed struct {
	exists bool
	url    string
	attrs  map[string]string
	tags   map[string]string
}

// decide chooses the plan from the spec's adoption mode and what SQS holds.
// A queue is this Queue's own when its owner tag names it, or when status
// already records it (it was created or adopted before).
func decide(q *sqsv1alpha1.Queue, obs observed) plan {
	adoption := q.Spec.Adoption
	if !obs.exists {
		if adoption == sqsv1alpha1.AdoptionAdopt {
			return planWait
		}
		return planCreate
	}
	if q.Status.QueueURL != "" || obs.tags[ownerTag] == ownerValue(q) {
		return planManage
	}
	if adoption == sqsv1alpha1.AdoptionAdopt || adoption == sqsv1alpha1.AdoptionAdoptOrCreate {
		return planAdopt
	}
	return planRefuse
}
