package etcdbackup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcdnames"
	"github.com/tend-dev/tend/internal/readiness"
)

// requeueWaiting is how often a backup looks again at what it waits for
// that no watch reports: its cluster's connection ConfigMap, a Job of its
// name that is not Tend's, a restore that holds it, a pod that lost its
// Job. Its cluster's appearing or becoming Available starts a pass at
// once, and so does every change of its Jobs and their pods.
const requeueWaiting = 30 * time.Second

// backupScope is what the phases of one pass over an EtcdBackup share.
type backupScope struct {
	backup *etcdv1alpha1.EtcdBackup
	now    time.Time
	// obs is what the status is computed from.
	obs backupObservation
	// released: the finalizer is gone, and with it perhaps the object; no
	// status is written.
	released bool
	requeue  time.Duration
}

// requeueAfter asks for a pass within d; the shortest request wins.
func (s *backupScope) requeueAfter(d time.Duration) {
	if d > 0 && (s.requeue == 0 || d < s.requeue) {
		s.requeue = d
	}
}

// Reconcile takes one EtcdBackup a step further: wait for its cluster and
// its turn, create its Job, read the steps' results from the Job's pods;
// or, once deleted, delete its file. It writes the status once, from what
// it saw.
func (r *BackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	b := &etcdv1alpha1.EtcdBackup{}
	if err := r.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The finalizer comes before the Job, so that no file is ever written
	// that a deletion would forget.
	if b.DeletionTimestamp.IsZero() && deletesArtifact(b) && !controllerutil.ContainsFinalizer(b, etcdv1alpha1.BackupFinalizer) {
		patch := client.MergeFromWithOptions(b.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(b, etcdv1alpha1.BackupFinalizer)
		if err := r.Patch(ctx, b, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
	}
	s := &backupScope{backup: b, now: r.Clock.Now()}
	before := b.DeepCopy()
	defer func() {
		if s.released {
			return
		}
		b.Status = calculateBackupStatus(b, s.obs, s.now)
		if retErr == nil {
			b.Status.ObservedGeneration = b.Generation
		}
		readiness.Set(&b.Status.Conditions, b.Generation, b.Status.ObservedGeneration, backupReadiness(b, b.Status.Conditions))
		r.recordTransitions(before, b)
		if err := r.patchStatus(ctx, before, b); err != nil {
			retErr = errors.Join(retErr, err)
			res = ctrl.Result{} // with an error, its backoff decides the retry
		}
	}()

	var err error
	if !b.DeletionTimestamp.IsZero() {
		err = r.reconcileDelete(ctx, s)
	} else {
		err = r.reconcileNormal(ctx, s)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: s.requeue}, nil
}

// deletesArtifact tells whether deleting b deletes its file.
func deletesArtifact(b *etcdv1alpha1.EtcdBackup) bool {
	return b.Spec.ArtifactPolicy != etcdv1alpha1.ArtifactRetain
}

// finished tells whether b has come to its end: failed, or complete and
// (when verification is on) verified. Nothing changes a finished backup.
func finished(b *etcdv1alpha1.EtcdBackup) bool {
	conds := b.Status.Conditions
	if apimeta.IsStatusConditionTrue(conds, etcdv1alpha1.BackupFailed) {
		return true
	}
	if !apimeta.IsStatusConditionTrue(conds, etcdv1alpha1.BackupComplete) {
		return false
	}
	return !verifyOn(b) || apimeta.IsStatusConditionTrue(conds, etcdv1alpha1.BackupVerified)
}

// reconcileNormal runs the phases in order; each may end the pass.
func (r *BackupReconciler) reconcileNormal(ctx context.Context, s *backupScope) error {
	b := s.backup
	if finished(b) {
		s.obs.kind = obsNone
		return nil
	}
	job, err := r.currentJob(ctx, b, BackupJobName(b))
	if err != nil {
		return err
	}
	switch {
	case job != nil && !metav1.IsControlledBy(job, b):
		s.obs.pending(etcdv1alpha1.ReasonJobNameTaken, fmt.Sprintf(
			"A Job named %s exists that this EtcdBackup does not own, such as one of an earlier EtcdBackup of the same name that is being deleted; the backup starts once it is gone",
			job.Name))
		requeueUnlessWatched(s, job)
		return nil
	case job != nil:
		return r.observeJob(ctx, s, job)
	case b.Status.StartTime != nil:
		s.obs.kind = obsJobGone
		return nil
	}

	c, ok, err := r.readyCluster(ctx, s)
	if err != nil || !ok {
		return err
	}
	if blocker, err := r.blockingBackup(ctx, b); err != nil || blocker != "" {
		if blocker != "" {
			// The blocker's finishing or going (turnEnded), and its Job's
			// end (backupsOfJob), start a pass.
			s.obs.pending(etcdv1alpha1.ReasonWaitingForOtherBackup, blocker)
		}
		return err
	}
	return r.createJob(ctx, s, c)
}

// currentJob reads the Job named name: from the cache, and when the cache
// lacks it, from the apiserver, so that a Job created by the last pass is
// never taken for a lost one. It is nil when there is none.
func (r *BackupReconciler) currentJob(ctx context.Context, b *etcdv1alpha1.EtcdBackup, name string) (*batchv1.Job, error) {
	key := client.ObjectKey{Namespace: b.Namespace, Name: name}
	job := &batchv1.Job{}
	err := r.Get(ctx, key, job)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, job)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading Job %s: %w", name, err)
	}
	return job, nil
}

// requeueUnlessWatched asks to look again at a Job that holds the name of
// one of s's Jobs and is not its own, unless the Job watch reports its
// deletion: it does for a Job labelled for this backup's name (one of an
// earlier EtcdBackup of the same name), not for anyone else's.
func requeueUnlessWatched(s *backupScope, job *batchv1.Job) {
	if job.Labels[etcdv1alpha1.LabelBackup] != s.backup.Name {
		s.requeueAfter(requeueWaiting)
	}
}

// readyCluster reads b's cluster and tells whether a backup can start: it
// exists, is Available, and has published its connection ConfigMap. When
// it cannot, the observation says what the backup waits for.
func (r *BackupReconciler) readyCluster(ctx context.Context, s *backupScope) (*etcdv1alpha1.EtcdCluster, bool, error) {
	b := s.backup
	c := &etcdv1alpha1.EtcdCluster{}
	err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterRef.Name}, c)
	switch {
	case apierrors.IsNotFound(err):
		s.obs.pending(etcdv1alpha1.ReasonClusterNotFound, fmt.Sprintf(
			"Waiting for EtcdCluster %s, which does not exist in namespace %s: create it, or create a backup of a cluster that exists", b.Spec.ClusterRef.Name, b.Namespace))
		s.requeueAfter(requeueWaiting)
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("reading EtcdCluster %s: %w", b.Spec.ClusterRef.Name, err)
	}
	if !available(c) {
		why := "it has no Available condition yet"
		if cond := apimeta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAvailable); cond != nil {
			why = fmt.Sprintf("Available is %s, %s: %s", cond.Status, cond.Reason, cond.Message)
		}
		s.obs.pending(etcdv1alpha1.ReasonClusterNotAvailable, fmt.Sprintf(
			"Waiting for EtcdCluster %s to be Available (%s); the backup starts when it is", c.Name, why))
		s.requeueAfter(requeueWaiting)
		return nil, false, nil
	}
	// Read live: the manager caches no ConfigMaps, and this is read once
	// per backup.
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: etcdnames.ConnectionName(c)}, &corev1.ConfigMap{})
	switch {
	case apierrors.IsNotFound(err):
		s.obs.pending(etcdv1alpha1.ReasonWaitingForConnection, fmt.Sprintf(
			"Waiting for ConfigMap %s, where the EtcdCluster controller publishes how to reach the cluster; is that controller running?", etcdnames.ConnectionName(c)))
		s.requeueAfter(requeueWaiting)
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("reading ConfigMap %s: %w", etcdnames.ConnectionName(c), err)
	}
	return c, true, nil
}

// blockingBackup returns a message naming the backup of the same cluster
// that b must wait for, or "" when b may start.
func (r *BackupReconciler) blockingBackup(ctx context.Context, b *etcdv1alpha1.EtcdBackup) (string, error) {
	cluster := b.Spec.ClusterRef.Name
	var backups etcdv1alpha1.EtcdBackupList
	if err := r.List(ctx, &backups, client.InNamespace(b.Namespace), client.MatchingFields{indexCluster: cluster}); err != nil {
		return "", fmt.Errorf("listing the backups of cluster %s: %w", cluster, err)
	}
	var jobs batchv1.JobList
	if err := r.List(ctx, &jobs, client.InNamespace(b.Namespace), client.MatchingLabels{
		etcdv1alpha1.LabelBackupCluster: cluster, "app.kubernetes.io/component": componentBackup,
	}); err != nil {
		return "", fmt.Errorf("listing the backup Jobs of cluster %s: %w", cluster, err)
	}
	return blockedBy(b, backups.Items, jobs.Items), nil
}

// blockedBy is why b must wait for another backup of its cluster, or ""
// when it need not: one backup of a cluster runs at a time. Another backup
// blocks b while its Job runs, or when it was created first and has not
// started yet, so that two backups that become ready together never both
// start, whatever order their passes run in.
func blockedBy(b *etcdv1alpha1.EtcdBackup, backups []etcdv1alpha1.EtcdBackup, jobs []batchv1.Job) string {
	running := map[string]bool{}
	for i := range jobs {
		if j := &jobs[i]; !jobFinished(j) {
			running[j.Labels[etcdv1alpha1.LabelBackup]] = true
		}
	}
	others := slices.Clone(backups)
	slices.SortFunc(others, func(x, y etcdv1alpha1.EtcdBackup) int { return strings.Compare(x.Name, y.Name) })
	for i := range others {
		o := &others[i]
		if o.Name == b.Name || o.Spec.ClusterRef.Name != b.Spec.ClusterRef.Name {
			continue
		}
		switch {
		case !o.DeletionTimestamp.IsZero():
			// Its deletion stops its Job first.
			if running[o.Name] {
				return fmt.Sprintf("Waiting for the Job of EtcdBackup %s, which is being deleted, to stop: one backup of cluster %s runs at a time", o.Name, b.Spec.ClusterRef.Name)
			}
		case finished(o):
		case running[o.Name] || o.Status.StartTime != nil:
			return fmt.Sprintf("Waiting for EtcdBackup %s to finish: one backup of cluster %s runs at a time", o.Name, b.Spec.ClusterRef.Name)
		case createdBefore(o, b):
			return fmt.Sprintf("Waiting for EtcdBackup %s, created first, to run first: one backup of cluster %s runs at a time", o.Name, b.Spec.ClusterRef.Name)
		}
	}
	return ""
}

// createdBefore orders backups by creation, then by name.
func createdBefore(a, b *etcdv1alpha1.EtcdBackup) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// jobFinished tells whether the Job controller has finished job.
func jobFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return true
		}
	}
	return false
}

// createJob creates b's Job.
func (r *BackupReconciler) createJob(ctx context.Context, s *backupScope, c *etcdv1alpha1.EtcdCluster) error {
	b := s.backup
	job := backupJob(b, c, r.AgentImage)
	if err := controllerutil.SetControllerReference(b, job, r.Scheme()); err != nil {
		return err
	}
	err := r.Create(ctx, job)
	switch {
	case apierrors.IsAlreadyExists(err):
		// A pass that the cache had not told about the last one's Job.
		s.requeueAfter(time.Second)
		return nil
	case err != nil:
		return fmt.Errorf("creating Job %s: %w", job.Name, err)
	}
	record(r.Recorder, b, job, corev1.EventTypeNormal, "JobCreated", "CreateJob", "Created Job %s to back up cluster %s to %s", job.Name, c.Name, location(b).URI)
	s.obs.kind, s.obs.job = obsJob, jobView{name: job.Name, created: s.now}
	return nil
}

// observeJob reads b's Job and its pods (readJobPods). Nothing is asked
// to look again: every change of the Job (Owns) and of its pods (the pod
// watch) starts a pass.
func (r *BackupReconciler) observeJob(ctx context.Context, s *backupScope, job *batchv1.Job) error {
	view, err := r.readJobPods(ctx, job)
	if err != nil {
		return err
	}
	s.obs.kind, s.obs.job = obsJob, view
	s.obs.outcome = observe(view, stepBackup, verifyOn(s.backup))
	return nil
}

// recordTransitions records an Event for each condition that this pass
// changed in a way a person wants to hear of.
func (r *BackupReconciler) recordTransitions(before, after *etcdv1alpha1.EtcdBackup) {
	became := func(t string, status metav1.ConditionStatus) *metav1.Condition {
		cur := apimeta.FindStatusCondition(after.Status.Conditions, t)
		if cur == nil || cur.Status != status {
			return nil
		}
		if old := apimeta.FindStatusCondition(before.Status.Conditions, t); old != nil && old.Status == status {
			return nil
		}
		return cur
	}
	if c := became(etcdv1alpha1.BackupComplete, metav1.ConditionTrue); c != nil {
		record(r.Recorder, after, nil, corev1.EventTypeNormal, "Completed", "Backup", "%s", c.Message)
	}
	if c := became(etcdv1alpha1.BackupVerified, metav1.ConditionTrue); c != nil {
		record(r.Recorder, after, nil, corev1.EventTypeNormal, "Verified", "Verify", "%s", c.Message)
	}
	if c := became(etcdv1alpha1.BackupVerified, metav1.ConditionFalse); c != nil && c.Reason != etcdv1alpha1.ReasonBackupFailed {
		record(r.Recorder, after, nil, corev1.EventTypeWarning, "VerificationFailed", "Verify", "%s", c.Message)
	}
	if c := became(etcdv1alpha1.BackupFailed, metav1.ConditionTrue); c != nil {
		record(r.Recorder, after, nil, corev1.EventTypeWarning, "Failed", "Backup", "%s", c.Message)
	}
}

// patchStatus writes b's status when the pass changed it. The status is
// computed afresh by every pass, so the last writer is right.
func (r *BackupReconciler) patchStatus(ctx context.Context, before, b *etcdv1alpha1.EtcdBackup) error {
	if equality.Semantic.DeepEqual(before.Status, b.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, b, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing the status: %w", err)
	}
	return nil
}
