package etcdbackup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/readiness"
)

// scheduleScope is what one pass over an EtcdBackupSchedule saw and did.
type scheduleScope struct {
	schedule *etcdv1alpha1.EtcdBackupSchedule
	now      time.Time
	// invalid is why spec.schedule or spec.timeZone cannot be used.
	invalid error
	cron    cronSchedule
	// backups are the schedule's backups after this pass's deletions and
	// creation.
	backups  []scheduledBackup
	decision runDecision
	requeue  time.Duration
}

func (s *scheduleScope) requeueAt(t time.Time) {
	if t.IsZero() {
		return
	}
	d := t.Sub(s.now)
	if d <= 0 {
		d = time.Second
	}
	if s.requeue == 0 || d < s.requeue {
		s.requeue = d
	}
}

// Reconcile takes the due run of one schedule, if any, deletes the
// backups that retention drops, and writes the status once. It comes back
// exactly at the next run.
func (r *ScheduleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	sc := &etcdv1alpha1.EtcdBackupSchedule{}
	if err := r.Get(ctx, req.NamespacedName, sc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sc.DeletionTimestamp.IsZero() {
		// The garbage collector deletes the backups it owns.
		return ctrl.Result{}, nil
	}
	s := &scheduleScope{schedule: sc, now: r.Clock.Now()}
	before := sc.DeepCopy()
	defer func() {
		sc.Status = calculateScheduleStatus(sc, s)
		if retErr == nil {
			sc.Status.ObservedGeneration = sc.Generation
		}
		readiness.Set(&sc.Status.Conditions, sc.Generation, sc.Status.ObservedGeneration, scheduleReadiness(sc.Status.Conditions))
		if err := r.patchStatus(ctx, before, sc); err != nil {
			retErr = errors.Join(retErr, err)
			res = ctrl.Result{} // with an error, its backoff decides the retry
		}
	}()
	if err := r.reconcileNormal(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: s.requeue}, nil
}

// reconcileNormal: parse the schedule, prune, then take the due run.
func (r *ScheduleReconciler) reconcileNormal(ctx context.Context, s *scheduleScope) error {
	sc := s.schedule
	c, err := parseSchedule(&sc.Spec, s.now)
	if err != nil {
		s.invalid = err
		if cond := apimeta.FindStatusCondition(sc.Status.Conditions, etcdv1alpha1.ScheduleBackupsHealthy); cond == nil || cond.Reason != etcdv1alpha1.ReasonInvalidSchedule {
			record(r.Recorder, sc, nil, corev1.EventTypeWarning, etcdv1alpha1.ReasonInvalidSchedule, "Schedule", "%s", err.Error())
		}
		return nil // only a change of the spec can help, and it starts a pass
	}
	s.cron = c
	if err := r.readBackups(ctx, s); err != nil {
		return err
	}
	if err := r.applyRetention(ctx, s); err != nil {
		return err
	}
	if err := r.takeDueRun(ctx, s); err != nil {
		return err
	}
	if !sc.Spec.Suspend {
		s.requeueAt(s.decision.next)
	}
	s.requeueAt(scheduleHealth(sc, s.cron, s.backups, s.now).recheck)
	return nil
}

// readBackups lists the backups that the schedule controls.
func (r *ScheduleReconciler) readBackups(ctx context.Context, s *scheduleScope) error {
	sc := s.schedule
	var list etcdv1alpha1.EtcdBackupList
	if err := r.List(ctx, &list, client.InNamespace(sc.Namespace), client.MatchingLabels{etcdv1alpha1.LabelSchedule: sc.Name}); err != nil {
		return fmt.Errorf("listing the backups of the schedule: %w", err)
	}
	for i := range list.Items {
		if b := &list.Items[i]; metav1.IsControlledBy(b, sc) {
			s.backups = append(s.backups, viewBackup(b))
		}
	}
	slices.SortFunc(s.backups, newestFirst)
	return nil
}

// applyRetention deletes the backups that retention drops; their
// controller deletes their files (artifactPolicy Delete).
func (r *ScheduleReconciler) applyRetention(ctx context.Context, s *scheduleScope) error {
	sc := s.schedule
	drop := prune(s.backups, sc.Spec.Retention, s.cron.loc, s.now)
	for i := range s.backups {
		v := &s.backups[i]
		why, ok := drop[v.name]
		if !ok {
			continue
		}
		b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: sc.Namespace, Name: v.name, UID: v.uid}}
		deleted, err := deleteExactly(ctx, r.Client, b)
		if err != nil {
			return fmt.Errorf("deleting EtcdBackup %s: %w", v.name, err)
		}
		if !deleted {
			// Another backup took the name after the list: not the
			// schedule's to delete; the next pass lists again.
			continue
		}
		v.deleting = true
		record(r.Recorder, sc, b, corev1.EventTypeNormal, "BackupDeleted", "DeleteBackup", "Deleted EtcdBackup %s, of the run at %s: %s",
			v.name, v.at.In(s.cron.loc).Format(time.RFC3339), why)
	}
	return nil
}

// takeDueRun creates the backup of the due run, if one is due and no
// backup of the schedule is still active.
func (r *ScheduleReconciler) takeDueRun(ctx context.Context, s *scheduleScope) error {
	sc := s.schedule
	earliest := sc.CreationTimestamp.Time
	if t := sc.Status.LastScheduleTime; t != nil && t.After(earliest) {
		earliest = t.Time
	}
	for _, b := range s.backups {
		if b.at.After(earliest) {
			earliest = b.at
		}
	}
	s.decision = decideRun(s.cron, earliest, s.now, sc.Spec.StartingDeadlineSeconds)
	if sc.Spec.Suspend {
		return nil
	}
	if m := s.decision.missed; !m.IsZero() {
		record(r.Recorder, sc, nil, corev1.EventTypeWarning, "MissedSchedule", "Schedule",
			"Skipped the run at %s: it is %s late, past spec.startingDeadlineSeconds", m.In(s.cron.loc).Format(time.RFC3339), s.now.Sub(m).Round(time.Second))
	}
	due := s.decision.due
	if due.IsZero() || activeBackup(s.backups) != "" {
		// An active backup's end starts the next pass; the run stays due.
		return nil
	}
	b := scheduledBackupOf(sc, due.In(s.cron.loc))
	if err := controllerutil.SetControllerReference(sc, b, r.Scheme()); err != nil {
		return err
	}
	err := r.Create(ctx, b)
	switch {
	case apierrors.IsAlreadyExists(err):
		// The cache had not shown it yet: the run is taken.
	case err != nil:
		return fmt.Errorf("creating EtcdBackup %s: %w", b.Name, err)
	default:
		record(r.Recorder, sc, b, corev1.EventTypeNormal, "BackupCreated", "CreateBackup", "Created EtcdBackup %s for the run at %s",
			b.Name, b.Annotations[etcdv1alpha1.AnnotationScheduledTime])
	}
	s.backups = append([]scheduledBackup{{name: b.Name, at: due, state: backupActive}}, s.backups...)
	slices.SortFunc(s.backups, newestFirst)
	return nil
}

// scheduledBackupOf is the backup of sc for the run at t.
func scheduledBackupOf(sc *etcdv1alpha1.EtcdBackupSchedule, t time.Time) *etcdv1alpha1.EtcdBackup {
	return &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: sc.Namespace,
			Name:      scheduledBackupName(sc.Name, t.Unix()),
			Labels: map[string]string{
				etcdv1alpha1.LabelSchedule:      sc.Name,
				etcdv1alpha1.LabelBackupCluster: sc.Spec.ClusterRef.Name,
			},
			Annotations: map[string]string{etcdv1alpha1.AnnotationScheduledTime: t.Format(time.RFC3339)},
		},
		Spec: etcdv1alpha1.EtcdBackupSpec{
			ClusterRef:    sc.Spec.ClusterRef,
			BackupOptions: *sc.Spec.BackupTemplate.DeepCopy(),
		},
	}
}

// activeBackup is the newest backup that has not finished and is not
// being deleted, or "".
func activeBackup(backups []scheduledBackup) string {
	for _, b := range backups {
		if b.state == backupActive && !b.deleting {
			return b.name
		}
	}
	return ""
}

// patchStatus writes sc's status when the pass changed it.
func (r *ScheduleReconciler) patchStatus(ctx context.Context, before, sc *etcdv1alpha1.EtcdBackupSchedule) error {
	if equality.Semantic.DeepEqual(before.Status, sc.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, sc, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing the status: %w", err)
	}
	return nil
}

// scheduledBackupName is the name of the backup a schedule makes for the
// run at t: deterministic, so that a pass that reads a stale cache can
// never start a run twice.
func scheduledBackupName(schedule string, unix int64) string {
	return schedule + "-" + strconv.FormatInt(unix, 10)
}
