package v1alpha1

// Condition types of an EtcdCluster.
const (
	// ConditionAvailable is True when a quorum of members is healthy and
	// clients can use the cluster.
	ConditionAvailable = "Available"
	// ConditionProgressing is True while Tend is creating, scaling,
	// replacing or restarting members.
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
	// ConditionContinuousArchiving is set on a cluster with spec.archive:
	// True while its archive stores every revision within its limits.
	ConditionContinuousArchiving = "ContinuousArchiving"
	// ConditionArchiveVerified is set on a cluster with spec.archive once
	// its archive was first verified: True while the last verification
	// found the archive, replayed onto its base, equal to the live
	// cluster at the revision it reached.
	ConditionArchiveVerified = "ArchiveVerified"

	// ConditionReady, on every etcd.tend.dev kind, is always present and
	// True only when the latest generation is reconciled and done: a
	// cluster that is Available with every member healthy and nothing in
	// progress, a backup Complete (and Verified when verification is on),
	// a schedule in force, a restore Complete. With Reconciling and Stalled
	// it has kstatus's meaning, for kubectl wait, Helm, Flux and Argo CD.
	ConditionReady = "Ready"
	// ConditionReconciling is present only while True: Tend works on the
	// object or waits for something that comes by itself.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is present only while True: Tend cannot go on until
	// a person acts; the reason and message are those of the condition
	// that says what to do.
	ConditionStalled = "Stalled"
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
	// ReasonMembersCannotStart: Kubernetes says why member pods do not
	// run (the StatefulSet cannot create them, they cannot be scheduled or
	// pulled, their volume claims stay Pending); the message quotes it.
	ReasonMembersCannotStart = "MembersCannotStart"
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
	// ReasonUpdating: members are restarted one at a time to run a new
	// version, image, resources, options or pod template.
	ReasonUpdating = "Updating"
	// ReasonUpdateQueued: a roll caused by a new Tend waits for its turn;
	// Tend rolls a bounded number of clusters at a time.
	ReasonUpdateQueued = "UpdateQueued"
	// ReasonBackingUpBeforeUpgrade: a minor-version upgrade waits for its
	// EtcdBackup to complete (and be verified).
	ReasonBackingUpBeforeUpgrade = "BackingUpBeforeUpgrade"
	// ReasonCheckingUpdate: every member runs the new revision; the check
	// Job confirms health, the cluster version and equal hashes.
	ReasonCheckingUpdate = "CheckingUpdate"
	// ReasonUpgradeBlocked: the version change is not a path etcd
	// supports, or its pre-upgrade backup failed; the message says what to
	// do. No member is touched.
	ReasonUpgradeBlocked = "UpgradeBlocked"
	// ReasonUpdateStalled: a restarted member did not become healthy within
	// spec.updateStrategy.memberTimeout; the roll stops there.
	ReasonUpdateStalled = "UpdateStalled"
	// ReasonUpdateCheckFailed: the check Job after a roll failed.
	ReasonUpdateCheckFailed = "UpdateCheckFailed"

	// ReasonRecoveryPlanned: the quorum is lost and a recovery is possible;
	// the message names the plan and how to approve it (Manual), or when
	// Tend starts it (Auto).
	ReasonRecoveryPlanned = "RecoveryPlanned"
	// ReasonRecoveryBlocked: the quorum is lost but Tend will not recover:
	// members it would give up may still vote (they run, but do not
	// answer), or there is nothing to recover from.
	ReasonRecoveryBlocked = "RecoveryBlocked"
	// ReasonRecovering: an in-place restore or a quorum-loss recovery runs;
	// status.recovery says which and how far.
	ReasonRecovering = "Recovering"
	// ReasonRecoveryFailed: an in-place restore or a recovery failed; the
	// members stay stopped until another restore completes.
	ReasonRecoveryFailed = "RecoveryFailed"

	// ReasonDeletingMembers: the final backup is done (or not wanted) and
	// the members and volumes are being deleted.
	ReasonDeletingMembers = "DeletingMembers"

	// ReasonNoSpace: etcd raised NOSPACE and takes no writes; Tend
	// compacts, defragments and disarms (spec.maintenance.noSpace Auto).
	ReasonNoSpace = "NoSpace"
	// ReasonNoSpaceTooLarge: the data in use alone is near the quota:
	// compaction cannot make room; raise spec.options.quotaBackendBytes.
	ReasonNoSpaceTooLarge = "NoSpaceTooLarge"
	// ReasonDefragmentationStalled: a member's defragmentation failed or
	// outlasted its timeout; no other round starts until a person asks.
	ReasonDefragmentationStalled = "DefragmentationStalled"
	// ReasonExpandingVolumes: the member claims were asked to grow to
	// spec.storage.size; the message says how far each volume is.
	ReasonExpandingVolumes = "ExpandingVolumes"
	// ReasonMigratingVolumes: members move one at a time onto new volume
	// claims of spec.storage's class and size (a class change, or a size
	// that their class cannot grow to).
	ReasonMigratingVolumes = "MigratingVolumes"
	// ReasonVolumeMigrationBlocked: the volume migration cannot go on
	// until a person acts (no such StorageClass, its backup failed, a
	// one-member cluster, or a remade StatefulSet that does not adopt the
	// member pods).
	ReasonVolumeMigrationBlocked = "VolumeMigrationBlocked"
	// ReasonReconcileFailed: Tend's last pass failed; the message quotes
	// the error. Tend retries with backoff.
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonObjectNotOurs: an object has a name that Tend derives for this
	// cluster (a Job, a volume claim, a pod), but Tend did not make it for
	// this cluster. Tend leaves it alone and waits until a person deletes
	// or renames it.
	ReasonObjectNotOurs = "ObjectNotOurs"

	// Reasons of ContinuousArchiving.
	//
	// ReasonArchiving: every revision is stored within the segment limits.
	ReasonArchiving = "Archiving"
	// ReasonWaitingForBaseBackup: the archive waits for its base backup.
	ReasonWaitingForBaseBackup = "WaitingForBaseBackup"
	// ReasonArchiveStarting: the archive's pod is starting or reading the
	// archive.
	ReasonArchiveStarting = "ArchiveStarting"
	// ReasonArchiveLagging: stored revisions trail the writes by more
	// than twice the segment age limit.
	ReasonArchiveLagging = "ArchiveLagging"
	// ReasonArchivePaused: a restore or a recovery is changing the
	// history; the archive starts again from a base taken after it.
	ReasonArchivePaused = "ArchivePaused"
	// ReasonArchiveBroken: the archive cannot go on from its last segment
	// (etcd compacted past it, or the location is another cluster's);
	// Tend starts it again from a new base when it can, the message says
	// what to do when it cannot.
	ReasonArchiveBroken = "ArchiveBroken"

	// Reasons of ArchiveVerified.
	//
	// ReasonArchiveMatches: the replayed archive hashes as the live
	// cluster at the revision reached.
	ReasonArchiveMatches = "Matches"
	// ReasonArchiveMismatch: it does not, or the archive lacks a revision
	// on the way: a restore to a point may not give back what the cluster
	// held.
	ReasonArchiveMismatch = "Mismatch"
	// ReasonArchiveVerificationFailed: the verification could not run to
	// the end (the base or the archive could not be read, the Job timed
	// out); the message says why.
	ReasonArchiveVerificationFailed = "VerificationFailed"
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
	// AnnotationRecoverFrom approves the recovery of a cluster that lost its
	// quorum (spec.quorumLoss.policy Manual): "member/<pod name>" keeps that
	// surviving member's data, "backup/<EtcdBackup name>" restores the
	// backup. Tend still acts only when its guard allows.
	AnnotationRecoverFrom = "etcd.tend.dev/recover-from"
	// AnnotationDefragment asks for one defragmentation round of every
	// member: a new value (kubectl tend defrag sets the time) starts one
	// when the cluster can take it.
	AnnotationDefragment = "etcd.tend.dev/defragment"
	// AnnotationVerifyArchive asks for one verification of the archive
	// now: a new value (such as the time) starts one once the archive
	// runs.
	AnnotationVerifyArchive = "etcd.tend.dev/verify-archive"
)

// Marks on the PersistentVolume of a member's old claim, kept while the
// member moves onto a new claim (status.maintenance.volumeMigration).
const (
	// LabelRetainedFor is the UID of the cluster that keeps the volume.
	LabelRetainedFor = "etcd.tend.dev/retained-for"
	// AnnotationRetainedMember is the member whose data the volume held.
	AnnotationRetainedMember = "etcd.tend.dev/retained-member"
	// AnnotationReclaimPolicy is the volume's reclaim policy before Tend
	// set it to Retain; Tend sets it back once the member is replaced.
	AnnotationReclaimPolicy = "etcd.tend.dev/reclaim-policy"
)

// AnnotationMemberRevision on a member pod (from the StatefulSet's
// template) is the hash of what the member runs: a pod whose value differs
// from the cluster's current one is restarted by the roll.
const AnnotationMemberRevision = "etcd.tend.dev/member-revision"

// Phases, for display only.
const (
	PhaseCreating   = "Creating"
	PhaseRunning    = "Running"
	PhaseScaling    = "Scaling"
	PhaseUpdating   = "Updating"
	PhaseDegraded   = "Degraded"
	PhasePaused     = "Paused"
	PhaseRestoring  = "Restoring"
	PhaseRecovering = "Recovering"
	PhaseDeleting   = "Deleting"
)
