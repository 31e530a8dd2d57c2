// Package v1alpha1 holds the sqs.tend.dev/v1alpha1 API: Queue, an Amazon SQS
// queue that Tend creates and keeps in line with its spec.
//
// It holds types, validation markers and condition constants only; the
// behaviour lives in internal/controller/queue.
//
// +kubebuilder:object:generate=true
// +groupName=sqs.tend.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "sqs.tend.dev", Version: "v1alpha1"}

	// SchemeBuilder adds this API's kinds to a scheme. It depends on
	// apimachinery only, so that the API package stays cheap to import.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this API's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Queue{}, &QueueList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
