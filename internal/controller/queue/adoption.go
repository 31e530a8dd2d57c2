package queue

import (
	"fmt"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

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
	// planOwnedByAnother: the queue exists and its owner tag names another
	// Queue. Nothing is touched, whatever the adoption mode and whatever
	// status records: the tag is the owner's claim.
	planOwnedByAnother
)

// observed is what a pass learned of the queue in SQS.
type observed struct {
	exists bool
	url    string
	attrs  map[string]string
	tags   map[string]string
}

// decide chooses the plan from the spec's adoption mode and what SQS holds.
// A queue whose owner tag names another Queue is never this one's. Otherwise
// it is this Queue's own when its owner tag names it, or when status already
// records it (it was created or adopted before, and the tag was removed out
// of band); and a queue without an owner tag may be adopted.
func decide(q *sqsv1alpha1.Queue, obs observed) plan {
	adoption := q.Spec.Adoption
	if !obs.exists {
		if adoption == sqsv1alpha1.AdoptionAdopt {
			return planWait
		}
		return planCreate
	}
	if otherOwner(q, obs.tags) != "" {
		return planOwnedByAnother
	}
	if q.Status.QueueURL != "" || obs.tags[ownerTag] == ownerValue(q) {
		return planManage
	}
	if adoption == sqsv1alpha1.AdoptionAdopt || adoption == sqsv1alpha1.AdoptionAdoptOrCreate {
		return planAdopt
	}
	return planRefuse
}

// otherOwner returns the Queue, as "<namespace>/<name>", that a queue's
// owner tag names when that is not q; "" when the queue has no owner tag
// (or an empty one), or when the tag names q. Ownership is the namespace
// and name, not the UID, so that a Queue re-created under its name (after
// deletionPolicy Retain, or restored from a backup of the cluster) finds
// its queue again; only those who may create Queues in that namespace can
// make such a Queue.
func otherOwner(q *sqsv1alpha1.Queue, tags map[string]string) string {
	if owner := tags[ownerTag]; owner != "" && owner != ownerValue(q) {
		return owner
	}
	return ""
}

// ownedByAnotherMessage says whose the queue is and what the user can do.
func ownedByAnotherMessage(q *sqsv1alpha1.Queue, owner string) string {
	return fmt.Sprintf("The SQS queue %s belongs to the Queue %s (its %s tag says so): Tend never adopts, changes or deletes "+
		"another Queue's queue, whatever spec.adoption says, and deleting this Queue leaves it alone. "+
		"Choose another spec.queueName; or, to move the queue here, delete %s with deletionPolicy Retain, "+
		"remove the %s tag from the SQS queue, and set spec.adoption to Adopt",
		q.SQSName(), owner, ownerTag, owner, ownerTag)
}
