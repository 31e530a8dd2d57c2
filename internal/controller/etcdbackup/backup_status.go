package etcdbackup

import (
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/readiness"
)

// obsKind is what a pass saw of a backup's Job.
type obsKind int

const (
	// obsNone: the pass looked at nothing (a finished backup); the status
	// stays as it is.
	obsNone obsKind = iota
	// obsPending: no Job yet; reason and message say what the backup waits
	// for.
	obsPending
	// obsJob: the Job exists; job and outcome say how far it got.
	obsJob
	// obsJobGone: the Job was created once and is gone before it finished.
	obsJobGone
)

// backupObservation is what a pass saw and did: the input of the status.
type backupObservation struct {
	kind            obsKind
	reason, message string
	job             jobView
	outcome         outcome
	// deleting, when set, is the Deleting condition of a deleted backup.
	deleting *metav1.Condition
}

func (o *backupObservation) pending(reason, message string) {
	o.kind, o.reason, o.message = obsPending, reason, message
}

// calculateBackupStatus computes b's status from what a pass observed. It
// starts from the current status, so that conditions keep their
// transition times and what was learned stays; the caller sets
// observedGeneration.
func calculateBackupStatus(b *etcdv1alpha1.EtcdBackup, obs backupObservation, now time.Time) etcdv1alpha1.EtcdBackupStatus {
	st := *b.Status.DeepCopy()
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: b.Generation,
		})
	}
	verify := verifyOn(b)
	switch obs.kind {
	case obsNone:
	case obsPending:
		set(etcdv1alpha1.BackupComplete, metav1.ConditionFalse, obs.reason, obs.message)
		if verify {
			set(etcdv1alpha1.BackupVerified, metav1.ConditionUnknown, etcdv1alpha1.ReasonWaitingForBackup, "The test restore runs once the file is written")
		}
		set(etcdv1alpha1.BackupFailed, metav1.ConditionFalse, etcdv1alpha1.ReasonAsExpected, "Nothing failed")
	case obsJobGone:
		msg := fmt.Sprintf("The Job %s was deleted before the backup finished; the spec cannot change, so create another EtcdBackup to back up the cluster", BackupJobName(b))
		if !apimeta.IsStatusConditionTrue(st.Conditions, etcdv1alpha1.BackupComplete) {
			set(etcdv1alpha1.BackupComplete, metav1.ConditionFalse, etcdv1alpha1.ReasonJobDeleted, msg)
		}
		if verify {
			set(etcdv1alpha1.BackupVerified, metav1.ConditionFalse, etcdv1alpha1.ReasonJobDeleted, msg)
		}
		set(etcdv1alpha1.BackupFailed, metav1.ConditionTrue, etcdv1alpha1.ReasonJobDeleted, msg)
	case obsJob:
		jobStatus(b, obs, &st, set, now)
	}
	if d := obs.deleting; d != nil {
		set(etcdv1alpha1.BackupDeleting, d.Status, d.Reason, d.Message)
	}
	st.Phase = backupPhase(b, st.Conditions)
	return st
}

type setFunc func(t string, s metav1.ConditionStatus, reason, msg string)

// jobStatus is the status of a backup whose Job exists.
func jobStatus(b *etcdv1alpha1.EtcdBackup, obs backupObservation, st *etcdv1alpha1.EtcdBackupStatus, set setFunc, now time.Time) {
	o, job, verify := obs.outcome, obs.job, verifyOn(b)
	st.JobName = job.name
	if st.StartTime == nil {
		start := job.created
		if start.IsZero() {
			start = now
		}
		st.StartTime = &metav1.Time{Time: start.Truncate(time.Second)}
	}
	logs := fmt.Sprintf("kubectl logs -n %s job/%s --all-containers", b.Namespace, job.name)
	retry := "The spec cannot change: fix the cause, then create another EtcdBackup"

	switch {
	case o.done && o.result != nil && o.result.Artifact != nil && o.result.Snapshot != nil:
		r := o.result
		st.Artifact = &etcdv1alpha1.Artifact{
			URI: location(b).URI, SizeBytes: r.Artifact.SizeBytes, SHA256: r.Artifact.SHA256,
			Compression: etcdv1alpha1.Compression(r.Artifact.Compression),
		}
		st.Snapshot = &etcdv1alpha1.SnapshotInfo{
			Member: r.Snapshot.Member, Revision: r.Snapshot.Revision,
			EtcdVersion: r.Snapshot.EtcdVersion, DBSizeBytes: r.Snapshot.DBSizeBytes,
		}
		at := o.finishedAt
		if at.IsZero() {
			at = now
		}
		st.CompletionTime = &metav1.Time{Time: at.Truncate(time.Second)}
		set(etcdv1alpha1.BackupComplete, metav1.ConditionTrue, etcdv1alpha1.ReasonBackupWritten, fmt.Sprintf(
			"Wrote %s (%d bytes, SHA-256 %s, read back and checked) from member %s at revision %d",
			st.Artifact.URI, r.Artifact.SizeBytes, r.Artifact.SHA256, r.Snapshot.Member, r.Snapshot.Revision))
	case o.done:
		// The step said it succeeded but not what it wrote.
		o.failed, o.failure = true, fmt.Sprintf("step backup of pod %s reported success without the file or the snapshot", o.pod)
		set(etcdv1alpha1.BackupComplete, metav1.ConditionFalse, etcdv1alpha1.ReasonBackupFailed, o.failure)
	case o.failed:
		set(etcdv1alpha1.BackupComplete, metav1.ConditionFalse, etcdv1alpha1.ReasonBackupFailed, fmt.Sprintf("The backup failed: %s", o.failure))
	default:
		msg := fmt.Sprintf("Job %s is taking the snapshot", job.name)
		msg += progressNote(o)
		set(etcdv1alpha1.BackupComplete, metav1.ConditionFalse, etcdv1alpha1.ReasonBackupRunning, msg)
	}
	complete := apimeta.IsStatusConditionTrue(st.Conditions, etcdv1alpha1.BackupComplete)

	mismatch := false
	if verify {
		switch v := o.verify; {
		case v != nil && v.Verification != nil:
			vr := v.Verification
			at := o.verifyAt
			if at.IsZero() {
				at = now
			}
			st.Verification = &etcdv1alpha1.Verification{
				Time: metav1.Time{Time: at.Truncate(time.Second)}, Keys: vr.Keys, Revision: vr.Revision,
				HashMatches: vr.Matches, DurationSeconds: vr.DurationSeconds,
			}
			if st.Snapshot != nil {
				st.Snapshot.Revision = vr.Revision
				st.Snapshot.HashKV = ptr.To(int64(vr.LiveHash))
			}
			if vr.Matches {
				set(etcdv1alpha1.BackupVerified, metav1.ConditionTrue, etcdv1alpha1.ReasonHashMatches, fmt.Sprintf(
					"A test restore of the file held the live cluster's %d keys and hash %d at revision %d", vr.Keys, vr.LiveHash, vr.Revision))
			} else {
				mismatch = true
				set(etcdv1alpha1.BackupVerified, metav1.ConditionFalse, etcdv1alpha1.ReasonHashMismatch, fmt.Sprintf(
					"A test restore of the file does not hold what the live cluster held at revision %d: %d keys and hash %d, where the cluster has %d keys and hash %d. Do not restore from it",
					vr.Revision, vr.Keys, vr.Hash, vr.LiveKeys, vr.LiveHash))
			}
		case o.failed && complete:
			set(etcdv1alpha1.BackupVerified, metav1.ConditionFalse, etcdv1alpha1.ReasonVerificationFailed, fmt.Sprintf(
				"The test restore failed: %s", o.failure))
		case o.failed:
			set(etcdv1alpha1.BackupVerified, metav1.ConditionFalse, etcdv1alpha1.ReasonBackupFailed, "Nothing to verify: the backup failed")
		case complete:
			set(etcdv1alpha1.BackupVerified, metav1.ConditionUnknown, etcdv1alpha1.ReasonVerifying, fmt.Sprintf(
				"Job %s restores the file into a throwaway etcd and compares it with the live cluster%s", job.name, progressNote(o)))
		default:
			set(etcdv1alpha1.BackupVerified, metav1.ConditionUnknown, etcdv1alpha1.ReasonWaitingForBackup, "The test restore runs once the file is written")
		}
	}

	switch {
	case mismatch:
		set(etcdv1alpha1.BackupFailed, metav1.ConditionTrue, etcdv1alpha1.ReasonHashMismatch,
			"The file was written, but its test restore does not match the live cluster (see Verified): do not restore from it. Check the members' health (kubectl describe etcdcluster), then create another EtcdBackup")
	case o.failed && complete:
		set(etcdv1alpha1.BackupFailed, metav1.ConditionTrue, etcdv1alpha1.ReasonVerificationFailed, fmt.Sprintf(
			"The file was written but could not be verified: %s. Read the logs (%s). %s", o.failure, logs, retry))
	case o.failed:
		set(etcdv1alpha1.BackupFailed, metav1.ConditionTrue, etcdv1alpha1.ReasonBackupFailed, fmt.Sprintf(
			"%s. Read the logs (%s). %s", capitalize(o.failure), logs, retry))
	default:
		set(etcdv1alpha1.BackupFailed, metav1.ConditionFalse, etcdv1alpha1.ReasonAsExpected, "Nothing failed")
	}
}

// backupReadiness is the verdict of a backup's Ready, Reconciling and
// Stalled conditions, from the conditions calculateBackupStatus set: Ready
// once Complete (and Verified when verification is on); Stalled once it
// failed, since its spec cannot change and another EtcdBackup is the way
// on, or when its file cannot be deleted.
func backupReadiness(b *etcdv1alpha1.EtcdBackup, conds []metav1.Condition) readiness.Summary {
	find := func(t string) *metav1.Condition { return apimeta.FindStatusCondition(conds, t) }
	is := func(t string) bool { return apimeta.IsStatusConditionTrue(conds, t) }
	switch {
	case !b.DeletionTimestamp.IsZero():
		deleting := find(etcdv1alpha1.BackupDeleting)
		if deleting != nil && deleting.Reason == etcdv1alpha1.ReasonArtifactDeletionFailed {
			return readiness.From(readiness.StateStalled, deleting, "")
		}
		return readiness.From(readiness.StateReconciling, deleting, "Deleting")
	case is(etcdv1alpha1.BackupFailed):
		return readiness.From(readiness.StateStalled, find(etcdv1alpha1.BackupFailed), "")
	case is(etcdv1alpha1.BackupComplete) && verifyOn(b) && !is(etcdv1alpha1.BackupVerified):
		return readiness.From(readiness.StateReconciling, find(etcdv1alpha1.BackupVerified), "The test restore runs once the file is written")
	case is(etcdv1alpha1.BackupComplete) && verifyOn(b):
		return readiness.From(readiness.StateReady, find(etcdv1alpha1.BackupVerified), "")
	case is(etcdv1alpha1.BackupComplete):
		return readiness.From(readiness.StateReady, find(etcdv1alpha1.BackupComplete), "")
	}
	return readiness.From(readiness.StateReconciling, find(etcdv1alpha1.BackupComplete), "Waiting for the first pass")
}

// progressNote says why a running Job is slow or retrying, if it is.
func progressNote(o outcome) string {
	switch {
	case o.waiting != "":
		return "; waiting: " + o.waiting
	case o.retrying != "":
		return "; retrying after " + o.retrying
	}
	return ""
}

// backupPhase summarises the conditions in a word, for display.
func backupPhase(b *etcdv1alpha1.EtcdBackup, conds []metav1.Condition) string {
	is := func(t string) bool { return apimeta.IsStatusConditionTrue(conds, t) }
	switch {
	case !b.DeletionTimestamp.IsZero():
		return etcdv1alpha1.BackupPhaseDeleting
	case is(etcdv1alpha1.BackupFailed):
		return etcdv1alpha1.BackupPhaseFailed
	case is(etcdv1alpha1.BackupVerified):
		return etcdv1alpha1.BackupPhaseVerified
	case is(etcdv1alpha1.BackupComplete) && verifyOn(b):
		return etcdv1alpha1.BackupPhaseVerifying
	case is(etcdv1alpha1.BackupComplete):
		return etcdv1alpha1.BackupPhaseComplete
	}
	if c := apimeta.FindStatusCondition(conds, etcdv1alpha1.BackupComplete); c != nil && c.Reason == etcdv1alpha1.ReasonBackupRunning {
		return etcdv1alpha1.BackupPhaseRunning
	}
	return etcdv1alpha1.BackupPhasePending
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
