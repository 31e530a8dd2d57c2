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

// Tend deletes, restarts or takes as its own only what it made for this
// cluster: an object whose name Tend derives may belong to an older
// cluster of the same name, another controller, or a person. What made an
// object is told by its controller reference (Jobs, the StatefulSet, member
// pods through the StatefulSet) or, for the members' volume claims, which
// the StatefulSet makes without one, by the cluster-UID label.

// notOurs says that obj holds a name that Tend wants, and what to do.
func notOurs(c *etcdv1alpha1.EtcdCluster, kind string, obj client.Object) error {
	return fmt.Errorf("%s %s exists but is %w (EtcdCluster %s, UID %s); Tend leaves it alone: delete or rename it if it is not needed",
		kind, obj.GetName(), errNotOurs, c.Name, c.UID)
}

// deleteOwned deletes obj, as read, if c controls it, and only that very
// object (its UID is the delete's precondition); in the background, so a
// Job goes at once and its pods after it. NotFound counts as done.
func (r *Reconciler) deleteOwned(ctx context.Context, c *etcdv1alpha1.EtcdCluster, kind string, obj client.Object) error {
	if !metav1.IsControlledBy(obj, c) {
		return notOurs(c, kind, obj)
	}
	return r.deleteExactly(ctx, kind, obj)
}

// deleteExactly deletes obj if it is still the object that was read.
func (r *Reconciler) deleteExactly(ctx context.Context, kind string, obj client.Object) error {
	uid := obj.GetUID()
	err := r.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		// A conflict is a precondition that failed: the object of that
		// name is another one now, and not ours to delete.
		return fmt.Errorf("deleting %s %s: %w", kind, obj.GetName(), err)
	}
	return nil
}

// claimsOf lists, from the cache, the volume claims labelled with c's
// name: c's members', and any that an older cluster of the name left.
func (r *Reconciler) claimsOf(ctx context.Context, c *etcdv1alpha1.EtcdCluster) ([]corev1.PersistentVolumeClaim, error) {
	var pvcs corev1.PersistentVolumeClaimList
	if err := r.List(ctx, &pvcs, client.InNamespace(c.Namespace), client.MatchingLabels{LabelCluster: c.Name}); err != nil {
		return nil, fmt.Errorf("listing volume claims: %w", err)
	}
	return pvcs.Items, nil
}
