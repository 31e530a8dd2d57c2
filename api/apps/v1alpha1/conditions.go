package v1alpha1

// Labels that Tend sets on a PodSet's pods.
const (
	// LabelPodSet names the PodSet that a pod belongs to. It is the PodSet's
	// selector: a pod carrying it with the PodSet's name is adopted, a pod
	// whose value changes is released.
	LabelPodSet = "apps.tend.dev/podset"
	// LabelRole marks the elected pod, with the value RoleLeader.
	LabelRole = "tend.dev/role"
	// RoleLeader is LabelRole's value on the leader pod.
	RoleLeader = "leader"
)

// AnnotationPaused, "true" on a PodSet, stops Tend from creating, deleting,
// adopting or relabelling its pods (kubectl tend pause); the status still
// follows them.
const AnnotationPaused = "tend.dev/paused"

// Paused reports whether ps carries AnnotationPaused=true.
func (ps *PodSet) Paused() bool { return ps.Annotations[AnnotationPaused] == "true" }

// LeaderServiceName returns the name of the Service that selects the leader
// pod of the PodSet called name.
func LeaderServiceName(name string) string { return name + "-leader" }

// Condition types of a PodSet.
const (
	// ConditionAvailable is True when every desired pod is Ready (and, with
	// leaderElection, a leader is labelled).
	ConditionAvailable = "Available"
	// ConditionProgressing is True while Tend is creating or deleting pods or
	// waiting for new pods to turn Ready.
	ConditionProgressing = "Progressing"
	// ConditionReplicaFailure is True when the last attempt to create or
	// delete a pod failed; its reason is the apiserver's.
	ConditionReplicaFailure = "ReplicaFailure"
	// ConditionLeaderServiceReady is True when the Service <name>-leader is
	// the PodSet's own and selects the leader pod. It is set only while
	// leaderElection is on.
	ConditionLeaderServiceReady = "LeaderServiceReady"

	// ConditionReady is always present, and True only when the latest
	// generation is reconciled: every desired pod exists and is Ready, no
	// create or delete failed, and (with leaderElection) the leader is
	// labelled and its Service selects it. With Reconciling and Stalled it
	// has kstatus's meaning, for kubectl wait, Helm, Flux and Argo CD.
	ConditionReady = "Ready"
	// ConditionReconciling is present only while True: pods are being
	// created, deleted or awaited.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is present only while True: the apiserver refuses
	// the pods as invalid, or another object holds the leader Service's
	// name; a person must act.
	ConditionStalled = "Stalled"
)

// Reasons of the Available condition.
const (
	// ReasonAllReplicasReady: every desired pod is Ready.
	ReasonAllReplicasReady = "AllReplicasReady"
	// ReasonReplicasNotReady: fewer pods are Ready than desired.
	ReasonReplicasNotReady = "ReplicasNotReady"
	// ReasonNoLeader: leaderElection is on and no pod is labelled leader yet.
	ReasonNoLeader = "NoLeader"
)

// Reasons of the Progressing condition.
const (
	// ReasonScalingUp: Tend is creating pods.
	ReasonScalingUp = "ScalingUp"
	// ReasonScalingDown: Tend is deleting pods.
	ReasonScalingDown = "ScalingDown"
	// ReasonWaitingForPods: the count is right; some pods are not Ready yet.
	ReasonWaitingForPods = "WaitingForPods"
	// ReasonStable: the count is right and every pod is Ready.
	ReasonStable = "Stable"
	// ReasonPaused: the PodSet is annotated tend.dev/paused=true; Tend
	// creates, deletes, adopts and relabels no pod until it is not.
	ReasonPaused = "Paused"
)

// Reasons of the ReplicaFailure condition. When True, the reason is the
// apiserver's (for example Forbidden for a quota or admission refusal), or
// one of these.
const (
	// ReasonNoFailure: the last creates and deletes succeeded.
	ReasonNoFailure = "NoFailure"
	// ReasonFailedCreate: a pod create failed for a reason the apiserver did
	// not name.
	ReasonFailedCreate = "FailedCreate"
	// ReasonFailedDelete: a pod delete failed for a reason the apiserver did
	// not name.
	ReasonFailedDelete = "FailedDelete"
)

// Reasons of the LeaderServiceReady condition.
const (
	// ReasonServiceSelectsLeader: the Service <name>-leader is the PodSet's
	// and selects the pod labelled tend.dev/role=leader.
	ReasonServiceSelectsLeader = "ServiceSelectsLeader"
	// ReasonServiceNameTaken: a Service that the PodSet does not control
	// already has the name <name>-leader. Tend neither adopts nor changes it;
	// the message names its owner. It is also the reason of the Warning
	// Event that reports the clash.
	ReasonServiceNameTaken = "ServiceNameTaken"
)

// ReasonUnknown is every condition's reason before the first pass has
// observed the pods.
const ReasonUnknown = "Unknown"
