package etcdcluster

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// The roll marks pods that an older Tend made (adoptUnmarkedPods).
// +kubebuilder:rbac:groups="",resources=pods,verbs=patch

// adoptUnmarkedPods marks the pods that a Tend older than revisions made
// with the current revision when they already run what it asks (runsAs),
// so that upgrading Tend restarts no member for an annotation. Pods that
// run something else stay unmarked and roll, as a new Tend's change.
func (r *Reconciler) adoptUnmarkedPods(ctx context.Context, want corev1.PodTemplateSpec, pods map[string]*corev1.Pod) error {
	rev := want.Annotations[etcdv1alpha1.AnnotationMemberRevision]
	for _, pod := range pods {
		if _, marked := pod.Annotations[etcdv1alpha1.AnnotationMemberRevision]; marked || pod.DeletionTimestamp != nil || !runsAs(pod, want) {
			continue
		}
		patch := client.MergeFrom(pod.DeepCopy())
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[etcdv1alpha1.AnnotationMemberRevision] = rev
		if err := r.Patch(ctx, pod, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("marking pod %s with its revision: %w", pod.Name, err)
		}
	}
	return nil
}

// runsAs tells whether pod's etcd container runs what template's does:
// the same image, command, settings (the bootstrap ones aside) and
// resources. Those are what a spec or a Tend change alters; fields the
// apiserver defaults are left out.
func runsAs(pod *corev1.Pod, template corev1.PodTemplateSpec) bool {
	find := func(cs []corev1.Container) *corev1.Container {
		for i := range cs {
			if cs[i].Name == "etcd" {
				return &cs[i]
			}
		}
		return nil
	}
	have, want := find(pod.Spec.Containers), find(template.Spec.Containers)
	if have == nil || want == nil {
		return false
	}
	return have.Image == want.Image && slices.Equal(have.Command, want.Command) && slices.Equal(have.Args, want.Args) &&
		equality.Semantic.DeepEqual(settingsOf(have.Env), settingsOf(want.Env)) &&
		equality.Semantic.DeepEqual(resourcesOf(have.Resources), resourcesOf(want.Resources))
}

// settingsOf is env without the bootstrap settings, and with the field
// references' API version left out, which the apiserver defaults.
func settingsOf(env []corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range env {
		if slices.Contains(bootstrapEnv, e.Name) {
			continue
		}
		e = *e.DeepCopy()
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			e.ValueFrom.FieldRef.APIVersion = ""
		}
		out = append(out, e)
	}
	return out
}

// resourcesOf is r with the requests that the apiserver defaults from the
// limits filled in.
func resourcesOf(r corev1.ResourceRequirements) corev1.ResourceRequirements {
	r = *r.DeepCopy()
	for name, limit := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			r.Requests[name] = limit
		}
	}
	return r
}
