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
// it.
var trimPod = manager.TrimPod(func(in, out *corev1.Pod) {
	out.Spec.NodeName = in.Spec.NodeName
	out.Status.Phase = in.Status.Phase
	for _, c := range in.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Status.Conditions = []corev1.PodCondition{c}
			break
		}
	}
})
