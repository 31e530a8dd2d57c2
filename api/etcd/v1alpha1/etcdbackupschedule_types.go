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
	// Schedule is a cron line of five fields (minute, hour, day of the
	// month, month, day of the week), such as "0 3 * * *", or one of the
	// macros @yearly, @annually, @monthly, @weekly, @daily, @midnight and
	// @hourly. Its times are in spec.timeZone. The apiserver refuses a
	// line that the controller's parser (robfig/cron's standard one) would
	// refuse.
	Schedule CronSchedule `json:"schedule"`
	// TimeZone of the schedule, an IANA name such as Europe/Berlin; UTC by
	// default. The retention buckets use it too. The longest IANA name has
	// 32 characters.
	// +kubebuilder:validation:MaxLength=64
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
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 45",message="an EtcdBackupSchedule's name is at most 45 characters: its backups are named <name>-<unix time of the run>, at most 56"
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

// CronSchedule is a cron line of five fields (minute, hour, day of the
// month, month, day of the week), such as "0 3 * * *", or one of the
// macros @yearly, @annually, @monthly, @weekly, @daily, @midnight and
// @hourly. The apiserver refuses a line that the controllers' parser
// (robfig/cron's standard one) would refuse.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=100
// +kubebuilder:validation:XValidation:rule="self.startsWith('@') ? self in ['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly'] : self.split(' ').filter(f, size(f) > 0).size() == 5",message="the schedule must be five fields separated by spaces (minute hour day-of-month month day-of-week), such as '0 3 * * *', or one of @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly"
// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').filter(f, size(f) > 0).size() != 5 || self.split(' ').filter(f, size(f) > 0)[0].matches('^([*?]|([0-5]?[0-9])(-([0-5]?[0-9]))?)(/[1-9][0-9]{0,2})?(,([*?]|([0-5]?[0-9])(-([0-5]?[0-9]))?)(/[1-9][0-9]{0,2})?)*$')",message="the minute, the first field of the schedule, takes *, numbers 0-59, ranges such as 0-29, lists such as 0,30 and steps such as */15"
// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').filter(f, size(f) > 0).size() != 5 || self.split(' ').filter(f, size(f) > 0)[1].matches('^([*?]|([01]?[0-9]|2[0-3])(-([01]?[0-9]|2[0-3]))?)(/[1-9][0-9]{0,2})?(,([*?]|([01]?[0-9]|2[0-3])(-([01]?[0-9]|2[0-3]))?)(/[1-9][0-9]{0,2})?)*$')",message="the hour, the second field of the schedule, takes *, numbers 0-23, ranges such as 1-5, lists such as 0,12 and steps such as */6"
// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').filter(f, size(f) > 0).size() != 5 || self.split(' ').filter(f, size(f) > 0)[2].matches('^([*?]|(0?[1-9]|[12][0-9]|3[01])(-(0?[1-9]|[12][0-9]|3[01]))?)(/[1-9][0-9]{0,2})?(,([*?]|(0?[1-9]|[12][0-9]|3[01])(-(0?[1-9]|[12][0-9]|3[01]))?)(/[1-9][0-9]{0,2})?)*$')",message="the day of the month, the third field of the schedule, takes * or ?, numbers 1-31, ranges such as 1-15, lists such as 1,15 and steps such as */10"
// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').filter(f, size(f) > 0).size() != 5 || self.split(' ').filter(f, size(f) > 0)[3].matches('^([*?]|(0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-(0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/[1-9][0-9]{0,2})?(,([*?]|(0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-(0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/[1-9][0-9]{0,2})?)*$')",message="the month, the fourth field of the schedule, takes *, numbers 1-12 or JAN-DEC, ranges such as 1-6, lists such as 1,7 and steps such as */3"
// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').filter(f, size(f) > 0).size() != 5 || self.split(' ').filter(f, size(f) > 0)[4].matches('^([*?]|(0?[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-(0?[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(/[1-9][0-9]{0,2})?(,([*?]|(0?[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-(0?[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(/[1-9][0-9]{0,2})?)*$')",message="the day of the week, the fifth field of the schedule, takes * or ?, numbers 0-6 (0 is Sunday) or SUN-SAT, ranges such as MON-FRI, lists such as 0,6 and steps such as */2"
// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.replace(' ', ',').split(',').all(i, i.split('/')[0].matches('^[0-9]{1,3}-[0-9]{1,3}$') ? int(i.split('/')[0].split('-')[0]) <= int(i.split('/')[0].split('-')[1]) : (i.split('/')[0].matches('^[a-zA-Z]{3}-[a-zA-Z]{3}$') ? 'sun,mon,tue,wed,thu,fri,sat,jan,feb,mar,apr,may,jun,jul,aug,sep,oct,nov,dec'.indexOf(i.split('/')[0].split('-')[0].lowerAscii()) <= 'sun,mon,tue,wed,thu,fri,sat,jan,feb,mar,apr,may,jun,jul,aug,sep,oct,nov,dec'.indexOf(i.split('/')[0].split('-')[1].lowerAscii()) : !i.split('/')[0].matches('^[0-9]+-[a-zA-Z]+$|^[a-zA-Z]+-[0-9]+$')))",message="a range in the schedule goes from low to high, with numbers or names at both ends, such as 1-5 or MON-FRI; write one that wraps as a list, such as FRI-SAT,SUN-MON"
type CronSchedule string
