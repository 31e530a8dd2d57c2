package v1alpha1

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Condition types of an EtcdBackup.
const (
	// BackupComplete is True once the file was written and read back with
	// its SHA-256 checked.
	BackupComplete = "Complete"
	// BackupVerified is True once a test restore of the file started and
	// held the live cluster's keys and hash; False when it did not; Unknown
	// while it runs; absent when verification is off.
	BackupVerified = "Verified"
	// BackupFailed is True when the backup will not complete, or when it
	// completed but failed its verification: do not restore from it. Its
	// reason and message say why and what to do.
	BackupFailed = "Failed"
	// BackupDeleting is set on a deleted EtcdBackup with artifactPolicy
	// Delete while its file is being deleted; its message says what it
	// waits for, and how to let it go when the deletion cannot succeed.
	BackupDeleting = "Deleting"
)

// Reasons of an EtcdBackup's conditions.
const (
	// ReasonClusterNotFound: the EtcdCluster of spec.clusterRef does not
	// exist (yet).
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonClusterNotAvailable: the cluster exists but is not Available;
	// the backup starts when it is.
	ReasonClusterNotAvailable = "ClusterNotAvailable"
	// ReasonWaitingForConnection: the cluster's connection ConfigMap, which
	// the backup pod reads, does not exist yet.
	ReasonWaitingForConnection = "WaitingForConnection"
	// ReasonWaitingForOtherBackup: another backup of the same cluster runs
	// (or is due first); one backup of a cluster runs at a time.
	ReasonWaitingForOtherBackup = "WaitingForOtherBackup"
	// ReasonJobNameTaken: a Job with the backup's Job name exists that the
	// backup does not own, such as one of an earlier EtcdBackup of the same
	// name that is still being deleted.
	ReasonJobNameTaken = "JobNameTaken"
	// ReasonBackupRunning: the Job is taking the snapshot.
	ReasonBackupRunning = "Running"
	// ReasonBackupWritten: the file was written and read back.
	ReasonBackupWritten = "Written"
	// ReasonWaitingForBackup: verification waits for the file.
	ReasonWaitingForBackup = "WaitingForBackup"
	// ReasonVerifying: the test restore runs.
	ReasonVerifying = "Verifying"
	// ReasonHashMatches: the restored store holds the live cluster's keys
	// and hash at the snapshot's revision.
	ReasonHashMatches = "HashMatches"
	// ReasonHashMismatch: the restored store's hash or key count differs
	// from the live cluster's at the same revision.
	ReasonHashMismatch = "HashMismatch"
	// ReasonVerificationFailed: the test restore could not be done (the
	// file could not be fetched, etcdutl or etcd failed).
	ReasonVerificationFailed = "VerificationFailed"
	// ReasonBackupFailed: a step before the file was complete failed for
	// good, or the Job gave up.
	ReasonBackupFailed = "BackupFailed"
	// ReasonJobDeleted: the backup's Job disappeared before it finished.
	ReasonJobDeleted = "JobDeleted"
	// ReasonStoppingBackup: deletion waits for the backup's pods to stop
	// before it deletes the file.
	ReasonStoppingBackup = "StoppingBackup"
	// ReasonDeletingArtifact: the delete Job runs.
	ReasonDeletingArtifact = "DeletingArtifact"
	// ReasonArtifactDeletionFailed: the delete Job failed; the message says
	// how to retry or to keep the file.
	ReasonArtifactDeletionFailed = "ArtifactDeletionFailed"
	// ReasonInUseByRestore: deletion waits for the restores that read the
	// backup's file to finish; the message names their clusters.
	ReasonInUseByRestore = "InUseByRestore"
)

// Phases of an EtcdBackup, for display only.
const (
	BackupPhasePending   = "Pending"
	BackupPhaseRunning   = "Running"
	BackupPhaseVerifying = "Verifying"
	BackupPhaseComplete  = "Complete"
	BackupPhaseVerified  = "Verified"
	BackupPhaseFailed    = "Failed"
	BackupPhaseDeleting  = "Deleting"
)

// Condition types of an EtcdBackupSchedule.
const (
	// ScheduleBackupsHealthy is False when the newest Complete backup is
	// older than two schedule periods, or the last runs failed.
	ScheduleBackupsHealthy = "BackupsHealthy"
)

// Reasons of an EtcdBackupSchedule's conditions.
const (
	// ReasonBackupsRecent: the newest backup completed within the last two
	// schedule periods and no later run failed.
	ReasonBackupsRecent = "BackupsRecent"
	// ReasonNoBackupsYet: the schedule is younger than two periods and no
	// backup completed yet.
	ReasonNoBackupsYet = "NoBackupsYet"
	// ReasonNoBackups: two periods passed since the schedule was created,
	// and no backup completed.
	ReasonNoBackups = "NoBackups"
	// ReasonBackupsStale: the newest Complete backup is older than two
	// schedule periods.
	ReasonBackupsStale = "BackupsStale"
	// ReasonLastBackupFailed: the newest finished backup failed.
	ReasonLastBackupFailed = "LastBackupFailed"
	// ReasonInvalidSchedule: spec.schedule or spec.timeZone cannot be
	// used; no backup is taken until they are fixed.
	ReasonInvalidSchedule = "InvalidSchedule"
	// ReasonScheduleInForce, of a schedule's Ready condition: its spec is
	// valid and reconciled (BackupsHealthy says how its backups are).
	ReasonScheduleInForce = "InForce"
)

// Labels and annotations on backups.
const (
	// LabelCluster names the EtcdCluster an EtcdBackup backs up, on the
	// backups and their Jobs.
	LabelBackupCluster = "etcd.tend.dev/cluster"
	// LabelSchedule names the EtcdBackupSchedule that made a backup.
	LabelSchedule = "etcd.tend.dev/schedule"
	// LabelBackup names the EtcdBackup that a Job (backup or delete)
	// works for, on the Job and its pods.
	LabelBackup = "etcd.tend.dev/backup"
	// AnnotationScheduledTime on a scheduled backup is the run time it
	// was made for (RFC 3339).
	AnnotationScheduledTime = "etcd.tend.dev/scheduled-time"
	// AnnotationKeepArtifact, set to "true" on an EtcdBackup with
	// artifactPolicy Delete, lets its deletion go on without deleting the
	// file (a Warning Event records it): the way out when the file cannot
	// be deleted, such as when its bucket is gone.
	AnnotationKeepArtifact = "etcd.tend.dev/keep-artifact"
)

// BackupFinalizer is on an EtcdBackup with artifactPolicy Delete: it
// guards the deletion of the file, which is outside the cluster.
const BackupFinalizer = "etcd.tend.dev/backup-artifact"

// RestoreFinalizerPrefix begins the finalizer that an EtcdCluster's restore
// puts on the EtcdBackup it reads (RestoreFinalizer): the backup and its
// file stay until the restore is done, whoever deletes it meanwhile.
const RestoreFinalizerPrefix = "restore.etcd.tend.dev/"

// RestoreFinalizer is the finalizer of the restore of the EtcdCluster
// whose UID is cluster: one per cluster, so that two clusters restoring
// from one backup each hold it.
func RestoreFinalizer(cluster types.UID) string { return RestoreFinalizerPrefix + string(cluster) }

// RestoringClusters are the UIDs of the clusters whose restores hold
// finalizers (a backup's): the restores that read it now.
func RestoringClusters(finalizers []string) []string {
	var uids []string
	for _, f := range finalizers {
		if uid, ok := strings.CutPrefix(f, RestoreFinalizerPrefix); ok {
			uids = append(uids, uid)
		}
	}
	return uids
}
