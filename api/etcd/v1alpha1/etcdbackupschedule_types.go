package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Retention says which of a schedule's backups to keep; a backup that no
// rule keeps is deleted, with its file (the backups a schedule makes have
// artifactPolicy Delete unless its template says Retain). Only Complete
// backups count and are deleted; failed ones are deleted once a newer
// backup is Complete. Each bucket rule keeps the newest Complete backup
// of each of the last N hours, days or weeks (in the schedule's time zone)
// that have one.
//
// +kubebuilder:validation:XValidation:rule="has(self.keepLast) || has(self.keepHourly) || has(self.keepDaily) || has(self.keepWeekly) || has(self.maxAge)",message="spec.retention needs at least one rule (keepLast, keepHourly, keepDaily, keepWeekly or maxAge): without one, backups pile up for ever"
type Retention struct {
	// KeepLast keeps the newest N Complete backups.
	// +kubebuilder:validation:Minimum=1
	// +optional
	KeepLast *int32 `json:"keepLast,omitempty"`
	// KeepHourly keeps the newest backup of each of the last N hours that
	// have one.
	// +kubebuilder:validation:Minimum=1
	// +optional
	KeepHourly *int32 `json:"keepHourly,omitempty"`
	// KeepDaily keeps the newest backup of each of the last N days that
	// have one.
	// +kubebuilder:validation:Minimum=1
	// +optional
	KeepDaily *int32 `json:"keepDaily,omitempty"`
	// KeepWeekly keeps the newest backup of each of the last N ISO weeks
	// that have one.
	// +kubebuilder:validation:Minimum=1
	// +optional
	KeepWeekly *int32 `json:"keepWeekly,omitempty"`
	// MaxAge deletes backups older than this, whatever the other rules
	// keep, except the newest Complete one: a schedule never deletes its
	// last good backup.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="spec.retention.maxAge must be at least 1m"
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// EtcdBackupScheduleSpec takes backups of an EtcdCluster on a cron
// schedule and keeps those that the retention rules keep.
//
// +kubebuilder:validation:XValidation:rule="!has(self.backupTemplate.destination.s3) || !has(self.backupTemplate.destination.s3.key)",message="spec.backupTemplate.destination.s3.key would name every backup's object alike: use prefix, and each object is named after its backup"
type EtcdBackupScheduleSpec struct {
	// ClusterRef is the EtcdCluster to back up, in the same namespace.
	ClusterRef ClusterReference `json:"clusterRef"`
	// Schedule is a cron line of five fields, or a macro such as @hourly
	// or @daily.
	// +kubebuilder:validation:MinLength=1
	Schedule string `json:"schedule"`
	// TimeZone of the schedule, an IANA name such as Europe/Berlin; UTC by
	// default. The retention buckets use it too.
	// +optional
	TimeZone *string `json:"timeZone,omitempty"`
	// StartingDeadlineSeconds: a run missed (the manager was down) by more
	// than this is skipped. By default the latest missed run is taken
	// once, however late; missed runs are never replayed one by one.
	// +kubebuilder:validation:Minimum=1
	// +optional
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`
	// Suspend stops new backups; retention still applies.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
	// BackupTemplate is the spec of each backup, less its cluster.
	BackupTemplate BackupOptions `json:"backupTemplate"`
	// Retention says which backups to keep.
	Retention Retention `json:"retention"`
}

// EtcdBackupScheduleStatus is what the schedule did last.
type EtcdBackupScheduleStatus struct {
	// LastScheduleTime is the scheduled time of the newest backup made.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// NextScheduleTime is when the next backup is due.
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`
	// Active is the backup in progress, if any: a schedule never runs two
	// backups of a cluster at once.
	// +optional
	Active string `json:"active,omitempty"`
	// LastSuccessfulBackup is the newest Complete backup.
	// +optional
	LastSuccessfulBackup string `json:"lastSuccessfulBackup,omitempty"`
	// LastSuccessfulTime is when it completed.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`
	// LastVerifiedBackup is the newest backup whose verification passed.
	// +optional
	LastVerifiedBackup string `json:"lastVerifiedBackup,omitempty"`
	// Backups is the number of backups the schedule keeps now.
	// +optional
	Backups int32 `json:"backups"`
	// ObservedGeneration is the generation the last successful pass acted
	// on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: BackupsHealthy.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EtcdBackupSchedule takes EtcdBackups of a cluster on a cron schedule and
// deletes the ones its retention rules no longer keep.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdbackupschedule,categories=tend
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Healthy",type=string,JSONPath=`.status.conditions[?(@.type=="BackupsHealthy")].status`
// +kubebuilder:printcolumn:name="Last",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Backups",type=integer,JSONPath=`.status.backups`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdBackupSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EtcdBackupScheduleSpec   `json:"spec"`
	Status EtcdBackupScheduleStatus `json:"status,omitempty"`
}

// EtcdBackupScheduleList is a list of EtcdBackupSchedules.
//
// +kubebuilder:object:root=true
type EtcdBackupScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdBackupSchedule `json:"items"`
}
