package podset

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
)

// newPod builds one pod of ps from its template: a generated name with the
// PodSet's as prefix, the template's labels plus the selector label, and a
// ControllerRef to ps.
func newPod(ps *appsv1alpha1.PodSet) (*corev1.Pod, error) {
	t := ps.Spec.Template.DeepCopy()
	labels := maps.Clone(t.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	delete(labels, appsv1alpha1.LabelRole) // only the election sets it
	labels[appsv1alpha1.LabelPodSet] = ps.Name
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    ps.Name + "-",
			Namespace:       ps.Namespace,
			Labels:          labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ps, appsv1alpha1.GroupVersion.WithKind("PodSet"))},
		},
		Spec: t.Spec,
	}, nil
}
