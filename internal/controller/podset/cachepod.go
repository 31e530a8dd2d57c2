package podset

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	"github.com/tend-dev/tend/internal/manager"
)

// PodCache restricts the manager's pod cache to pods that carry the PodSet
// label, so that memory grows with the PodSets' pods, not the cluster's,
// and keeps of each only what the controller reads (trimPod).
func PodCache() cache.ByObject {
	by := manager.WithLabel(appsv1alpha1.LabelPodSet)
	by.Transform = trimPod
	return by
}

// trimPod keeps of a pod what the controller decides on: its metadata (the
// labels, owner references, deletion and creation times, resourceVersion),
// less managedFields; spec.nodeName; status.phase; and the Ready
// condition. The rest of a pod (its containers, volumes, the other
// conditions, container statuses) is most of its size, and no pass reads
// it. Every write of a cached pod is a merge patch computed from the
// cached copy, so a field left out here is never written back.
func trimPod(in any) (any, error) {
	p, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil
	}
	out := &corev1.Pod{
		TypeMeta:   p.TypeMeta,
		ObjectMeta: p.ObjectMeta,
		Spec:       corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status:     corev1.PodStatus{Phase: p.Status.Phase},
	}
	out.ManagedFields = nil
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Status.Conditions = []corev1.PodCondition{c}
			break
		}
	}
	return out, nil
}
