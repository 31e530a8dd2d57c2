package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Maintenance is the upkeep of a running cluster's storage: compaction of
// its history, defragmentation of its members, and what happens when etcd
// runs out of space. Each runs only while nothing else does (no roll,
// membership change or recovery) and every voting member is healthy.
type Maintenance struct {
	// Compaction drops the history older than the retention. Without
	// it, Tend compacts with a retention of one hour, unless
	// spec.options.autoCompactionMode has etcd compact by itself.
	// +optional
	Compaction *Compaction `json:"compaction,omitempty"`

	// Defragmentation gives the pages that compaction freed back to the
	// file system, one member at a time, the leader last.
	// +optional
	Defragmentation *Defragmentation `json:"defragmentation,omitempty"`

	// NoSpace is what Tend does when etcd raises its NOSPACE alarm (the
	// database reached spec.options.quotaBackendBytes, and the cluster
	// takes no more writes). Auto: compact, defragment every member, and
	// disarm the alarm. Manual: report it and wait for a person.
	// +kubebuilder:default=Auto
	// +optional
	NoSpace NoSpacePolicy `json:"noSpace,omitempty"`
}

// CompactionPolicy says who compacts a cluster's history.
// +kubebuilder:validation:Enum=Auto;Disabled
type CompactionPolicy string

const (
	// CompactionAuto: Tend compacts to the revision it saw retention ago.
	CompactionAuto CompactionPolicy = "Auto"
	// CompactionDisabled: Tend never compacts; the history grows until
	// someone compacts it (or NOSPACE).
	CompactionDisabled CompactionPolicy = "Disabled"
)

// Compaction keeps the history for a time or a number of revisions.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.retention) && has(self.revisions))",message="set spec.maintenance.compaction.retention or revisions, not both"
// +kubebuilder:validation:XValidation:rule="!has(self.policy) || self.policy != 'Disabled' || (!has(self.retention) && !has(self.revisions))",message="spec.maintenance.compaction.policy Disabled takes no retention or revisions"
// +kubebuilder:validation:XValidation:rule="!has(self.retention) || duration(self.retention) >= duration('1m')",message="spec.maintenance.compaction.retention is at least 1m"
type Compaction struct {
	// Policy is Auto (Tend compacts) or Disabled (it never does).
	// +kubebuilder:default=Auto
	// +optional
	Policy CompactionPolicy `json:"policy,omitempty"`
	// Retention keeps the revisions of this last while (1h when neither
	// it nor revisions is set): Tend records the cluster's revision as
	// it goes, and compacts to the one it saw this long ago.
	// +optional
	Retention *metav1.Duration `json:"retention,omitempty"`
	// Revisions keeps this many of the latest revisions.
	// +kubebuilder:validation:Minimum=1000
	// +optional
	Revisions *int64 `json:"revisions,omitempty"`
}

// DefragmentationPolicy says whether Tend defragments by itself.
// +kubebuilder:validation:Enum=Auto;Disabled
type DefragmentationPolicy string

const (
	// DefragmentationAuto: by threshold and schedule, and on request.
	DefragmentationAuto DefragmentationPolicy = "Auto"
	// DefragmentationDisabled: only on request (and NOSPACE, if Auto).
	DefragmentationDisabled DefragmentationPolicy = "Disabled"
)

// Defragmentation says when members are defragmented: when their free
// pages pass a share of their database, on a schedule, and when a person
// asks (kubectl tend defrag, or the etcd.tend.dev/defragment annotation).
type Defragmentation struct {
	// Policy is Auto or Disabled (only on request).
	// +kubebuilder:default=Auto
	// +optional
	Policy DefragmentationPolicy `json:"policy,omitempty"`
	// FragmentationPercent: a member whose free pages are at least this
	// share of its database file is defragmented.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	// +kubebuilder:default=45
	// +optional
	FragmentationPercent *int32 `json:"fragmentationPercent,omitempty"`
	// MinimumSize: a smaller database is never defragmented by the
	// threshold; there is little to win.
	// +kubebuilder:default="100Mi"
	// +optional
	MinimumSize *resource.Quantity `json:"minimumSize,omitempty"`
	// Schedule, a cron expression in UTC ("0 3 * * 0"), defragments every
	// member at these times whatever its fragmentation.
	// +optional
	Schedule CronSchedule `json:"schedule,omitempty"`
	// Timeout bounds one member's defragmentation. One that takes longer
	// is reported and the round stops, for a person to look.
	// +kubebuilder:default="2m"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// NoSpacePolicy says what Tend does about a NOSPACE alarm.
// +kubebuilder:validation:Enum=Auto;Manual
type NoSpacePolicy string

const (
	// NoSpaceAuto: compact, defragment every member, disarm.
	NoSpaceAuto NoSpacePolicy = "Auto"
	// NoSpaceManual: report, and wait for a person.
	NoSpaceManual NoSpacePolicy = "Manual"
)

// MaintenanceStatus is the storage upkeep as it stands.
type MaintenanceStatus struct {
	// Compaction is who compacts, and the last compaction Tend made.
	// +optional
	Compaction *CompactionStatus `json:"compaction,omitempty"`
	// Defragmentation is the round under way, or the last one.
	// +optional
	Defragmentation *DefragmentationStatus `json:"defragmentation,omitempty"`
	// NoSpace is the recovery from a NOSPACE alarm under way.
	// +optional
	NoSpace *NoSpaceStatus `json:"noSpace,omitempty"`
	// VolumeMigration is the move of the members onto new volume claims,
	// under way or the last one.
	// +optional
	VolumeMigration *VolumeMigrationStatus `json:"volumeMigration,omitempty"`
}

// CompactionStatus says how the history is kept.
type CompactionStatus struct {
	// By is Tend, etcd (spec.options.autoCompactionMode), or None.
	By string `json:"by"`
	// Retention is what Tend keeps: a duration, or a count of revisions.
	// +optional
	Retention string `json:"retention,omitempty"`
	// Revision is the last revision Tend compacted to, and Time when.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// DefragmentationCause says why a round started.
// +kubebuilder:validation:Enum=Threshold;Schedule;Requested;NoSpace
type DefragmentationCause string

const (
	DefragmentationThreshold DefragmentationCause = "Threshold"
	DefragmentationSchedule  DefragmentationCause = "Schedule"
	DefragmentationRequested DefragmentationCause = "Requested"
	DefragmentationNoSpace   DefragmentationCause = "NoSpace"
)

// Phases of a defragmentation round.
const (
	DefragmentationRunning   = "Running"
	DefragmentationCompleted = "Completed"
	DefragmentationStalled   = "Stalled"
)

// DefragmentationStatus is one round: the members it takes, one at a
// time, and what each step did.
type DefragmentationStatus struct {
	// Cause is why the round started; Request the value of the
	// etcd.tend.dev/defragment annotation it answered.
	Cause DefragmentationCause `json:"cause"`
	// +optional
	Request string `json:"request,omitempty"`
	// Phase is Running, Completed or Stalled; Message says why it stalled.
	Phase string `json:"phase"`
	// +optional
	Message string `json:"message,omitempty"`
	// Members are the members the round takes, in order (the leader, when
	// it is one of them, last).
	Members []string `json:"members"`
	// Results are the steps done, in order.
	// +optional
	Results []DefragmentationResult `json:"results,omitempty"`
	// StartedAt and CompletedAt bound the round.
	StartedAt metav1.Time `json:"startedAt"`
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// LastScheduleTime is the schedule's last time that started a round.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
}

// DefragmentationResult is one member's defragmentation.
type DefragmentationResult struct {
	Member string `json:"member"`
	// Before and After are the database file's sizes.
	Before resource.Quantity `json:"before"`
	After  resource.Quantity `json:"after"`
	// Duration is how long the member took.
	Duration metav1.Duration `json:"duration"`
	Time     metav1.Time     `json:"time"`
}

// NoSpace recovery stages.
const (
	// NoSpaceCompacting: compacting to the retention's revision, then
	// defragmenting.
	NoSpaceRetention = "Retention"
	// NoSpaceCurrent: the retention's compaction did not free enough;
	// compacting to the current revision, then defragmenting.
	NoSpaceCurrent = "Current"
	// NoSpaceTooLarge: the data in use alone is near the quota; a person
	// must raise it.
	NoSpaceTooLarge = "TooLarge"
	// NoSpaceWaiting: spec.maintenance.noSpace is Manual.
	NoSpaceWaiting = "Waiting"
)

// NoSpaceStatus is the recovery from a NOSPACE alarm.
type NoSpaceStatus struct {
	// Since is when Tend saw the alarm.
	Since metav1.Time `json:"since"`
	// Stage is Retention, Current, TooLarge or Waiting.
	Stage string `json:"stage"`
	// CompactedTo is the revision the recovery compacted to.
	// +optional
	CompactedTo int64 `json:"compactedTo,omitempty"`
	// Message says what the recovery does, or what a person must do.
	// +optional
	Message string `json:"message,omitempty"`
}

// Volume migration phases.
const (
	// MigrationBackingUp: the verified backup that comes before the first
	// member moves is being taken.
	MigrationBackingUp = "BackingUp"
	// MigrationMigrating: members move one at a time.
	MigrationMigrating = "Migrating"
	// MigrationBlocked: the migration cannot go on until a person acts;
	// Message says what to do.
	MigrationBlocked = "Blocked"
	// MigrationCompleted: every member stands on a claim of the target,
	// and the old volumes are released.
	MigrationCompleted = "Completed"
)

// VolumeMigrationStatus is the move of the members, one at a time, onto
// new volume claims of spec.storage's class and size: each member leaves
// etcd, comes back empty on a new claim as a learner and is promoted; the
// volume of its old claim is kept until then.
type VolumeMigrationStatus struct {
	// StorageClassName and Size are the claims' target.
	// +optional
	StorageClassName string `json:"storageClassName,omitempty"`
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// Phase is BackingUp, Migrating, Blocked or Completed.
	Phase string `json:"phase"`
	// Message says what the migration does, or what a person must do.
	// +optional
	Message string `json:"message,omitempty"`
	// Backup is the verified EtcdBackup taken before the first member
	// moved.
	// +optional
	Backup string `json:"backup,omitempty"`
	// Remaining are the members still on claims that differ from the
	// target.
	// +optional
	Remaining []string `json:"remaining,omitempty"`
	// RetainedVolumes are the PersistentVolumes of moved members' old
	// claims, kept (reclaim policy Retain) until each replacement is a
	// healthy voter, then given back to their original reclaim policy.
	// +optional
	RetainedVolumes []string `json:"retainedVolumes,omitempty"`
	// StartedAt and CompletedAt bound the migration.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
}
