package etcdbackup

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
)

// cond is a condition's status and reason, for comparison.
type cond struct {
	status metav1.ConditionStatus
	reason string
}

func condOf(st etcdv1alpha1.EtcdBackupStatus, t string) cond {
	c := apimeta.FindStatusCondition(st.Conditions, t)
	if c == nil {
		return cond{}
	}
	return cond{c.Status, c.Reason}
}

func TestCalculateBackupStatus(t *testing.T) {
	jobObs := func(o outcome) backupObservation {
		return backupObservation{kind: obsJob, job: jobView{name: "nightly-backup", created: t0}, outcome: o}
	}
	written := outcome{done: true, pod: "p1", result: &backupOK, finishedAt: t0}
	verified := written
	verified.verify, verified.verifyAt = &verifyOK, t0
	mismatch := written
	mismatch.verify, mismatch.failed, mismatch.failure = &verifyBad, true, "step verify of pod p1 failed: hash mismatch"
	fetchFailed := written
	fetchFailed.failed, fetchFailed.failure = true, "the Job gave up (BackoffLimitExceeded: ...)"

	for _, tc := range []struct {
		name                         string
		verify                       bool
		obs                          backupObservation
		complete, verifiedC, failedC cond
		phase                        string
		message                      string
		check                        func(g Gomega, st etcdv1alpha1.EtcdBackupStatus)
	}{
		{
			name: "waiting for the cluster", verify: true,
			obs:      backupObservation{kind: obsPending, reason: etcdv1alpha1.ReasonClusterNotAvailable, message: "Waiting for EtcdCluster kv to be Available"},
			complete: cond{metav1.ConditionFalse, etcdv1alpha1.ReasonClusterNotAvailable}, verifiedC: cond{metav1.ConditionUnknown, etcdv1alpha1.ReasonWaitingForBackup},
			failedC: cond{metav1.ConditionFalse, etcdv1alpha1.ReasonAsExpected}, phase: "Pending",
		},
		{
			name:     "waiting, without verification",
			obs:      backupObservation{kind: obsPending, reason: etcdv1alpha1.ReasonWaitingForOtherBackup, message: "Waiting for EtcdBackup a"},
			complete: cond{metav1.ConditionFalse, etcdv1alpha1.ReasonWaitingForOtherBackup}, verifiedC: cond{},
			failedC: cond{metav1.ConditionFalse, etcdv1alpha1.ReasonAsExpected}, phase: "Pending",
		},
		{
			name: "running", verify: true, obs: jobObs(outcome{waiting: "step backup of pod p1: ErrImagePull: not found"}),
			complete: cond{metav1.ConditionFalse, etcdv1alpha1.ReasonBackupRunning}, verifiedC: cond{metav1.ConditionUnknown, etcdv1alpha1.ReasonWaitingForBackup},
			failedC: cond{metav1.ConditionFalse, etcdv1alpha1.ReasonAsExpected}, phase: "Running", message: "ErrImagePull",
			check: func(g Gomega, st etcdv1alpha1.EtcdBackupStatus) {
				g.Expect(st.JobName).To(Equal("nightly-backup"))
				g.Expect(st.StartTime.Time).To(Equal(t0))
			},
		},
		{
			name: "written, verifying", verify: true, obs: jobObs(written),
			complete: cond{metav1.ConditionTrue, etcdv1alpha1.ReasonBackupWritten}, verifiedC: cond{metav1.ConditionUnknown, etcdv1alpha1.ReasonVerifying},
			failedC: cond{metav1.ConditionFalse, etcdv1alpha1.ReasonAsExpected}, phase: "Verifying",
			check: func(g Gomega, st etcdv1alpha1.EtcdBackupStatus) {
				g.Expect(st.Artifact).To(Equal(&etcdv1alpha1.Artifact{URI: "s3://backups/etcd/ns/nightly.db.gz", SizeBytes: 10, SHA256: "abc", Compression: "None"}))
				g.Expect(st.Snapshot.Revision).To(Equal(int64(41)), "the member's revision until verified")
				g.Expect(st.Snapshot.HashKV).To(BeNil())
				g.Expect(st.CompletionTime.Time).To(Equal(t0))
			},
		},
		{
			name: "written, no verification", obs: jobObs(written),
			complete: cond{metav1.ConditionTrue, etcdv1alpha1.ReasonBackupWritten}, failedC: cond{metav1.ConditionFalse, etcdv1alpha1.ReasonAsExpected}, phase: "Complete",
		},
		{
			name: "verified", verify: true, obs: jobObs(verified),
			complete: cond{metav1.ConditionTrue, etcdv1alpha1.ReasonBackupWritten}, verifiedC: cond{metav1.ConditionTrue, etcdv1alpha1.ReasonHashMatches},
			failedC: cond{metav1.ConditionFalse, etcdv1alpha1.ReasonAsExpected}, phase: "Verified",
			check: func(g Gomega, st etcdv1alpha1.EtcdBackupStatus) {
				g.Expect(st.Snapshot.Revision).To(Equal(int64(42)), "the verified exact revision")
				g.Expect(st.Snapshot.HashKV).To(Equal(ptr.To[int64](99)))
				g.Expect(st.Verification).To(Equal(&etcdv1alpha1.Verification{Time: metav1.NewTime(t0), Keys: 7, Revision: 42, HashMatches: true, DurationSeconds: 3}))
			},
		},
		{
			name: "hash mismatch", verify: true, obs: jobObs(mismatch),
			complete: cond{metav1.ConditionTrue, etcdv1alpha1.ReasonBackupWritten}, verifiedC: cond{metav1.ConditionFalse, etcdv1alpha1.ReasonHashMismatch},
			failedC: cond{metav1.ConditionTrue, etcdv1alpha1.ReasonHashMismatch}, phase: "Failed", message: "do not restore from it",
			check: func(g Gomega, st etcdv1alpha1.EtcdBackupStatus) {
				g.Expect(st.Verification.HashMatches).To(BeFalse())
			},
		},
		{
			name: "written, but the test restore failed", verify: true, obs: jobObs(fetchFailed),
			complete: cond{metav1.ConditionTrue, etcdv1alpha1.ReasonBackupWritten}, verifiedC: cond{metav1.ConditionFalse, etcdv1alpha1.ReasonVerificationFailed},
			failedC: cond{metav1.ConditionTrue, etcdv1alpha1.ReasonVerificationFailed}, phase: "Failed", message: "kubectl logs -n ns job/nightly-backup",
		},
		{
			name: "the backup failed", verify: true, obs: jobObs(outcome{failed: true, failure: "step backup of pod p1 failed: object of another owner"}),
			complete: cond{metav1.ConditionFalse, etcdv1alpha1.ReasonBackupFailed}, verifiedC: cond{metav1.ConditionFalse, etcdv1alpha1.ReasonBackupFailed},
			failedC: cond{metav1.ConditionTrue, etcdv1alpha1.ReasonBackupFailed}, phase: "Failed", message: "Step backup of pod p1 failed: object of another owner. Read the logs",
		},
		{
			name: "a success without a file is a failure", obs: jobObs(outcome{done: true, pod: "p1", result: &agentapi.Result{Op: "backup"}}),
			complete: cond{metav1.ConditionFalse, etcdv1alpha1.ReasonBackupFailed}, failedC: cond{metav1.ConditionTrue, etcdv1alpha1.ReasonBackupFailed}, phase: "Failed",
		},
		{
			name: "the Job vanished", verify: true, obs: backupObservation{kind: obsJobGone},
			complete: cond{metav1.ConditionFalse, etcdv1alpha1.ReasonJobDeleted}, verifiedC: cond{metav1.ConditionFalse, etcdv1alpha1.ReasonJobDeleted},
			failedC: cond{metav1.ConditionTrue, etcdv1alpha1.ReasonJobDeleted}, phase: "Failed", message: "create another EtcdBackup",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := testBackup(func(s *etcdv1alpha1.EtcdBackupSpec) { s.Verify = ptr.To(tc.verify) })
			st := calculateBackupStatus(b, tc.obs, t0)
			g.Expect(condOf(st, etcdv1alpha1.BackupComplete)).To(Equal(tc.complete))
			g.Expect(condOf(st, etcdv1alpha1.BackupVerified)).To(Equal(tc.verifiedC))
			g.Expect(condOf(st, etcdv1alpha1.BackupFailed)).To(Equal(tc.failedC))
			g.Expect(st.Phase).To(Equal(tc.phase))
			if tc.message != "" {
				var all string
				for _, c := range st.Conditions {
					all += c.Message + "\n"
				}
				g.Expect(all).To(ContainSubstring(tc.message))
			}
			if tc.check != nil {
				tc.check(g, st)
			}
		})
	}
}

func TestFinishedBackupsKeepTheirStatus(t *testing.T) {
	g := NewWithT(t)
	b := testBackup(nil)
	b.Status = calculateBackupStatus(b, backupObservation{kind: obsJob, job: jobView{name: "nightly-backup", created: t0},
		outcome: outcome{done: true, result: &backupOK, verify: &verifyOK, finishedAt: t0, verifyAt: t0}}, t0)
	g.Expect(finished(b)).To(BeTrue())
	again := calculateBackupStatus(b, backupObservation{kind: obsNone}, t0.Add(24*3600e9))
	g.Expect(again).To(Equal(b.Status))
}

func TestBackupReadiness(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: typ + " says"}
	}
	running := cond(etcdv1alpha1.BackupComplete, metav1.ConditionFalse, etcdv1alpha1.ReasonBackupRunning)
	written := cond(etcdv1alpha1.BackupComplete, metav1.ConditionTrue, etcdv1alpha1.ReasonBackupWritten)
	verifying := cond(etcdv1alpha1.BackupVerified, metav1.ConditionUnknown, etcdv1alpha1.ReasonVerifying)
	verified := cond(etcdv1alpha1.BackupVerified, metav1.ConditionTrue, etcdv1alpha1.ReasonHashMatches)
	noFailure := cond(etcdv1alpha1.BackupFailed, metav1.ConditionFalse, etcdv1alpha1.ReasonAsExpected)
	failed := cond(etcdv1alpha1.BackupFailed, metav1.ConditionTrue, etcdv1alpha1.ReasonBackupFailed)
	for _, tc := range []struct {
		name     string
		verify   bool
		deleting bool
		conds    []metav1.Condition
		want     string // "State/Reason"
	}{
		{name: "no pass yet", verify: true, want: "Reconciling/Unknown"},
		{name: "running", verify: true, conds: []metav1.Condition{running, noFailure}, want: "Reconciling/Running"},
		{name: "written, verifying", verify: true, conds: []metav1.Condition{written, verifying, noFailure}, want: "Reconciling/Verifying"},
		{name: "verified", verify: true, conds: []metav1.Condition{written, verified, noFailure}, want: "Ready/HashMatches"},
		{name: "written, no verification", conds: []metav1.Condition{written, noFailure}, want: "Ready/Written"},
		{name: "failed", verify: true, conds: []metav1.Condition{running, failed}, want: "Stalled/BackupFailed"},
		{name: "deleting the file", deleting: true, conds: []metav1.Condition{written, noFailure,
			cond(etcdv1alpha1.BackupDeleting, metav1.ConditionTrue, etcdv1alpha1.ReasonDeletingArtifact)}, want: "Reconciling/DeletingArtifact"},
		{name: "the file cannot be deleted", deleting: true, conds: []metav1.Condition{written, noFailure,
			cond(etcdv1alpha1.BackupDeleting, metav1.ConditionTrue, etcdv1alpha1.ReasonArtifactDeletionFailed)}, want: "Stalled/ArtifactDeletionFailed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := &etcdv1alpha1.EtcdBackup{}
			b.Spec.Verify = ptr.To(tc.verify)
			if tc.deleting {
				b.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			}
			got := backupReadiness(b, tc.conds)
			g.Expect(got.State.String() + "/" + got.Reason).To(Equal(tc.want))
		})
	}
}
