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
	// ConditionRestored is set on a cluster made from a backup: True once
	// every member's data was restored, with the backup and revision in
	// its message.
	ConditionRestored = "Restored"
	// ConditionDeleting is set while a deleted cluster waits for its final
	// snapshot; its message says what it waits for and how to proceed.
	ConditionDeleting = "Deleting"
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
	// ReasonStaleVolumes: volumes of an older cluster of the same name
	// exist; Tend does not start members on them unless told to.
	ReasonStaleVolumes = "StaleVolumes"

	// ReasonRestoring: the members' data is being restored from a backup.
	ReasonRestoring = "Restoring"
	// ReasonRestoredFromBackup: the cluster started from a backup.
	ReasonRestoredFromBackup = "RestoredFromBackup"
	// ReasonRestoreFailed: a member's restore Job failed; its message and
	// the Job's logs say why.
	ReasonRestoreFailed = "RestoreFailed"

	// ReasonTakingFinalSnapshot: deletion waits for the final backup.
	ReasonTakingFinalSnapshot = "TakingFinalSnapshot"
	// ReasonFinalSnapshotFailed: the final backup failed; deletion waits
	// for a person (see the message).
	ReasonFinalSnapshotFailed = "FinalSnapshotFailed"
	// ReasonDeletingMembers: the final backup is done (or not wanted) and
	// the members and volumes are being deleted.
	ReasonDeletingMembers = "DeletingMembers"
)

// Annotations a person sets on an EtcdCluster.
const (
	// AnnotationSkipFinalSnapshot, set to "true" on a cluster being
	// deleted with deletionPolicy Snapshot, lets deletion go on without
	// the final backup (a Warning Event records it).
	AnnotationSkipFinalSnapshot = "etcd.tend.dev/skip-final-snapshot"
	// AnnotationAdoptVolumes, set to "true" on a new cluster, lets it
	// start its members on volumes left by an older cluster of the same
	// name.
	AnnotationAdoptVolumes = "etcd.tend.dev/adopt-volumes"
)

// Phases, for display only.
const (
	PhaseCreating  = "Creating"
	PhaseRunning   = "Running"
	PhaseScaling   = "Scaling"
	PhaseDegraded  = "Degraded"
	PhasePaused    = "Paused"
	PhaseRestoring = "Restoring"
	PhaseDeleting  = "Deleting"
)
