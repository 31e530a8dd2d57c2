package etcdcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// runExpandVolumes asks every member claim below spec.storage.size, whose
// class allows expansion, for the new size. The volumes grow online; the
// claims' conditions say how far (status.go reports them), and no member
// restarts.
func (r *Reconciler) runExpandVolumes(ctx context.Context, s *scope, w *world, _ decision) error {
	c := s.cluster
	size := *c.Spec.Storage.Size
	for i := range w.data.pvcs {
		pvc := &w.data.pvcs[i]
		if !slices.Contains(w.maint.volumes.grow, pvc.Name) {
			continue
		}
		patch := client.MergeFromWithOptions(pvc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if pvc.Spec.Resources.Requests == nil {
			pvc.Spec.Resources.Requests = corev1.ResourceList{}
		}
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = size
		if err := r.Patch(ctx, pvc, patch); err != nil {
			return fmt.Errorf("asking volume claim %s for %s: %w", pvc.Name, size.String(), err)
		}
	}
	r.event(c, corev1.EventTypeNormal, "ExpandingVolumes", "ExpandVolumes", "Asked %s to grow to %s", strings.Join(w.maint.volumes.grow, ", "), size.String())
	s.requeueAfter(requeueUnreachable)
	return nil
}
