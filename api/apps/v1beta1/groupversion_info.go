// Package v1beta1 holds the apps.tend.dev/v1beta1 API: PodSet as v1alpha1
// has it, with the leader settings moved into an object (spec.leader) that
// has room to grow.
//
// v1alpha1 stays the storage version and the conversion hub: every v1beta1
// PodSet is stored as v1alpha1, and converted by the manager's conversion
// webhook (internal/webhook) on the way in and out. This package holds the
// types, their validation markers and the conversion to and from the hub; it
// holds no behaviour, which lives in internal/controller/podset and acts on
// v1alpha1 only.
//
// +kubebuilder:object:generate=true
// +groupName=apps.tend.dev
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "apps.tend.dev", Version: "v1beta1"}
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
