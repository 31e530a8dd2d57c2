package etcdcluster

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// finalizerData holds a deleted cluster until its data is dealt with as
// spec.deletionPolicy says: the final snapshot taken (Snapshot), and the
// members' volumes, which the garbage collector does not delete, deleted
// (Snapshot and Delete). Retain needs no finalizer.
const finalizerData = "etcd.tend.dev/data"

// wantsFinalizer tells whether the deletion policy needs Tend to act when
// the cluster is deleted.
func wantsFinalizer(c *etcdv1alpha1.EtcdCluster) bool {
	return deletionPolicy(c) != etcdv1alpha1.DeletionRetain
}

// runDelete deals with a deleted cluster's data as its deletion
// policy says, then lets it go: with Snapshot it takes the final backup
// first; with Snapshot and Delete it deletes the StatefulSet and the
// members' volumes. Each step checks the world first, so a pass that was
// cut short is picked up by the next.
func (r *Reconciler) runDelete(ctx context.Context, s *scope) error {
	c := s.cluster
	// Whatever restore the cluster ran is over.
	if err := r.releaseBackups(ctx, c); err != nil {
		return err
	}
	if !controllerutil.ContainsFinalizer(c, finalizerData) {
		return nil
	}
	if deletionPolicy(c) == etcdv1alpha1.DeletionSnapshot {
		done, err := r.takeFinalSnapshot(ctx, s)
		if err != nil || !done {
			return err
		}
	}
	if deletionPolicy(c) != etcdv1alpha1.DeletionRetain {
		s.obs.deletion = &deletion{etcdv1alpha1.ReasonDeletingMembers, "Deleting the members and their volumes"}
		if err := r.deleteMembers(ctx, c); err != nil {
			return err
		}
	}
	patch := client.MergeFrom(c.DeepCopy())
	controllerutil.RemoveFinalizer(c, finalizerData)
	if err := r.Patch(ctx, c, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing the finalizer: %w", err)
	}
	s.released = true
	return nil
}

// takeFinalSnapshot makes sure the final EtcdBackup exists and tells
// whether it is done. A cluster that never made its StatefulSet holds no
// data; a person may skip the snapshot with an annotation.
func (r *Reconciler) takeFinalSnapshot(ctx context.Context, s *scope) (bool, error) {
	c := s.cluster
	if c.Annotations[etcdv1alpha1.AnnotationSkipFinalSnapshot] == "true" {
		r.event(c, corev1.EventTypeWarning, "FinalSnapshotSkipped", "Delete",
			"Deleting without a final snapshot: the annotation %s is true", etcdv1alpha1.AnnotationSkipFinalSnapshot)
		return true, nil
	}
	ns := &corev1.Namespace{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: c.Namespace}, ns); err != nil {
		return false, fmt.Errorf("reading namespace %s: %w", c.Namespace, err)
	}
	if ns.DeletionTimestamp != nil {
		// Nothing new can be made in a namespace being deleted, and a
		// final snapshot cannot be taken: its Jobs, Secrets and volume go
		// with the namespace. Waiting would only hold the namespace.
		r.event(c, corev1.EventTypeWarning, "FinalSnapshotSkipped", "Delete",
			"Deleting without a final snapshot: namespace %s is being deleted, and nothing can be made in it. Delete the EtcdCluster before its namespace to keep a final snapshot", c.Namespace)
		return true, nil
	}
	sts := &appsv1.StatefulSet{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: statefulSetName(c)}, sts)
	if apierrors.IsNotFound(err) && len(c.Status.Members) == 0 {
		return true, nil // never started: no data
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("reading StatefulSet %s: %w", statefulSetName(c), err)
	}
	if formed, err := r.everFormed(ctx, c); err != nil || !formed {
		if err == nil {
			err = r.dropFinalBackup(ctx, c)
		}
		return err == nil, err
	}
	backup := &etcdv1alpha1.EtcdBackup{}
	err = r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: FinalBackupName(c)}, backup)
	if apierrors.IsNotFound(err) {
		if err := r.createFinalBackup(ctx, c); err != nil {
			return false, err
		}
		s.obs.deletion = &deletion{etcdv1alpha1.ReasonTakingFinalSnapshot,
			fmt.Sprintf("Taking the final snapshot, EtcdBackup %s, before deleting the members", FinalBackupName(c))}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading EtcdBackup %s: %w", FinalBackupName(c), err)
	}
	s.obs.finalSnapshot = backup.Name
	state, why := finalBackupState(backup)
	switch state {
	case backupFailed:
		s.obs.deletion = &deletion{etcdv1alpha1.ReasonFinalSnapshotFailed, fmt.Sprintf(
			"The final snapshot, EtcdBackup %s, failed: %s. The members and volumes stay until it succeeds. To go on: fix the cause and delete the EtcdBackup to take it again; "+
				"or set spec.deletionPolicy to Delete (no snapshot) or Retain (keep the volumes); or annotate the cluster %s=true to delete without a snapshot",
			backup.Name, why, etcdv1alpha1.AnnotationSkipFinalSnapshot)}
		return false, nil
	case backupRunning:
		msg := fmt.Sprintf("Waiting for the final snapshot, EtcdBackup %s", backup.Name)
		if p := apimeta.FindStatusCondition(backup.Status.Conditions, etcdv1alpha1.BackupComplete); p != nil && p.Message != "" {
			msg += ": " + p.Message
		}
		s.obs.deletion = &deletion{etcdv1alpha1.ReasonTakingFinalSnapshot, msg}
		return false, nil
	}
	return true, nil
}

// everFormed tells whether c's members ever held data: it was restored
// from a backup, its init Job was made (a quorum was healthy), or a
// member's volume claim carries a member ID (a member was seen healthy on
// it). A cluster that never formed, such as one whose pods a quota
// refused, has nothing to snapshot, and the final backup would wait for
// ever for it to become Available.
func (r *Reconciler) everFormed(ctx context.Context, c *etcdv1alpha1.EtcdCluster) (bool, error) {
	if restoring(c) {
		return true, nil
	}
	for _, m := range c.Status.Members {
		if m.VolumeUID != "" {
			return true, nil
		}
	}
	job, err := r.ownedJob(ctx, c, initJobName(c))
	switch {
	case err == nil && job != nil:
		return true, nil
	case err != nil && !errors.Is(err, errNotOurs):
		return false, err
	}
	pvcs, err := r.claimsOf(ctx, c)
	if err != nil {
		return false, err
	}
	for i := range pvcs {
		if _, ok := isMemberPVC(c, &pvcs[i]); ok && pvcs[i].Annotations[annotationMemberID] != "" {
			return true, nil
		}
	}
	return false, nil
}

// dropFinalBackup deletes the final EtcdBackup of a cluster that never
// formed, if an earlier pass made it: it can hold nothing, and would wait
// for its cluster for ever. Its file, if any, stays (artifactPolicy Retain).
func (r *Reconciler) dropFinalBackup(ctx context.Context, c *etcdv1alpha1.EtcdCluster) error {
	backup := &etcdv1alpha1.EtcdBackup{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: FinalBackupName(c)}, backup)
	switch {
	case err == nil && backup.Labels[labelClusterUID] == string(c.UID):
		if err := r.deleteExactly(ctx, "EtcdBackup", backup); err != nil {
			return err
		}
	case client.IgnoreNotFound(err) != nil:
		return fmt.Errorf("reading EtcdBackup %s: %w", FinalBackupName(c), err)
	}
	// An EtcdBackup of that name that this cluster did not ask for is
	// another's, and stays.
	r.event(c, corev1.EventTypeNormal, "FinalSnapshotSkipped", "Delete",
		"Deleting without a final snapshot: the cluster never formed (no init Job, and no member was ever seen healthy), so it holds no data")
	return nil
}

func (r *Reconciler) createFinalBackup(ctx context.Context, c *etcdv1alpha1.EtcdCluster) error {
	backup := finalBackup(c)
	if backup.Spec.Destination.Volume != nil {
		if err := r.Create(ctx, finalSnapshotClaim(c)); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the final snapshot's volume claim %s: %w", finalSnapshotClaimName(c), err)
		}
	}
	if err := r.Create(ctx, backup); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the final snapshot's EtcdBackup %s: %w", backup.Name, err)
	}
	r.event(c, corev1.EventTypeNormal, "FinalSnapshot", "Delete", "Taking the final snapshot, EtcdBackup %s, before deleting the members", backup.Name)
	return nil
}

// deleteMembers deletes the StatefulSet (its pods with it) and the
// members' volume claims; NotFound counts as done.
func (r *Reconciler) deleteMembers(ctx context.Context, c *etcdv1alpha1.EtcdCluster) error {
	sts := &appsv1.StatefulSet{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: statefulSetName(c)}, sts)
	switch {
	case err == nil && metav1.IsControlledBy(sts, c):
		if err := r.deleteExactly(ctx, "StatefulSet", sts); err != nil {
			return err
		}
	case client.IgnoreNotFound(err) != nil:
		return fmt.Errorf("reading StatefulSet %s: %w", statefulSetName(c), err)
	}
	// A StatefulSet of that name that c does not control is another's,
	// and stays.
	pvcs, err := r.claimsOf(ctx, c)
	if err != nil {
		return err
	}
	deleted := 0
	for i := range pvcs {
		pvc := &pvcs[i]
		if _, ok := isMemberPVC(c, pvc); !ok || pvc.DeletionTimestamp != nil {
			continue
		}
		if err := r.deleteExactly(ctx, "volume claim", pvc); err != nil {
			return err
		}
		deleted++
	}
	r.event(c, corev1.EventTypeNormal, "MembersDeleted", "Delete", "Deleted StatefulSet %s and %d member volume claims (deletionPolicy %s)", statefulSetName(c), deleted, deletionPolicy(c))
	return nil
}

// reconcileFinalizer keeps the finalizer on a cluster whose deletion
// policy needs one, and takes it off one whose policy became Retain.
func (r *Reconciler) reconcileFinalizer(ctx context.Context, c *etcdv1alpha1.EtcdCluster) error {
	want := wantsFinalizer(c)
	if want == controllerutil.ContainsFinalizer(c, finalizerData) {
		return nil
	}
	patch := client.MergeFromWithOptions(c.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if want {
		controllerutil.AddFinalizer(c, finalizerData)
	} else {
		controllerutil.RemoveFinalizer(c, finalizerData)
	}
	if err := r.Patch(ctx, c, patch); err != nil {
		return fmt.Errorf("updating the finalizer: %w", err)
	}
	r.written.Wrote(c)
	return nil
}
