package etcdbackup

import (
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/readiness"
)

// health is the BackupsHealthy condition, and when it must be looked at
// again because time alone changes it.
type health struct {
	status          metav1.ConditionStatus
	reason, message string
	recheck         time.Time
}

// scheduleHealth judges a schedule's backups (newest first): False when
// the newest finished backup failed, or when the newest good backup is
// older than two periods (its run's second successor has come), or when
// two periods passed since the schedule's creation without one; Unknown
// before that; True otherwise.
func scheduleHealth(sc *etcdv1alpha1.EtcdBackupSchedule, c cronSchedule, backups []scheduledBackup, now time.Time) health {
	var lastFinished, good, active *scheduledBackup
	for i := range backups {
		b := &backups[i]
		if b.deleting {
			continue
		}
		switch {
		case b.state == backupActive && active == nil:
			active = b
		case b.state != backupActive && lastFinished == nil:
			lastFinished = b
		}
		if b.state == backupGood && good == nil {
			good = b
		}
	}
	ns := sc.Namespace
	if lastFinished != nil && lastFinished.state == backupFailed {
		msg := fmt.Sprintf("The last backup, %s, failed: %s (kubectl describe etcdbackup -n %s %s)", lastFinished.name, lastFinished.message, ns, lastFinished.name)
		if good != nil {
			msg += fmt.Sprintf(". The newest good backup is %s", good.name)
		}
		return health{status: metav1.ConditionFalse, reason: etcdv1alpha1.ReasonLastBackupFailed, message: msg}
	}
	lookAt := ""
	switch {
	case active != nil:
		lookAt = fmt.Sprintf(" The backup %s has not finished: %s (kubectl describe etcdbackup -n %s %s)", active.name, active.message, ns, active.name)
	case sc.Spec.Suspend:
		lookAt = " spec.suspend is true: no backup is taken."
	default:
		lookAt = " No backup runs: look at the schedule's Events (kubectl describe etcdbackupschedule), and whether the manager runs the etcdbackupschedule controller."
	}
	if good != nil {
		stale := periodsAfter(c, good.at)
		if !stale.IsZero() && !now.Before(stale) {
			return health{status: metav1.ConditionFalse, reason: etcdv1alpha1.ReasonBackupsStale, message: fmt.Sprintf(
				"The newest good backup, %s, is of the run at %s, more than two periods ago.%s", good.name, good.at.In(c.loc).Format(time.RFC3339), lookAt)}
		}
		what := "complete"
		if good.verified {
			what = "complete and verified"
		}
		return health{status: metav1.ConditionTrue, reason: etcdv1alpha1.ReasonBackupsRecent, recheck: stale, message: fmt.Sprintf(
			"The newest backup, %s, of the run at %s, is %s", good.name, good.at.In(c.loc).Format(time.RFC3339), what)}
	}
	deadline := periodsAfter(c, sc.CreationTimestamp.Time)
	if !deadline.IsZero() && !now.Before(deadline) {
		return health{status: metav1.ConditionFalse, reason: etcdv1alpha1.ReasonNoBackups, message: fmt.Sprintf(
			"No backup completed in the two periods since the schedule was created.%s", lookAt)}
	}
	return health{status: metav1.ConditionUnknown, reason: etcdv1alpha1.ReasonNoBackupsYet, recheck: deadline, message: fmt.Sprintf(
		"No backup has completed yet; the first run is at %s", c.next(sc.CreationTimestamp.Time).In(c.loc).Format(time.RFC3339))}
}

// calculateScheduleStatus computes sc's status from what a pass saw. It
// starts from the current status, so that a condition keeps its
// transition time; the caller sets observedGeneration.
func calculateScheduleStatus(sc *etcdv1alpha1.EtcdBackupSchedule, s *scheduleScope) etcdv1alpha1.EtcdBackupScheduleStatus {
	st := *sc.Status.DeepCopy()
	set := func(h health) {
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: etcdv1alpha1.ScheduleBackupsHealthy, Status: h.status, Reason: h.reason, Message: h.message, ObservedGeneration: sc.Generation,
		})
	}
	if s.invalid != nil {
		st.NextScheduleTime = nil
		set(health{status: metav1.ConditionFalse, reason: etcdv1alpha1.ReasonInvalidSchedule, message: fmt.Sprintf(
			"%v. No backup is taken until it is fixed", s.invalid)})
		return st
	}
	st.NextScheduleTime = nil
	if !sc.Spec.Suspend && !s.decision.next.IsZero() {
		st.NextScheduleTime = &metav1.Time{Time: s.decision.next}
	}
	st.Active, st.LastSuccessfulBackup, st.LastSuccessfulTime, st.LastVerifiedBackup, st.Backups = "", "", nil, "", 0
	for _, b := range s.backups {
		if st.LastScheduleTime == nil || b.at.After(st.LastScheduleTime.Time) {
			st.LastScheduleTime = &metav1.Time{Time: b.at}
		}
		if b.deleting {
			continue
		}
		st.Backups++
		switch {
		case b.state == backupActive && st.Active == "":
			st.Active = b.name
		case b.state == backupGood && st.LastSuccessfulBackup == "":
			st.LastSuccessfulBackup = b.name
			if b.completed != nil {
				st.LastSuccessfulTime = &metav1.Time{Time: *b.completed}
			}
		}
		if b.state == backupGood && b.verified && st.LastVerifiedBackup == "" {
			st.LastVerifiedBackup = b.name
		}
	}
	set(scheduleHealth(sc, s.cron, s.backups, s.now))
	return st
}

// scheduleReadiness is the verdict of a schedule's Ready, Reconciling and
// Stalled conditions. Ready says that the schedule is in force: its spec
// is valid and reconciled, suspended or not. Whether its backups are good
// is BackupsHealthy's to say (and an alert's), not a reason to hold a
// GitOps tool's wait on the schedule.
func scheduleReadiness(conds []metav1.Condition) readiness.Summary {
	health := apimeta.FindStatusCondition(conds, etcdv1alpha1.ScheduleBackupsHealthy)
	switch {
	case health == nil:
		return readiness.From(readiness.StateReconciling, nil, "Waiting for the first pass")
	case health.Reason == etcdv1alpha1.ReasonInvalidSchedule:
		return readiness.From(readiness.StateStalled, health, "")
	}
	return readiness.Summary{State: readiness.StateReady, Reason: etcdv1alpha1.ReasonScheduleInForce,
		Message: "The schedule is in force; BackupsHealthy says how its backups are"}
}
