package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdRestoreSpec names the cluster whose data is replaced, and the backup
// that replaces it.
//
// +kubebuilder:validation:XValidation:rule="has(self.backupRef) != has(self.source) || (has(self.target) && !has(self.backupRef))",message="set exactly one of backupRef and source, or a target alone to restore from the cluster's archive"
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="an EtcdRestore is one restore and cannot change: create another"
type EtcdRestoreSpec struct {
	// ClusterRef is the EtcdCluster, in the same namespace, restored in
	// place: it keeps its name, Services, certificates, Secrets and
	// connection ConfigMap; every member's data is replaced.
	ClusterRef ClusterReference `json:"clusterRef"`
	// BackupRef names a Complete EtcdBackup in the same namespace.
	// +optional
	BackupRef *corev1.LocalObjectReference `json:"backupRef,omitempty"`
	// Source is a backup's file, for one whose EtcdBackup is gone.
	// +optional
	Source *RestoreSource `json:"source,omitempty"`
	// Target restores to a point in the cluster's continuous archive
	// (spec.archive): a revision, a time, or, when empty, the newest
	// revision the archive holds. Without backupRef or source, Tend picks
	// the newest of the archive's base backups at or before the target.
	// Each member restores the base and replays the archive onto it, every
	// revision keeping its number; the revisions then continue above the
	// target, bumped, as after any restore.
	// +optional
	Target *RestoreTarget `json:"target,omitempty"`
	// ConfirmOverwrite must be true to restore a cluster that is Available:
	// its data, every write since the backup included, is replaced. A
	// restore of an Available cluster without it fails at once and
	// touches nothing.
	// +optional
	ConfirmOverwrite bool `json:"confirmOverwrite,omitempty"`
}

// EtcdRestoreStatus is how far the restore got.
type EtcdRestoreStatus struct {
	// Phase is for display only: Pending, StoppingMembers, RestoringData,
	// StartingMembers, Checking, Complete or Failed.
	// +optional
	Phase string `json:"phase,omitempty"`
	// StartTime is when Tend began stopping the members; CompletionTime
	// when the restore completed or failed.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// RestoredFrom is the file restored and the revision it held; the
	// cluster's revisions continue above it (bumped).
	// +optional
	RestoredFrom *RestoredFrom `json:"restoredFrom,omitempty"`
	// MembersStopped is set once Tend stopped the cluster's members for
	// this restore: from then on the cluster stays stopped until the
	// restore completes, or, if it fails, until another restore completes.
	// +optional
	MembersStopped bool `json:"membersStopped,omitempty"`
	// ObservedGeneration is the generation the last pass acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are Complete and Failed; their reasons and messages say
	// what happened and what to do.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EtcdRestore replaces the data of an existing EtcdCluster with a backup,
// in place: Tend stops every member, restores the backup into each
// member's volume with a new cluster ID and the revision bumped, starts
// them and checks the cluster. The EtcdCluster's controller carries it out.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdrestore,categories=tend
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Backup",type=string,JSONPath=`.spec.backupRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.restoredFrom.revision`
// +kubebuilder:printcolumn:name="Replayed To",type=integer,JSONPath=`.status.restoredFrom.archive.revision`
// +kubebuilder:printcolumn:name="URI",type=string,JSONPath=`.status.restoredFrom.uri`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="an EtcdRestore's name is at most 52 characters: its Jobs are named <name>-<member ordinal> and <name>-check, and a Job's name is at most 63"
type EtcdRestore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EtcdRestoreSpec   `json:"spec"`
	Status EtcdRestoreStatus `json:"status,omitempty"`
}

// EtcdRestoreList is a list of EtcdRestores.
//
// +kubebuilder:object:root=true
type EtcdRestoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdRestore `json:"items"`
}

// Condition types of an EtcdRestore.
const (
	// RestoreComplete is True once every member runs the restored data and
	// the check Job confirmed the cluster.
	RestoreComplete = "Complete"
	// RestoreFailed is True when the restore will not complete; its message
	// says what to do.
	RestoreFailed = "Failed"
)

// Reasons of an EtcdRestore's conditions, beside the cluster's
// ReasonRestoring and ReasonRestoreFailed.
const (
	// ReasonRestorePending: the restore waits (for its cluster, its
	// backup, or another restore of the same cluster).
	ReasonRestorePending = "Pending"
	// ReasonClusterAvailable: the cluster is Available and the restore does
	// not confirm the overwrite; nothing was touched.
	ReasonClusterAvailable = "ClusterAvailable"
	// ReasonRestoreSucceeded: the members run the restored data.
	ReasonRestoreSucceeded = "Restored"
)

// Phases of an EtcdRestore, and of an EtcdCluster's status.recovery.
const (
	RecoveryPending  = "Pending"
	RecoveryStopping = "StoppingMembers"
	// RecoveryRestoring: the restore Jobs fill the members' volumes (or,
	// in a quorum-loss recovery from a survivor, the survivor's data is
	// made a one-member cluster).
	RecoveryRestoring = "RestoringData"
	RecoveryStarting  = "StartingMembers"
	RecoveryChecking  = "Checking"
	RecoveryComplete  = "Complete"
	RecoveryFailed    = "Failed"
)
