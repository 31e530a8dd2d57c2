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
// +kubebuilder:validation:XValidation:rule="(!has(self.deduplicationScope) && !has(self.fifoThroughputLimit)) || (has(self.fifoQueue) && self.fifoQueue)",message="spec.deduplicationScope and spec.fifoThroughputLimit apply to FIFO queues only: set spec.fifoQueue to true or remove them"
// +kubebuilder:validation:XValidation:rule="!has(self.fifoThroughputLimit) || self.fifoThroughputLimit != 'perMessageGroupId' || (has(self.deduplicationScope) && self.deduplicationScope == 'messageGroup')",message="spec.fifoThroughputLimit perMessageGroupId (high throughput) needs spec.deduplicationScope messageGroup, as SQS requires"
// +kubebuilder:validation:XValidation:rule="!has(self.kmsMasterKeyId) || !has(self.sqsManagedSSEEnabled) || !self.sqsManagedSSEEnabled",message="spec.kmsMasterKeyId (SSE-KMS) and spec.sqsManagedSSEEnabled (SSE-SQS) exclude each other: keep one"
// +kubebuilder:validation:XValidation:rule="!has(self.kmsDataKeyReusePeriodSeconds) || has(self.kmsMasterKeyId)",message="spec.kmsDataKeyReusePeriodSeconds applies to SSE-KMS only: set spec.kmsMasterKeyId or remove it"
// +kubebuilder:validation:XValidation:rule="!has(self.managementPolicy) || self.managementPolicy != 'Observe' || (!has(self.delaySeconds) && !has(self.visibilityTimeout) && !has(self.messageRetentionPeriod) && !has(self.maximumMessageSize) && !has(self.receiveMessageWaitTimeSeconds) && !has(self.contentBasedDeduplication) && !has(self.sqsManagedSSEEnabled) && !has(self.kmsMasterKeyId) && !has(self.kmsDataKeyReusePeriodSeconds) && !has(self.deduplicationScope) && !has(self.fifoThroughputLimit) && !has(self.policy) && !has(self.redrive) && !has(self.redriveAllowPolicy) && !has(self.tags))",message="managementPolicy Observe changes nothing in SQS: remove the attributes, policy, redrive, redriveAllowPolicy and tags from the spec, or set managementPolicy Manage"
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

	// KMSMasterKeyID turns on server-side encryption with a KMS key (SSE-KMS):
	// a key ID, key ARN, alias name (alias/...) or alias ARN. It excludes
	// sqsManagedSSEEnabled.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	KMSMasterKeyID string `json:"kmsMasterKeyId,omitempty"`

	// KMSDataKeyReusePeriodSeconds is how long, in seconds, SQS reuses a data
	// key before calling KMS again (60 to 86400). SSE-KMS only.
	// +optional
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=86400
	KMSDataKeyReusePeriodSeconds *int32 `json:"kmsDataKeyReusePeriodSeconds,omitempty"`

	// DeduplicationScope is where a FIFO queue deduplicates messages: in the
	// whole queue, or within each message group. FIFO only.
	// +optional
	// +kubebuilder:validation:Enum=messageGroup;queue
	DeduplicationScope string `json:"deduplicationScope,omitempty"`

	// FIFOThroughputLimit is what a FIFO queue's throughput quota applies to:
	// the whole queue, or each message group (high throughput, which needs
	// deduplicationScope messageGroup). FIFO only.
	// +optional
	// +kubebuilder:validation:Enum=perQueue;perMessageGroupId
	FIFOThroughputLimit string `json:"fifoThroughputLimit,omitempty"`

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

	// RedriveAllowPolicy says which source queues may use this queue as
	// their dead-letter queue.
	// +optional
	RedriveAllowPolicy *RedriveAllowPolicy `json:"redriveAllowPolicy,omitempty"`

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

	// ManagementPolicy is what Tend may do to the queue: Manage (the
	// default) creates, updates, repairs and deletes it as the spec says;
	// Observe only reports an existing queue's attributes and depth, and
	// never creates, changes, tags or deletes it, whatever deletionPolicy
	// says.
	// +optional
	// +kubebuilder:default=Manage
	ManagementPolicy ManagementPolicy `json:"managementPolicy,omitempty"`

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

// RedriveAllowPolicy is the dead-letter side of a redrive: which source
// queues may send their failed messages here.
//
// +kubebuilder:validation:XValidation:rule="(self.redrivePermission == 'byQueue') == ((has(self.sourceQueueRefs) ? size(self.sourceQueueRefs) : 0) + (has(self.sourceQueueARNs) ? size(self.sourceQueueARNs) : 0) > 0)",message="redriveAllowPolicy lists source queues (sourceQueueRefs, sourceQueueARNs) with redrivePermission byQueue, and only then"
// +kubebuilder:validation:XValidation:rule="(has(self.sourceQueueRefs) ? size(self.sourceQueueRefs) : 0) + (has(self.sourceQueueARNs) ? size(self.sourceQueueARNs) : 0) <= 10",message="redriveAllowPolicy may name at most 10 source queues, as SQS allows"
type RedriveAllowPolicy struct {
	// RedrivePermission is allowAll (any queue of the account and region),
	// denyAll (none), or byQueue (those listed).
	// +kubebuilder:validation:Enum=allowAll;denyAll;byQueue
	RedrivePermission RedrivePermission `json:"redrivePermission"`

	// SourceQueueRefs names Queues in this namespace that may use this queue
	// as their dead-letter queue (byQueue). Their ARNs are this queue's
	// with their SQS names, since SQS keeps a dead-letter queue in its
	// sources' account and region.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	SourceQueueRefs []corev1.LocalObjectReference `json:"sourceQueueRefs,omitempty"`

	// SourceQueueARNs are the ARNs of source queues that Tend does not
	// manage (byQueue).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:Pattern=`^arn:aws[a-z-]*:sqs:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,80}(\.fifo)?$`
	SourceQueueARNs []string `json:"sourceQueueARNs,omitempty"`
}

// RedrivePermission says which queues may use a queue as dead-letter queue.
type RedrivePermission string

const (
	// RedrivePermissionAllowAll lets any source queue use it.
	RedrivePermissionAllowAll RedrivePermission = "allowAll"
	// RedrivePermissionDenyAll lets none.
	RedrivePermissionDenyAll RedrivePermission = "denyAll"
	// RedrivePermissionByQueue lets the listed source queues.
	RedrivePermissionByQueue RedrivePermission = "byQueue"
)

// ManagementPolicy says what Tend may do to a Queue's SQS queue.
// +kubebuilder:validation:Enum=Manage;Observe
type ManagementPolicy string

const (
	// ManagementPolicyManage creates, updates, repairs and deletes the queue.
	ManagementPolicyManage ManagementPolicy = "Manage"
	// ManagementPolicyObserve only reads an existing queue.
	ManagementPolicyObserve ManagementPolicy = "Observe"
)

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

	// Messages is the queue's approximate depth as SQS reported it at the
	// last poll (no call of its own).
	// +optional
	Messages *QueueMessages `json:"messages,omitempty"`

	// Attributes are the queue's attributes as SQS reported them at the last
	// poll, its depth and timestamps aside; set with managementPolicy
	// Observe only.
	// +optional
	Attributes map[string]string `json:"attributes,omitempty"`

	// Redrive is the last message move that kubectl tend queue redrive
	// asked for (the annotation sqs.tend.dev/redrive), and its progress.
	// +optional
	Redrive *RedriveStatus `json:"redrive,omitempty"`
}

// QueueMessages is a queue's approximate depth.
type QueueMessages struct {
	// Visible messages wait to be received (ApproximateNumberOfMessages).
	Visible int64 `json:"visible"`
	// InFlight messages were received and are not yet deleted or visible
	// again (ApproximateNumberOfMessagesNotVisible).
	InFlight int64 `json:"inFlight"`
	// Delayed messages are not yet visible (ApproximateNumberOfMessagesDelayed).
	Delayed int64 `json:"delayed"`
}

// RedriveStatus is a message move task from this (dead-letter) queue back
// to its source queues.
type RedriveStatus struct {
	// Request is the value of the annotation sqs.tend.dev/redrive that
	// this move answers; a new value asks for a new move.
	Request string `json:"request"`
	// TaskHandle is SQS's handle of the task.
	// +optional
	TaskHandle string `json:"taskHandle,omitempty"`
	// State is SQS's status of the task (RUNNING, COMPLETED, CANCELLING,
	// CANCELLED, FAILED), or Failed when SQS refused to start it.
	State string `json:"state"`
	// MessagesMoved is how many messages have moved so far.
	// +optional
	MessagesMoved int64 `json:"messagesMoved,omitempty"`
	// MessagesToMove is how many messages the task set out to move.
	// +optional
	MessagesToMove int64 `json:"messagesToMove,omitempty"`
	// Message says why the move failed or was refused.
	// +optional
	Message string `json:"message,omitempty"`
	// StartTime is when the task started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
}

// Queue is an Amazon SQS queue that Tend creates, keeps in line with its spec,
// and deletes (or retains) with it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=tend
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.conditions[?(@.type=="Synced")].reason`
// +kubebuilder:printcolumn:name="Messages",type=integer,JSONPath=`.status.messages.visible`
// +kubebuilder:printcolumn:name="In-Flight",type=integer,JSONPath=`.status.messages.inFlight`
// +kubebuilder:printcolumn:name="Delayed",type=integer,JSONPath=`.status.messages.delayed`,priority=1
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.managementPolicy`,priority=1
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

// Observed reports whether Tend only observes the queue (managementPolicy
// Observe).
func (q *Queue) Observed() bool { return q.Spec.ManagementPolicy == ManagementPolicyObserve }

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
