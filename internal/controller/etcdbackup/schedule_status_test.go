package etcdbackup

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

func testSchedule(suspend bool) *etcdv1alpha1.EtcdBackupSchedule {
	return &etcdv1alpha1.EtcdBackupSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hourly", CreationTimestamp: metav1.NewTime(at("2030-01-01T00:30:00Z"))},
		Spec:       etcdv1alpha1.EtcdBackupScheduleSpec{Schedule: "0 * * * *", Suspend: suspend},
	}
}

func TestScheduleHealth(t *testing.T) {
	b := func(name, when string, state backupState) scheduledBackup {
		return scheduledBackup{name: name, at: at(when), state: state}
	}
	failed := b("hourly-f", "2030-01-01T06:00:00Z", backupFailed)
	failed.message = "The backup failed: step backup of pod p failed: no member answered"
	waiting := b("hourly-w", "2030-01-01T06:00:00Z", backupActive)
	waiting.message = "Waiting for EtcdCluster kv to be Available"
	goneGood := b("hourly-gone", "2030-01-01T06:00:00Z", backupGood)
	goneGood.deleting = true
	for _, tc := range []struct {
		name        string
		suspend     bool
		backups     []scheduledBackup
		now         string
		status      metav1.ConditionStatus
		reason      string
		message     string
		wantRecheck string
	}{
		{name: "young, no backup yet", now: "2030-01-01T01:30:00Z", status: metav1.ConditionUnknown, reason: etcdv1alpha1.ReasonNoBackupsYet,
			message: "the first run is at 2030-01-01T01:00:00Z", wantRecheck: "2030-01-01T02:00:00Z"},
		{name: "two periods without a backup", now: "2030-01-01T02:00:00Z", status: metav1.ConditionFalse, reason: etcdv1alpha1.ReasonNoBackups,
			message: "No backup runs: look at the schedule's Events"},
		{name: "two periods, one waiting", backups: []scheduledBackup{waiting}, now: "2030-01-01T02:00:00Z", status: metav1.ConditionFalse, reason: etcdv1alpha1.ReasonNoBackups,
			message: "The backup hourly-w has not finished: Waiting for EtcdCluster kv to be Available"},
		{name: "recent", backups: []scheduledBackup{b("hourly-5", "2030-01-01T05:00:00Z", backupGood)}, now: "2030-01-01T06:30:00Z",
			status: metav1.ConditionTrue, reason: etcdv1alpha1.ReasonBackupsRecent, message: "hourly-5, of the run at 2030-01-01T05:00:00Z, is complete", wantRecheck: "2030-01-01T07:00:00Z"},
		{name: "stale after two periods", backups: []scheduledBackup{b("hourly-5", "2030-01-01T05:00:00Z", backupGood)}, now: "2030-01-01T07:00:00Z",
			status: metav1.ConditionFalse, reason: etcdv1alpha1.ReasonBackupsStale, message: "The newest good backup, hourly-5, is of the run at 2030-01-01T05:00:00Z, more than two periods ago"},
		{name: "stale while suspended", suspend: true, backups: []scheduledBackup{b("hourly-5", "2030-01-01T05:00:00Z", backupGood)}, now: "2030-01-01T09:00:00Z",
			status: metav1.ConditionFalse, reason: etcdv1alpha1.ReasonBackupsStale, message: "spec.suspend is true"},
		{name: "the last run failed", backups: []scheduledBackup{failed, b("hourly-5", "2030-01-01T05:00:00Z", backupGood)}, now: "2030-01-01T06:10:00Z",
			status: metav1.ConditionFalse, reason: etcdv1alpha1.ReasonLastBackupFailed, message: "The last backup, hourly-f, failed: The backup failed: step backup of pod p failed: no member answered (kubectl describe etcdbackup -n ns hourly-f). The newest good backup is hourly-5"},
		{name: "a failure, then a success", backups: []scheduledBackup{b("hourly-7", "2030-01-01T07:00:00Z", backupGood), failed}, now: "2030-01-01T07:10:00Z",
			status: metav1.ConditionTrue, reason: etcdv1alpha1.ReasonBackupsRecent},
		{name: "a running backup hides no failure", backups: []scheduledBackup{b("hourly-7", "2030-01-01T07:00:00Z", backupActive), failed}, now: "2030-01-01T07:10:00Z",
			status: metav1.ConditionFalse, reason: etcdv1alpha1.ReasonLastBackupFailed},
		{name: "a backup being deleted does not count", backups: []scheduledBackup{goneGood}, now: "2030-01-01T06:10:00Z",
			status: metav1.ConditionFalse, reason: etcdv1alpha1.ReasonNoBackups},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sc := testSchedule(tc.suspend)
			h := scheduleHealth(sc, mustSchedule(t, string(sc.Spec.Schedule), ""), tc.backups, at(tc.now))
			g.Expect(h.status).To(Equal(tc.status))
			g.Expect(h.reason).To(Equal(tc.reason))
			g.Expect(h.message).To(ContainSubstring(tc.message))
			if tc.wantRecheck != "" {
				g.Expect(h.recheck).To(BeTemporally("==", at(tc.wantRecheck)))
			}
			if tc.status == metav1.ConditionFalse {
				g.Expect(h.recheck.IsZero()).To(BeTrue(), "only new backups mend it")
			}
		})
	}
}

func TestCalculateScheduleStatus(t *testing.T) {
	g := NewWithT(t)
	sc := testSchedule(false)
	good := scheduledBackup{name: "hourly-5", at: at("2030-01-01T05:00:00Z"), state: backupGood, verified: true, completed: ptr.To(at("2030-01-01T05:01:00Z"))}
	unverified := scheduledBackup{name: "hourly-4", at: at("2030-01-01T04:00:00Z"), state: backupGood, completed: ptr.To(at("2030-01-01T04:01:00Z"))}
	s := &scheduleScope{
		now: at("2030-01-01T06:00:10Z"), cron: mustSchedule(t, string(sc.Spec.Schedule), ""),
		backups: []scheduledBackup{
			{name: "hourly-6", at: at("2030-01-01T06:00:00Z"), state: backupActive},
			good, unverified,
			{name: "hourly-3", at: at("2030-01-01T03:00:00Z"), state: backupGood, deleting: true},
		},
		decision: runDecision{next: at("2030-01-01T07:00:00Z")},
	}
	st := calculateScheduleStatus(sc, s)
	g.Expect(st.LastScheduleTime.Time).To(Equal(at("2030-01-01T06:00:00Z")))
	g.Expect(st.NextScheduleTime.Time).To(Equal(at("2030-01-01T07:00:00Z")))
	g.Expect(st.Active).To(Equal("hourly-6"))
	g.Expect(st.LastSuccessfulBackup).To(Equal("hourly-5"))
	g.Expect(st.LastSuccessfulTime.Time).To(Equal(at("2030-01-01T05:01:00Z")))
	g.Expect(st.LastVerifiedBackup).To(Equal("hourly-5"))
	g.Expect(st.Backups).To(Equal(int32(3)), "the one being deleted is not kept")
	g.Expect(st.Conditions).To(ConsistOf(HaveField("Reason", etcdv1alpha1.ReasonBackupsRecent)))

	sc.Spec.Suspend = true
	g.Expect(calculateScheduleStatus(sc, s).NextScheduleTime).To(BeNil(), "no next run while suspended")

	s.invalid = errInvalid
	st = calculateScheduleStatus(sc, s)
	g.Expect(st.Conditions).To(ConsistOf(And(HaveField("Reason", etcdv1alpha1.ReasonInvalidSchedule), HaveField("Status", metav1.ConditionFalse),
		HaveField("Message", ContainSubstring("No backup is taken until it is fixed")))))
}

var errInvalid = errors.New(`spec.schedule "61 * * * *": end of range (61) above maximum (59)`)
