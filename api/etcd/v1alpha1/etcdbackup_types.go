package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterReference names an EtcdCluster in the same namespace.
type ClusterReference struct {
	// Name of the EtcdCluster.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// BackupDestination is where a backup's file goes: exactly one of S3 and
// Volume.
//
// +kubebuilder:validation:XValidation:rule="has(self.s3) != has(self.volume)",message="set exactly one of s3 and volume: a backup goes to one place"
type BackupDestination struct {
	// S3 is a bucket of Amazon S3 or of any S3-compatible store.
	// +optional
	S3 *S3Location `json:"s3,omitempty"`
	// Volume is a PersistentVolumeClaim in the backup's namespace.
	// +optional
	Volume *VolumeLocation `json:"volume,omitempty"`
}

// S3Location is an object, or a place for objects, in an S3 bucket.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.key) && has(self.prefix))",message="set key or prefix, not both: key names the object, prefix the folder for objects named after each backup"
type S3Location struct {
	// Bucket holds the objects.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	Bucket string `json:"bucket"`
	// Key is the object's whole key. In a destination it fits one-shot
	// backups only; without it the key is
	// <prefix><namespace>/<backup name>.db, plus .gz or .zst when
	// compressed. In a restore source it is required.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Key string `json:"key,omitempty"`
	// Prefix goes before the generated key, for example "etcd/".
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// Region of the bucket; empty takes the SDK's default chain
	// (AWS_REGION).
	// +optional
	Region string `json:"region,omitempty"`
	// Endpoint overrides the S3 endpoint, for S3-compatible stores, for
	// example http://minio.storage.svc:9000.
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// ForcePathStyle addresses the bucket in the path rather than the host
	// name, as most S3-compatible stores want.
	// +optional
	ForcePathStyle bool `json:"forcePathStyle,omitempty"`
	// CredentialsSecretRef names a Secret in the same namespace with the keys
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for
	// temporary credentials). Without it the agent uses the SDK's default
	// chain, such as a pod identity.
	// +optional
	CredentialsSecretRef *corev1.LocalObjectReference `json:"credentialsSecretRef,omitempty"`
}

// VolumeLocation is a file, or a folder for files, on a
// PersistentVolumeClaim.
type VolumeLocation struct {
	// ClaimName is the PersistentVolumeClaim, in the same namespace.
	// +kubebuilder:validation:MinLength=1
	ClaimName string `json:"claimName"`
	// Path in a destination is the folder, inside the volume, of the
	// backups' files, each named <backup name>.db plus .gz or .zst; in a
	// restore source it is the file itself. Relative to the volume's root.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(p, p == '..')",message="path must stay inside the volume: no .. parts"
	// +optional
	Path string `json:"path,omitempty"`
}

// Compression of a backup's file.
// +kubebuilder:validation:Enum=None;Gzip;Zstd
type Compression string

const (
	CompressionNone Compression = "None"
	CompressionGzip Compression = "Gzip"
	CompressionZstd Compression = "Zstd"
)

// ArtifactPolicy says what deleting an EtcdBackup does to its file.
// +kubebuilder:validation:Enum=Delete;Retain
type ArtifactPolicy string

const (
	// ArtifactDelete: deleting the EtcdBackup deletes the file it wrote
	// (never a file it did not write).
	ArtifactDelete ArtifactPolicy = "Delete"
	// ArtifactRetain: the file stays when the EtcdBackup is deleted.
	ArtifactRetain ArtifactPolicy = "Retain"
)

// BackupOptions are an EtcdBackup's settings other than its cluster; an
// EtcdBackupSchedule's template holds the same.
type BackupOptions struct {
	// Destination is where the file goes.
	Destination BackupDestination `json:"destination"`
	// Compression of the file: None (the default), Gzip or Zstd.
	// +kubebuilder:default=None
	// +optional
	Compression Compression `json:"compression,omitempty"`
	// Verify restores the file into a throwaway etcd, which must start and
	// hold the same keys and the same hash of all key-values as the live
	// cluster at the snapshot's revision. On by default.
	// +kubebuilder:default=true
	// +optional
	Verify *bool `json:"verify,omitempty"`
	// ArtifactPolicy is what deleting the EtcdBackup does to its file:
	// Delete (the default) or Retain.
	// +kubebuilder:default=Delete
	// +optional
	ArtifactPolicy ArtifactPolicy `json:"artifactPolicy,omitempty"`
}

// EtcdBackupSpec is one backup of an EtcdCluster. It cannot change once
// created.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="an EtcdBackup's spec cannot change once created: create another EtcdBackup"
type EtcdBackupSpec struct {
	// ClusterRef is the EtcdCluster to back up, in the same namespace.
	ClusterRef ClusterReference `json:"clusterRef"`

	BackupOptions `json:",inline"`
}

// Artifact is the file a backup wrote.
type Artifact struct {
	// URI is where the file is: s3://<bucket>/<key> or
	// pvc://<claim>/<path>.
	URI string `json:"uri"`
	// SizeBytes is the file's size, after compression.
	SizeBytes int64 `json:"sizeBytes"`
	// SHA256 is the hex SHA-256 of the file as stored; it was checked by
	// reading the file back.
	SHA256 string `json:"sha256"`
	// Compression of the file.
	Compression Compression `json:"compression"`
}

// SnapshotInfo says what the backup holds.
type SnapshotInfo struct {
	// Member is the member the snapshot was taken from: the healthy one
	// with the highest revision.
	Member string `json:"member"`
	// Revision is the store's revision in the snapshot. With verification
	// it is read from the snapshot itself; without, it is the member's
	// revision when the snapshot began.
	Revision int64 `json:"revision"`
	// EtcdVersion is the member's etcd version.
	// +optional
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// DBSizeBytes is the size of the uncompressed snapshot.
	DBSizeBytes int64 `json:"dbSizeBytes"`
	// HashKV is the live cluster's hash of all key-values at Revision, as
	// etcd's HashKV reports it, when the backup was verified.
	// +optional
	HashKV *int64 `json:"hashKV,omitempty"`
}

// Verification is the result of restoring a backup into a throwaway etcd.
type Verification struct {
	// Time the verification finished.
	Time metav1.Time `json:"time"`
	// Keys is the number of keys in the restored store.
	Keys int64 `json:"keys"`
	// Revision of the restored store.
	Revision int64 `json:"revision"`
	// HashMatches is true when the restored store's hash of all key-values
	// equals the live cluster's at the same revision, and the key counts
	// agree.
	HashMatches bool `json:"hashMatches"`
	// DurationSeconds is how long fetching, restoring, starting and
	// checking took.
	DurationSeconds int64 `json:"durationSeconds"`
}

// EtcdBackupStatus is what became of a backup.
type EtcdBackupStatus struct {
	// Phase is for display only: Pending, Running, Verifying, Complete,
	// Verified or Failed.
	// +optional
	Phase string `json:"phase,omitempty"`
	// JobName is the Job that runs the backup.
	// +optional
	JobName string `json:"jobName,omitempty"`
	// StartTime is when the backup's Job was created.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the file was written and read back.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Artifact is the file the backup wrote.
	// +optional
	Artifact *Artifact `json:"artifact,omitempty"`
	// Snapshot describes the data in the file.
	// +optional
	Snapshot *SnapshotInfo `json:"snapshot,omitempty"`
	// Verification is the result of the test restore.
	// +optional
	Verification *Verification `json:"verification,omitempty"`
	// ObservedGeneration is the generation the last successful pass acted
	// on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are Complete, Verified (when spec.verify is on) and
	// Failed, and Deleting while a deleted backup's file is deleted.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EtcdBackup is one snapshot of an EtcdCluster, written to S3 or a volume by
// a Job, read back, and (by default) verified by a test restore.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdbackup,categories=tend
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.artifact.sizeBytes`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.snapshot.revision`
// +kubebuilder:printcolumn:name="Verified",type=string,JSONPath=`.status.conditions[?(@.type=="Verified")].status`
// +kubebuilder:printcolumn:name="URI",type=string,JSONPath=`.status.artifact.uri`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 56",message="an EtcdBackup's name is at most 56 characters: its Jobs are named <name>-backup and <name>-delete, and a Job's name is at most 63"
type EtcdBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EtcdBackupSpec   `json:"spec"`
	Status EtcdBackupStatus `json:"status,omitempty"`
}

// EtcdBackupList is a list of EtcdBackups.
//
// +kubebuilder:object:root=true
type EtcdBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdBackup `json:"items"`
}
