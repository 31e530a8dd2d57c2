package v1alpha1

// Condition types of an EtcdCluster.
const (
	// ConditionAvailable is True when a quorum of members is healthy and
	// clients can use the cluster.
	ConditionAvailable = "Available"
	// ConditionProgressing is True while Tend is creating, scaling or
	// replacing members.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when something needs attention; its reason
	// says what and its message what to do.
	ConditionDegraded = "Degraded"
)

// Reasons of the conditions.
const (
	// ReasonQuorumHealthy: enough voting members are healthy.
	ReasonQuorumHealthy = "QuorumHealthy"
	// ReasonBootstrapping: the first members are starting.
	ReasonBootstrapping = "Bootstrapping"
	// ReasonQuorumLost: fewer than a quorum of members answer.
	ReasonQuorumLost = "QuorumLost"
	// ReasonUnreachable: Tend cannot reach any member.
	ReasonUnreachable = "Unreachable"

	// ReasonCreating: Tend is creating the cluster's objects.
	ReasonCreating = "Creating"
	// ReasonScalingOut, ReasonScalingIn: members are being added or removed.
	ReasonScalingOut = "ScalingOut"
	ReasonScalingIn  = "ScalingIn"
	// ReasonReplacingMember: an unhealthy member is being replaced.
	ReasonReplacingMember = "ReplacingMember"
	// ReasonWaitingForMembers: a step waits for members to start, catch up
	// or become healthy.
	ReasonWaitingForMembers = "WaitingForMembers"
	// ReasonStable: the cluster matches the spec.
	ReasonStable = "Stable"
	// ReasonPaused: spec.paused is set; Tend changes nothing.
	ReasonPaused = "Paused"

	// ReasonAsExpected: nothing needs attention.
	ReasonAsExpected = "AsExpected"
	// ReasonEvenMembers: an even number of members tolerates no more
	// failures than one fewer would.
	ReasonEvenMembers = "EvenMembers"
	// ReasonMembersUnhealthy: some members do not answer.
	ReasonMembersUnhealthy = "MembersUnhealthy"
	// ReasonInvalidTLSSecrets: a Provided TLS Secret is missing or malformed.
	ReasonInvalidTLSSecrets = "InvalidTLSSecrets"
	// ReasonInitFailed: the init Job failed; its pod logs say why.
	ReasonInitFailed = "InitFailed"
	// ReasonAlarm: etcd raised an alarm (NOSPACE, CORRUPT) that someone must
	// clear.
	ReasonAlarm = "Alarm"
)

// Phases, for display only.
const (
	PhaseCreating = "Creating"
	PhaseRunning  = "Running"
	PhaseScaling  = "Scaling"
	PhaseDegraded = "Degraded"
	PhasePaused   = "Paused"
)
