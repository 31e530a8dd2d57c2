// Package v1alpha1 holds the apps.tend.dev/v1alpha1 API: PodSet, a
// ReplicaSet-like set of pods that Tend creates in slow-start batches and can
// give a leader.
//
// It holds types, validation markers and constants only; the behaviour lives
// in internal/controller/podset. v1alpha1 is the storage version.
//
// +kubebuilder:object:generate=true
// +groupName=apps.tend.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "apps.tend.dev", Version: "v1alpha1"}

	// SchemeBuilder adds this API's kinds to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this API's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &PodSet{}, &PodSetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
