package v1alpha1

// Condition types of an EtcdBackup.
const (
	// BackupComplete is True once the file was written and read back with
	// its SHA-256 checked.
	BackupComplete = "Complete"
	// BackupVerified is True once a test restore of the file started and
	// held the live cluster's keys and hash; False when it did not; Unknown
	// while it runs; absent when verification is off.
	BackupVerified = "Verified"
	// BackupFailed is True when the backup will not complete; its reason
	// and message say why and what to do.
	BackupFailed = "Failed"
)

// Condition types of an EtcdBackupSchedule.
const (
	// ScheduleBackupsHealthy is False when the newest Complete backup is
	// older than two schedule periods, or the last runs failed.
	ScheduleBackupsHealthy = "BackupsHealthy"
)

// Labels and annotations on backups.
const (
	// LabelCluster names the EtcdCluster an EtcdBackup backs up, on the
	// backups and their Jobs.
	LabelBackupCluster = "etcd.tend.dev/cluster"
	// LabelSchedule names the EtcdBackupSchedule that made a backup.
	LabelSchedule = "etcd.tend.dev/schedule"
	// AnnotationScheduledTime on a scheduled backup is the run time it
	// was made for (RFC 3339).
	AnnotationScheduledTime = "etcd.tend.dev/scheduled-time"
)
