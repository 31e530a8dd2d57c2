package v1alpha1

// Condition types of a Queue.
const (
	// ConditionReady is always present, and True when the queue exists in
	// SQS and matches the spec's latest generation. When the last exchange
	// with SQS failed, it is False with the Synced condition's reason.
	ConditionReady = "Ready"
	// ConditionSynced is True when the last exchange with SQS succeeded; when
	// False, its reason and message say what failed and what to do.
	ConditionSynced = "Synced"
	// ConditionReconciling is present only while True: the queue is being
	// created or brought in line, or SQS failed and Tend retries.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is present only while True: what SQS or the
	// settings refused cannot change until a person acts (an invalid spec,
	// refused credentials, a queue name owned elsewhere); the reason is the
	// Synced condition's.
	ConditionStalled = "Stalled"
)

// Reasons of the Ready condition.
const (
	// ReasonAvailable: the queue exists and matches the spec.
	ReasonAvailable = "Available"
	// ReasonCreating: the queue is being created or brought in line.
	ReasonCreating = "Creating"
	// ReasonDeleting: the Queue is being deleted.
	ReasonDeleting = "Deleting"
	// ReasonQueueMissing: the queue does not exist and Tend will not create
	// it (adoption: Adopt).
	ReasonQueueMissing = "QueueMissing"
)

// Reasons of the Synced condition.
const (
	// ReasonSynced: the last exchange with SQS succeeded.
	ReasonSynced = "Synced"
	// ReasonPaused: the Queue is annotated tend.dev/paused=true; Tend
	// makes no call to SQS for it until it is not (deletion excepted).
	ReasonPaused = "Paused"
	// ReasonPending: Tend has not yet reached SQS for this Queue.
	ReasonPending = "Pending"
	// ReasonInvalidSpec: SQS rejected the spec; fix it and Tend tries again.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonCredentialsError: SQS refused the credentials; fix the Secret or
	// the manager's identity.
	ReasonCredentialsError = "CredentialsError"
	// ReasonQueueExists: a queue of this name exists that Tend did not create,
	// and adoption is None.
	ReasonQueueExists = "QueueExists"
	// ReasonOwnedByAnotherQueue, on both conditions: the queue of this name
	// carries the owner tag of another Queue (another namespace, or another
	// name in this one). Tend never adopts, changes or deletes it for this
	// Queue, whatever spec.adoption says; the message names the owner.
	ReasonOwnedByAnotherQueue = "OwnedByAnotherQueue"
	// ReasonQueueDeletedRecently: SQS refuses to re-create a name for 60
	// seconds after a delete; Tend waits.
	ReasonQueueDeletedRecently = "QueueDeletedRecently"
	// ReasonWaitingForDeadLetterQueue: the Queue named by
	// redrive.deadLetterQueueRef is missing or not Ready yet.
	ReasonWaitingForDeadLetterQueue = "WaitingForDeadLetterQueue"
	// ReasonWaitingForSourceQueue: a Queue named by
	// redriveAllowPolicy.sourceQueueRefs does not exist yet.
	ReasonWaitingForSourceQueue = "WaitingForSourceQueue"
	// ReasonConnectionError: the connection settings could not be used (for
	// example the Secret is missing a key).
	ReasonConnectionError = "ConnectionError"
	// ReasonEndpointNotAllowed: the connection Secret sets an endpoint
	// (AWS_ENDPOINT_URL_SQS) that the manager's --sqs-allowed-endpoints does
	// not allow. Tend sends nothing to it; a cluster admin can allow it, or
	// the Secret can drop it.
	ReasonEndpointNotAllowed = "EndpointNotAllowed"
	// ReasonThrottled: SQS asked to slow down; Tend retries when it says.
	// (Tend's own limiter never sets a condition: a local wait is no fault.)
	ReasonThrottled = "Throttled"
	// ReasonUpstreamError: SQS failed or could not be reached; Tend retries
	// with backoff.
	ReasonUpstreamError = "UpstreamError"
)

// Annotations on a Queue.
const (
	// AnnotationReleaseFinalizer, set to "true" on a Queue being deleted, lets
	// the deletion finish without deleting the SQS queue, for when SQS cannot
	// be reached or the credentials are gone for good.
	AnnotationReleaseFinalizer = "sqs.tend.dev/release-finalizer"
)

// AnnotationRedrive, set to a new value on a dead-letter Queue (kubectl tend
// queue redrive sets the time), asks Tend to move its messages back to their
// source queues once; status.redrive answers it.
const AnnotationRedrive = "sqs.tend.dev/redrive"

// Finalizer guards the deletion of the SQS queue.
const Finalizer = "sqs.tend.dev/queue"

// AnnotationPaused, "true" on a Queue, stops Tend from calling SQS for it
// (kubectl tend pause): no create, update or drift repair; deleting the
// Queue still applies its deletion policy.
const AnnotationPaused = "tend.dev/paused"

// Paused reports whether q carries AnnotationPaused=true.
func (q *Queue) Paused() bool { return q.Annotations[AnnotationPaused] == "true" }
