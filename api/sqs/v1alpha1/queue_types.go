package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// QueueSpec declares an SQS queue. Unset attributes take SQS's defaults and
// are left alone: Tend only repairs what the spec declares.
//
// +kubebuilder:validation:XValidation:rule="has(self.queueName) == has(oldSelf.queueName) && (!has(self.queueName) || self.queueName == oldSelf.queueName)",message="spec.queueName is immutable: SQS cannot rename a queue; create a new Queue instead"
// +kubebuilder:validation:XValidation:rule="(has(self.fifoQueue) && self.fifoQueue) == (has(oldSelf.fifoQueue) && oldSelf.fifoQueue)",message="spec.fifoQueue is immutable: SQS cannot turn a standard queue into a FIFO queue or back; create a new Queue instead"
// +kubebuilder:validation:XValidation:rule="!has(self.contentBasedDeduplication) || !self.contentBasedDeduplication || (has(self.fifoQueue) && self.fifoQueue)",message="spec.contentBasedDeduplication applies to FIFO queues only: set spec.fifoQueue to true or remove it"
type QueueSpec struct {
	// QueueName is the queue's name in SQS: letters, digits, '-' and '_', and
	// the suffix ".fifo" for a FIFO queue, 80 characters at most. It defaults
	// to the Queue's metadata.name and cannot be changed.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=80
	QueueName string `json:"queueName,omitempty"`

	// FIFOQueue makes a FIFO queue, whose name must end in ".fifo". It cannot
	// be changed.
	// +optional
	FIFOQueue bool `json:"fifoQueue,omitempty"`

	// DelaySeconds delays every new message by this many seconds (0 to 900).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=900
	DelaySeconds *int32 `json:"delaySeconds,omitempty"`

	// VisibilityTimeout is how long, in seconds, a received message stays
	// hidden from other consumers (0 to 43200).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=43200
	VisibilityTimeout *int32 `json:"visibilityTimeout,omitempty"`

	// MessageRetentionPeriod is how long, in seconds, SQS keeps a message
	// (60 to 1209600, that is one minute to 14 days).
	// +optional
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=1209600
	MessageRetentionPeriod *int32 `json:"messageRetentionPeriod,omitempty"`

	// MaximumMessageSize is the largest message, in bytes, that the queue
	// accepts (1024 to 1048576).
	// +optional
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=1048576
	MaximumMessageSize *int32 `json:"maximumMessageSize,omitempty"`

	// ReceiveMessageWaitTimeSeconds turns on long polling: a receive waits up
	// to this many seconds for a message (0 to 20).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	ReceiveMessageWaitTimeSeconds *int32 `json:"receiveMessageWaitTimeSeconds,omitempty"`

	// ContentBasedDeduplication lets a FIFO queue deduplicate messages by a
	// hash of their body.
	// +optional
	ContentBasedDeduplication *bool `json:"contentBasedDeduplication,omitempty"`

	// SQSManagedSSEEnabled encrypts messages at rest with keys that SQS owns.
	// +optional
	SQSManagedSSEEnabled *bool `json:"sqsManagedSSEEnabled,omitempty"`

	// Policy is the queue's IAM access policy, written as YAML or JSON. Tend
	// compares it by meaning, not by text, so key order does not matter.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Policy *apiextensionsv1.JSON `json:"policy,omitempty"`

	// Redrive sends messages that fail maxReceiveCount times to a dead-letter
	// queue.
	// +optional
	Redrive *Redrive `json:"redrive,omitempty"`

	// Tags are the queue's cost-allocation tags. Keys under "tend.dev/" are
	// Tend's own.
	// +optional
	// +kubebuilder:validation:MaxProperties=49
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 128 && size(self[k]) <= 256)",message="a tag key may have at most 128 characters and a value at most 256"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('aws:') && !k.startsWith('tend.dev/'))",message="tag keys starting with aws: or tend.dev/ are reserved"
	Tags map[string]string `json:"tags,omitempty"`

	// DeletionPolicy says what happens to the SQS queue when the Queue is
	// deleted: Delete it (the default), or Retain it.
	// +optional
	// +kubebuilder:default=Delete
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// Adoption says what to do when a queue of this name already exists in
	// SQS and no Queue owns it (it has no tend.dev/queue tag): None (the
	// default) refuses to touch it, Adopt manages it and never creates one,
	// AdoptOrCreate manages it or creates it when there is none. A queue
	// whose tend.dev/queue tag names another Queue is never adopted.
	// +optional
	// +kubebuilder:default=None
	Adoption Adoption `json:"adoption,omitempty"`

	// PollInterval is how often Tend checks the queue in SQS for changes made
	// outside Kubernetes, give or take 10%. At least 30s.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s')",message="pollInterval must be at least 30s, so that many queues cannot flood the SQS API"
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`

	// Connection overrides, for this Queue, the AWS settings that the manager
	// takes from its environment (region, credentials, endpoint).
	// +optional
	Connection *Connection `json:"connection,omitempty"`
}

// Redrive is a queue's dead-letter configuration.
//
// +kubebuilder:validation:XValidation:rule="has(self.deadLetterQueueRef) != has(self.deadLetterTargetARN)",message="set exactly one of redrive.deadLetterQueueRef and redrive.deadLetterTargetARN"
type Redrive struct {
	// DeadLetterQueueRef names another Queue in this namespace as the
	// dead-letter queue. Tend waits until it is Ready.
	// +optional
	DeadLetterQueueRef *corev1.LocalObjectReference `json:"deadLetterQueueRef,omitempty"`

	// DeadLetterTargetARN is the ARN of a dead-letter queue that Tend does
	// not manage.
	// +optional
	// +kubebuilder:validation:Pattern=`^arn:aws[a-z-]*:sqs:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,80}(\.fifo)?$`
	DeadLetterTargetARN string `json:"deadLetterTargetARN,omitempty"`

	// MaxReceiveCount is how many times a message is received before it moves
	// to the dead-letter queue (1 to 1000).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxReceiveCount int32 `json:"maxReceiveCount"`
}

// Connection overrides the manager's AWS settings for one Queue.
type Connection struct {
	// Region overrides the region (otherwise AWS_REGION of the manager).
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]+$`
	Region string `json:"region,omitempty"`

	// SecretRef names a Secret in the Queue's namespace with the keys
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and optionally
	// AWS_SESSION_TOKEN, AWS_REGION and AWS_ENDPOINT_URL_SQS. The endpoint is
	// honoured only together with credentials from the same Secret, so that
	// the manager's own credentials never sign requests to an endpoint that a
	// namespace chose, and only when the manager's --sqs-allowed-endpoints
	// allows it; otherwise the Queue is refused with EndpointNotAllowed.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
}

// DeletionPolicy says what happens to the SQS queue when its Queue goes.
// +kubebuilder:validation:Enum=Delete;Retain
type DeletionPolicy string

const (
	// DeletionPolicyDelete deletes the SQS queue with the Queue.
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyRetain leaves the SQS queue in place.
	DeletionPolicyRetain DeletionPolicy = "Retain"
)

// Adoption says whether Tend takes over a queue that it did not create.
// +kubebuilder:validation:Enum=None;Adopt;AdoptOrCreate
type Adoption string

const (
	// AdoptionNone creates the queue, and refuses one that exists already.
	AdoptionNone Adoption = "None"
	// AdoptionAdopt manages an existing queue and never creates one.
	AdoptionAdopt Adoption = "Adopt"
	// AdoptionAdoptOrCreate manages an existing queue, or creates it.
	AdoptionAdoptOrCreate Adoption = "AdoptOrCreate"
)

// QueueStatus is what Tend last observed of the queue in SQS.
type QueueStatus struct {
	// QueueURL is the queue's URL, for the SQS API's calls.
	// +optional
	QueueURL string `json:"queueURL,omitempty"`

	// QueueARN is the queue's ARN, for policies and redrive.
	// +optional
	QueueARN string `json:"queueARN,omitempty"`

	// Conditions: Ready says whether the queue exists and matches the spec;
	// Synced says whether the last exchange with SQS succeeded, and if not,
	// why.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation of the spec that the last
	// sync applied, or found that a person must fix (Stalled).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// LastSyncTime is when Tend last changed the queue in SQS to match the
	// spec: created it, updated it, or repaired drift. Polls that find
	// nothing to do do not move it.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
}

// Queue is an Amazon SQS queue that Tend creates, keeps in line with its spec,
// and deletes (or retains) with it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=tend
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.conditions[?(@.type=="Synced")].reason`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.queueURL`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="(has(self.spec.queueName) ? self.spec.queueName : self.metadata.name).matches('^[A-Za-z0-9_-]{1,75}[.]fifo$') || (has(self.spec.queueName) ? self.spec.queueName : self.metadata.name).matches('^[A-Za-z0-9_-]{1,80}$')",message="the queue name (spec.queueName, or metadata.name when that is unset) may hold only letters, digits, '-' and '_', plus a .fifo suffix, and at most 80 characters: set spec.queueName"
// +kubebuilder:validation:XValidation:rule="(has(self.spec.queueName) ? self.spec.queueName : self.metadata.name).endsWith('.fifo') == (has(self.spec.fifoQueue) && self.spec.fifoQueue)",message="a FIFO queue's name must end in .fifo, and only a FIFO queue's may: set spec.fifoQueue, or change the name"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="a Queue's name is at most 63 characters: its ConfigMap carries it in the label sqs.tend.dev/queue, and a label's value is at most 63"
type Queue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   QueueSpec   `json:"spec"`
	Status QueueStatus `json:"status,omitempty"`
}

// SQSName is the queue's name in SQS: spec.queueName, or metadata.name.
func (q *Queue) SQSName() string {
	if q.Spec.QueueName != "" {
		return q.Spec.QueueName
	}
	return q.Name
}

// +kubebuilder:object:root=true

// QueueList is a list of Queues.
type QueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Queue `json:"items"`
}
