package etcdbackup

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// reconcileDelete deletes the file of a deleted backup with artifactPolicy
// Delete, then lets the backup go: stop its Job if it still runs, wait for
// its pods to stop (so that nothing writes the file after it is deleted),
// run the delete Job, wait for it, delete it, and remove the finalizer.
// Each step checks the world first, so a pass killed at any point resumes
// where it was. The annotation etcd.tend.dev/keep-artifact: "true" skips
// the file's deletion.
func (r *BackupReconciler) reconcileDelete(ctx context.Context, s *backupScope) error {
	b := s.backup
	s.obs.kind = obsNone
	if held, err := r.heldByRestores(ctx, s); err != nil || held {
		return err
	}
	if !controllerutil.ContainsFinalizer(b, etcdv1alpha1.BackupFinalizer) {
		return nil // Retain: the garbage collector deletes the Job
	}
	uri := location(b).URI
	if b.Annotations[etcdv1alpha1.AnnotationKeepArtifact] == "true" {
		record(r.Recorder, b, nil, corev1.EventTypeWarning, "ArtifactKept", "DeleteArtifact",
			"Kept the file %s: the annotation %s is true. Delete it yourself if it is not wanted", uri, etcdv1alpha1.AnnotationKeepArtifact)
		return r.release(ctx, s)
	}

	job, err := r.currentJob(ctx, b, BackupJobName(b))
	if err != nil {
		return err
	}
	mine := job != nil && metav1.IsControlledBy(job, b)
	if !mine && b.Status.StartTime == nil {
		// No Job of this backup ever ran: there is no file. (A Job of the
		// same name that it does not own is an earlier backup's.)
		return r.release(ctx, s)
	}
	if mine && job.DeletionTimestamp.IsZero() && !jobFinished(job) && !finished(b) {
		if _, err := deleteExactly(ctx, r.Client, job); err != nil {
			return fmt.Errorf("deleting Job %s: %w", job.Name, err)
		}
		record(r.Recorder, b, job, corev1.EventTypeNormal, "BackupStopped", "DeleteJob", "Deleted the running Job %s before deleting the file", job.Name)
	}
	if stopping, err := r.backupStopping(ctx, s, r.Pods); err != nil || stopping {
		return err
	}

	dj, err := r.currentJob(ctx, b, DeleteJobName(b))
	if err != nil {
		return err
	}
	if dj != nil && dj.Annotations[annotationOwnerUID] != string(b.UID) {
		s.obs.deleting = deletingCondition(etcdv1alpha1.ReasonDeletingArtifact, fmt.Sprintf(
			"Job %s belongs to an earlier EtcdBackup of the same name; waiting for it to be deleted: kubectl delete job -n %s %s", dj.Name, dj.Namespace, dj.Name))
		requeueUnlessWatched(s, dj)
		return nil
	}
	if dj == nil {
		// The pod cache may not show yet a pod that the Job made just
		// before it was deleted: before the file is deleted, the
		// apiserver says that none runs.
		if stopping, err := r.backupStopping(ctx, s, r.APIReader); err != nil || stopping {
			return err
		}
		return r.createDeleteJob(ctx, s)
	}
	view, err := r.readJobPods(ctx, dj)
	if err != nil {
		return err
	}
	o := observe(view, stepDelete, false)
	switch {
	case o.done:
		// The backup goes first, then the Job: while the Job is there, a
		// pass whose release failed (a stale cache) finds the file deleted
		// and releases again; had the Job gone first, it would make another
		// one. The Job's TTL removes it if its own delete fails below.
		if err := r.release(ctx, s); err != nil {
			return err
		}
		record(r.Recorder, b, nil, corev1.EventTypeNormal, "ArtifactDeleted", "DeleteArtifact", "Deleted the file %s", uri)
		if _, err := deleteExactly(ctx, r.Client, dj); err != nil {
			return fmt.Errorf("deleting Job %s: %w", dj.Name, err)
		}
		return nil
	case o.failed:
		msg := fmt.Sprintf("Deleting the file %s failed: %s. Read the logs (kubectl logs -n %s job/%s). Fix the cause (such as the credentials), then delete Job %s to try again; or set the annotation %s: \"true\" to keep the file and let the EtcdBackup go",
			uri, o.failure, b.Namespace, dj.Name, dj.Name, etcdv1alpha1.AnnotationKeepArtifact)
		if c := apimeta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.BackupDeleting); c == nil || c.Reason != etcdv1alpha1.ReasonArtifactDeletionFailed {
			record(r.Recorder, b, dj, corev1.EventTypeWarning, "ArtifactDeletionFailed", "DeleteArtifact", "%s", msg)
		}
		// Deleting the Job or setting the annotation starts the next pass.
		s.obs.deleting = deletingCondition(etcdv1alpha1.ReasonArtifactDeletionFailed, msg)
		return nil
	default:
		// Its pods' and its own changes start the next pass.
		s.obs.deleting = deletingCondition(etcdv1alpha1.ReasonDeletingArtifact, fmt.Sprintf(
			"Job %s is deleting the file %s%s", dj.Name, uri, progressNote(o)))
		return nil
	}
}

// backupStopping tells, reading pods through reader, whether a pod of the
// deleted backup's Job still runs, and then says so in the Deleting
// condition: nothing deletes the file while a pod may write it. The pod
// watch reports the pod's end, unless the pod lost its Job (kubectl delete
// --cascade=orphan): such a pod is looked at again.
func (r *BackupReconciler) backupStopping(ctx context.Context, s *backupScope, reader client.Reader) (bool, error) {
	b := s.backup
	pod, err := activePod(ctx, reader, b.Namespace, BackupJobName(b))
	if err != nil || pod == nil {
		return false, err
	}
	s.obs.deleting = deletingCondition(etcdv1alpha1.ReasonStoppingBackup, fmt.Sprintf(
		"Waiting for pod %s of the backup to stop before deleting the file %s", pod.Name, location(b).URI))
	if len(backupOfPod(ctx, pod)) == 0 {
		s.requeueAfter(requeueWaiting)
	}
	return true, nil
}

// heldByRestores tells whether restores still read the deleted backup:
// their clusters' finalizers keep it, and its file stays until they are
// done. The finalizer of a cluster that is gone (deleted during its
// restore, with deletionPolicy Retain) is dropped.
func (r *BackupReconciler) heldByRestores(ctx context.Context, s *backupScope) (bool, error) {
	b := s.backup
	uids := etcdv1alpha1.RestoringClusters(b.Finalizers)
	if len(uids) == 0 {
		return false, nil
	}
	var clusters etcdv1alpha1.EtcdClusterList
	if err := r.List(ctx, &clusters, client.InNamespace(b.Namespace)); err != nil {
		return false, fmt.Errorf("listing EtcdClusters: %w", err)
	}
	names := map[string]string{}
	for _, c := range clusters.Items {
		names[string(c.UID)] = c.Name
	}
	var holding []string
	patch := client.MergeFromWithOptions(b.DeepCopy(), client.MergeFromWithOptimisticLock{})
	for _, uid := range uids {
		if name, ok := names[uid]; ok {
			holding = append(holding, name)
			continue
		}
		controllerutil.RemoveFinalizer(b, etcdv1alpha1.RestoreFinalizerPrefix+uid)
	}
	if len(holding) < len(uids) {
		if err := r.Patch(ctx, b, patch); err != nil {
			return false, fmt.Errorf("dropping the restore finalizers of clusters that are gone: %w", err)
		}
	}
	if len(holding) == 0 {
		return false, nil
	}
	s.obs.deleting = deletingCondition(etcdv1alpha1.ReasonInUseByRestore, fmt.Sprintf(
		"EtcdCluster %s restores from this backup: the backup and its file stay until the restore is done", strings.Join(holding, ", ")))
	// The restore's release of its finalizer changes this backup, which
	// starts a pass; a cluster that goes without releasing it (its own
	// finalizer removed by hand) reports nothing here.
	s.requeueAfter(requeueWaiting)
	return true, nil
}

func deletingCondition(reason, msg string) *metav1.Condition {
	return &metav1.Condition{Type: etcdv1alpha1.BackupDeleting, Status: metav1.ConditionTrue, Reason: reason, Message: msg}
}

// createDeleteJob starts the Job that deletes b's file.
func (r *BackupReconciler) createDeleteJob(ctx context.Context, s *backupScope) error {
	b := s.backup
	// A pass that read a stale cache may come after the one that deleted
	// the file, deleted this Job and let the backup go: a Job made now
	// would outlive its backup, with no pass left to delete it. The backup
	// as the apiserver has it decides.
	live := &etcdv1alpha1.EtcdBackup{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(b), live); apierrors.IsNotFound(err) ||
		(err == nil && (live.UID != b.UID || !controllerutil.ContainsFinalizer(live, etcdv1alpha1.BackupFinalizer))) {
		s.released = true // gone, or going without Tend: nothing to write
		return nil
	} else if err != nil {
		return fmt.Errorf("reading EtcdBackup %s: %w", b.Name, err)
	}
	job := deleteJob(b, r.AgentImage)
	err := r.Create(ctx, job)
	switch {
	case apierrors.IsAlreadyExists(err):
		s.requeueAfter(time.Second)
		return nil
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// Nothing can be made in a namespace being deleted, and waiting
		// would hold the namespace for ever. The file stays: a volume's
		// goes with its claim in this namespace; an S3 object is kept,
		// which loses nothing.
		ctrl.LoggerFrom(ctx).Info("Keeping the file: its namespace is being deleted, so no delete Job can run", "uri", location(b).URI)
		return r.release(ctx, s)
	case err != nil:
		return fmt.Errorf("creating Job %s: %w", job.Name, err)
	}
	uri := location(b).URI
	record(r.Recorder, b, job, corev1.EventTypeNormal, "DeletingArtifact", "CreateJob", "Created Job %s to delete the file %s", job.Name, uri)
	s.obs.deleting = deletingCondition(etcdv1alpha1.ReasonDeletingArtifact, fmt.Sprintf("Job %s is deleting the file %s", job.Name, uri))
	return nil
}

// deleteExactly deletes obj, in the background, if it is still the object
// that was read: its UID is the delete's precondition. It reports whether
// that object is gone or going; false when the name now holds another
// object, which is not this delete's to touch.
func deleteExactly(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	uid := obj.GetUID()
	err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	switch {
	case apierrors.IsConflict(err):
		return false, nil
	case client.IgnoreNotFound(err) != nil:
		return false, err
	}
	return true, nil
}

// release removes the finalizer: the file is gone, or is to be kept.
func (r *BackupReconciler) release(ctx context.Context, s *backupScope) error {
	b := s.backup
	patch := client.MergeFromWithOptions(b.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(b, etcdv1alpha1.BackupFinalizer)
	if err := r.Patch(ctx, b, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing the finalizer: %w", err)
	}
	s.released = true
	return nil
}
