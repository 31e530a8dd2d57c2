package etcdcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// A restore from an EtcdBackup holds it: the cluster's restore finalizer
// (etcdv1alpha1.RestoreFinalizer) keeps the EtcdBackup, and with it its
// file (the etcdbackup controller deletes no file while a restore holds
// it), until the restore is done, whoever deletes the backup meanwhile:
// retention, or a person.

// holdBackup puts c's restore finalizer on the EtcdBackup name, before
// the restore reads it.
func (r *Reconciler) holdBackup(ctx context.Context, c *etcdv1alpha1.EtcdCluster, name string) error {
	b := &etcdv1alpha1.EtcdBackup{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, b); err != nil {
		return fmt.Errorf("reading EtcdBackup %s: %w", name, err)
	}
	if controllerutil.ContainsFinalizer(b, etcdv1alpha1.RestoreFinalizer(c.UID)) {
		return nil
	}
	patch := client.MergeFromWithOptions(b.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(b, etcdv1alpha1.RestoreFinalizer(c.UID))
	if err := r.Patch(ctx, b, patch); err != nil {
		return fmt.Errorf("holding EtcdBackup %s for the restore: %w", name, err)
	}
	return nil
}

// releaseBackups takes c's restore finalizer off every EtcdBackup that
// carries it: the restore is done (or failed, or the cluster is going).
func (r *Reconciler) releaseBackups(ctx context.Context, c *etcdv1alpha1.EtcdCluster) error {
	var list etcdv1alpha1.EtcdBackupList
	if err := r.List(ctx, &list, client.InNamespace(c.Namespace)); err != nil {
		return fmt.Errorf("listing EtcdBackups: %w", err)
	}
	for i := range list.Items {
		b := &list.Items[i]
		if !controllerutil.ContainsFinalizer(b, etcdv1alpha1.RestoreFinalizer(c.UID)) {
			continue
		}
		patch := client.MergeFromWithOptions(b.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(b, etcdv1alpha1.RestoreFinalizer(c.UID))
		if err := r.Patch(ctx, b, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("releasing EtcdBackup %s after the restore: %w", b.Name, err)
		}
		r.event(c, corev1.EventTypeNormal, "BackupReleased", "Restore", "The restore no longer reads EtcdBackup %s: it may be deleted", b.Name)
	}
	return nil
}

// sourceDeleting is the restore's verdict on a backup being deleted: one
// that c's restore does not hold yet must not be started on; one it holds
// stays until the restore is done.
func sourceDeleting(c *etcdv1alpha1.EtcdCluster, b *etcdv1alpha1.EtcdBackup) bool {
	return b.DeletionTimestamp != nil && !controllerutil.ContainsFinalizer(b, etcdv1alpha1.RestoreFinalizer(c.UID))
}
