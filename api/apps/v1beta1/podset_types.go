package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodSetSpec is the desired state of a PodSet.
//
// +kubebuilder:validation:XValidation:rule="size(self.template.spec.containers) > 0",message="spec.template.spec.containers must list at least one container"
// +kubebuilder:validation:XValidation:rule="!has(self.template.metadata) || !has(self.template.metadata.labels) || !('apps.tend.dev/podset' in self.template.metadata.labels)",message="spec.template.metadata.labels must not set apps.tend.dev/podset: Tend sets it to the PodSet's name and selects the pods by it; remove it from the template"
// +kubebuilder:validation:XValidation:rule="!has(self.template.metadata) || !has(self.template.metadata.labels) || !('tend.dev/role' in self.template.metadata.labels)",message="spec.template.metadata.labels must not set tend.dev/role: Tend sets it on the elected leader pod only; remove it from the template"
type PodSetSpec struct {
	// Replicas is the number of pods to run. It is also the /scale
	// subresource's spec.replicas, so kubectl scale and a
	// HorizontalPodAutoscaler can set it.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Template is the pod that the PodSet runs copies of. Tend adds the label
	// apps.tend.dev/podset=<PodSet name> to every pod and selects its pods by
	// that label, so the template must not set it.
	Template corev1.PodTemplateSpec `json:"template"`

	// Leader configures the optional leader pod. Without it there is none.
	// +optional
	Leader *Leader `json:"leader,omitempty"`
}

// Leader configures the leader pod: one Ready pod that Tend labels
// tend.dev/role=leader and selects with the Service <name>-leader, for
// applications that cannot elect a leader themselves.
//
// It replaces v1alpha1's boolean spec.leaderElection, for the reasons the
// Kubernetes API conventions give against booleans: an enum can gain a third
// mode that a boolean cannot (an election that the application runs, say,
// with Tend keeping only the Service), and an object gives the leader's
// other settings (the Service's name or type, the label) a place that does
// not crowd the top of the spec.
type Leader struct {
	// Election is Enabled to keep exactly one Ready pod labelled
	// tend.dev/role=leader and a Service <name>-leader that selects it, or
	// Disabled.
	// +kubebuilder:validation:Enum=Disabled;Enabled
	// +kubebuilder:default=Disabled
	// +optional
	Election LeaderElection `json:"election,omitempty"`
}

// LeaderElection says whether Tend elects a leader pod.
type LeaderElection string

const (
	// LeaderElectionDisabled: no pod is labelled leader.
	LeaderElectionDisabled LeaderElection = "Disabled"
	// LeaderElectionEnabled: Tend keeps exactly one Ready pod labelled leader.
	LeaderElectionEnabled LeaderElection = "Enabled"
)

// PodSetStatus is the observed state of a PodSet. It is v1alpha1's, field
// for field.
type PodSetStatus struct {
	// Replicas is the number of live pods (not terminating, not finished)
	// that the PodSet owns.
	// +optional
	Replicas int32 `json:"replicas"`

	// ReadyReplicas is how many of them are Ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// PodNames are the names of those pods, sorted.
	// +listType=set
	// +optional
	PodNames []string `json:"podNames,omitempty"`

	// Leader is the name of the pod labelled tend.dev/role=leader, when
	// spec.leader.election is Enabled and a pod is Ready to lead.
	// +optional
	Leader string `json:"leader,omitempty"`

	// Selector is the label selector of the PodSet's pods, in the string
	// form that the /scale subresource and HorizontalPodAutoscalers read.
	// +optional
	Selector string `json:"selector,omitempty"`

	// ObservedGeneration is the generation that the last successful pass
	// acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Available, Progressing and ReplicaFailure, and
	// LeaderServiceReady while leader election is on; their types and
	// reasons are the constants of apps.tend.dev/v1alpha1.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PodSet runs a number of copies of a pod template, like a ReplicaSet, and
// can keep one of them labelled as the leader.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=ps,categories=tend
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Leader",type=string,JSONPath=`.status.leader`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 56",message="a PodSet's name is at most 56 characters: its leader Service is named <name>-leader, and a Service's name is at most 63"
type PodSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PodSetSpec   `json:"spec"`
	Status PodSetStatus `json:"status,omitempty"`
}

// PodSetList is a list of PodSets.
//
// +kubebuilder:object:root=true
type PodSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodSet `json:"items"`
}
