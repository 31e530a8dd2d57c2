package etcdcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// runMigrateVolumes takes the volume migration's one step (migration_plan.go):
// the backup that comes first, the StatefulSet remade with the spec's claim
// template, a leadership move, one member moved onto a new claim (its old
// volume kept), or a kept volume released. The learner that comes back is
// promoted by the Membership row, which comes first.
func (r *Reconciler) runMigrateVolumes(ctx context.Context, s *scope, w *world, d decision) error {
	c := s.cluster
	st := d.migration
	s.requeueAfter(requeueStep)
	switch st.kind {
	case migrateWait, migrateBlocked:
		s.requeueAfter(requeueUnreachable)
		return nil
	case migrateBackup:
		if err := r.createBackupClaim(ctx, c); err != nil {
			return err
		}
		b := migrationBackup(c)
		switch err := r.createOwned(ctx, c, b); { // as the upgrade's backup
		case err == nil:
			r.event(c, corev1.EventTypeNormal, "MigrationBackup", "CreateBackup", "Created EtcdBackup %s: the members move onto claims of %s once it is complete and verified", b.Name, targetOf(c))
		case !apierrors.IsAlreadyExists(err):
			return err
		}
		s.requeueAfter(requeueUnreachable)
		return nil
	case migrateRemakeSet:
		sts := s.sts
		if !metav1.IsControlledBy(sts, c) {
			return notOurs(c, "StatefulSet", sts)
		}
		// The UID, not the resourceVersion: a cache behind Tend's last
		// patch of the StatefulSet must not fail the pass.
		err := r.Delete(ctx, sts, client.PropagationPolicy(metav1.DeletePropagationOrphan), client.Preconditions{UID: &sts.UID})
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting StatefulSet %s, keeping its pods: %w", sts.Name, err)
		}
		r.event(c, corev1.EventTypeNormal, "RemakingStatefulSet", "DeleteStatefulSet", "Deleted StatefulSet %s keeping its pods and claims: it is made again with claims of %s", sts.Name, targetOf(c))
		return nil
	}

	callCtx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	m := st.member
	switch st.kind {
	case migrateMoveLeader:
		if err := s.cli.MoveLeader(callCtx, st.to); err != nil {
			return fmt.Errorf("%s: %w", st.message, err)
		}
		r.event(c, corev1.EventTypeNormal, "LeaderMoved", "MoveLeader", "Moved the leadership from %s to member %s before moving %s onto a new volume claim", m.Name, st.to, m.Name)
	case migrateMember:
		if err := r.retainVolume(ctx, c, st.claim); err != nil {
			return err
		}
		views, err := r.replaceMember(callCtx, s, s.cli, m, w.members, func() {
			r.event(c, corev1.EventTypeNormal, "MovingMember", "RemoveMember", "Removed member %s (%s) to move it onto a claim of %s; volume %s of its old claim is kept until it is a healthy voter again",
				m.Name, m.ID, targetOf(c), st.claim.volume)
		})
		w.members = views
		if err != nil {
			return fmt.Errorf("%s: %w", st.message, err)
		}
	case migrateRelease:
		return r.releaseVolume(ctx, c, st.volume)
	}
	return nil
}

// retainVolume keeps the volume of claim v when the claim is deleted: its
// reclaim policy becomes Retain, and it is marked with the cluster and the
// member (its own policy kept in an annotation). Only the volume bound to
// this very claim, in c's namespace, is touched.
func (r *Reconciler) retainVolume(ctx context.Context, c *etcdv1alpha1.EtcdCluster, v claimView) error {
	if v.volume == "" {
		return nil // not bound: no data to keep
	}
	pv := &corev1.PersistentVolume{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: v.volume}, pv); err != nil {
		return fmt.Errorf("reading volume %s of claim %s: %w", v.volume, v.name, err)
	}
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.Namespace != c.Namespace || ref.Name != v.name || ref.UID != v.uid {
		return fmt.Errorf("volume %s is not bound to claim %s/%s: %w", pv.Name, c.Namespace, v.name, errNotOurs)
	}
	if pv.Labels[etcdv1alpha1.LabelRetainedFor] == string(c.UID) && pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain {
		return nil
	}
	patch := client.MergeFromWithOptions(pv.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if pv.Labels == nil {
		pv.Labels = map[string]string{}
	}
	if pv.Annotations == nil {
		pv.Annotations = map[string]string{}
	}
	pv.Labels[etcdv1alpha1.LabelRetainedFor] = string(c.UID)
	pv.Annotations[etcdv1alpha1.AnnotationRetainedMember] = v.member
	if _, ok := pv.Annotations[etcdv1alpha1.AnnotationReclaimPolicy]; !ok {
		pv.Annotations[etcdv1alpha1.AnnotationReclaimPolicy] = string(pv.Spec.PersistentVolumeReclaimPolicy)
	}
	pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	if err := r.Patch(ctx, pv, patch); err != nil {
		return fmt.Errorf("keeping volume %s of claim %s: %w", pv.Name, v.name, err)
	}
	return nil
}

// releaseVolume gives a kept volume back its own reclaim policy and drops
// Tend's marks: a Delete policy lets its provisioner delete it now that
// its claim is gone.
func (r *Reconciler) releaseVolume(ctx context.Context, c *etcdv1alpha1.EtcdCluster, v retainedVolume) error {
	pv := &corev1.PersistentVolume{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: v.name}, pv); err != nil {
		return client.IgnoreNotFound(err)
	}
	if pv.Labels[etcdv1alpha1.LabelRetainedFor] != string(c.UID) || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != c.Namespace {
		return nil // no longer kept for this cluster
	}
	patch := client.MergeFromWithOptions(pv.DeepCopy(), client.MergeFromWithOptimisticLock{})
	delete(pv.Labels, etcdv1alpha1.LabelRetainedFor)
	delete(pv.Annotations, etcdv1alpha1.AnnotationRetainedMember)
	delete(pv.Annotations, etcdv1alpha1.AnnotationReclaimPolicy)
	pv.Spec.PersistentVolumeReclaimPolicy = v.policy
	if err := r.Patch(ctx, pv, patch); err != nil {
		return fmt.Errorf("releasing volume %s: %w", pv.Name, err)
	}
	r.event(c, corev1.EventTypeNormal, "VolumeReleased", "ReleaseVolume", "%s is a healthy voter on its new claim: volume %s of its old claim has its reclaim policy %s again", v.member, v.name, v.policy)
	return nil
}
