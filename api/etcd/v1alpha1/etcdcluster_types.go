package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultVersion is the etcd version of a cluster whose spec names none. It
// equals ETCD_VERSION in hack/versions.env; a test keeps them together.
const DefaultVersion = "v3.6.16"

// EtcdClusterSpec is the desired state of an EtcdCluster.
//
// +kubebuilder:validation:XValidation:rule="int(self.version.split('.')[1]) >= int(oldSelf.version.split('.')[1])",message="spec.version must not go back to an older minor version: etcd cannot downgrade a data directory; restore a backup into a new cluster instead"
// +kubebuilder:validation:XValidation:rule="int(self.version.split('.')[1]) <= int(oldSelf.version.split('.')[1]) + 1",message="spec.version may move up one minor version at a time (for example v3.5.x to v3.6.y): upgrade to each minor version in turn"
// +kubebuilder:validation:XValidation:rule="!has(self.archive) || has(self.backup)",message="spec.archive needs spec.backup: the archive's base backups go to its destination"
// +kubebuilder:validation:XValidation:rule="has(self.bootstrap) == has(oldSelf.bootstrap)",message="spec.bootstrap is read only when the cluster is created: to restore an existing cluster, create an EtcdRestore; to start from a backup, create a new EtcdCluster"
// +kubebuilder:validation:XValidation:rule="!has(self.maintenance) || !has(self.maintenance.compaction) || !has(self.options) || !has(self.options.autoCompactionMode)",message="spec.maintenance.compaction and spec.options.autoCompactionMode both compact the history: set one (Tend's compaction needs no restart)"
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || !has(self.bootstrap.restore) || !has(self.storage) || !has(self.storage.ephemeral) || !self.storage.ephemeral",message="spec.bootstrap.restore needs persistent storage: ephemeral members would lose the restored data on their first restart"
type EtcdClusterSpec struct {
	// Replicas is the number of members, 1 to 9. Odd sizes tolerate the
	// most failures for their size; an even size is accepted and reported
	// by the Degraded condition (reason EvenMembers). Also the /scale
	// subresource's spec.replicas.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=9
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Version is the etcd version, for example v3.6.16. Upgrades move one
	// minor version at a time; a downgrade of the minor version is refused.
	// +kubebuilder:default="v3.6.16"
	// +kubebuilder:validation:Pattern=`^v3\.[0-9]+\.[0-9]+$`
	// +optional
	Version string `json:"version,omitempty"`

	// Image overrides the etcd image. By default it is
	// gcr.io/etcd-development/etcd:<version>. It must hold etcd and
	// etcdctl for that version.
	// +optional
	Image string `json:"image,omitempty"`

	// Storage is where each member keeps its data.
	// +kubebuilder:default={size: "1Gi", ephemeral: false}
	// +optional
	Storage Storage `json:"storage,omitempty"`

	// Resources are each member container's requests and limits.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// TLS secures client and peer traffic.
	// +kubebuilder:default={mode: Auto}
	// +optional
	TLS TLS `json:"tls,omitempty"`

	// Auth turns on etcd's authentication with a root user whose
	// credentials Tend generates into the Secret <name>-root.
	// +optional
	Auth Auth `json:"auth,omitempty"`

	// PodTemplate adds scheduling and metadata to the member pods.
	// +optional
	PodTemplate PodTemplate `json:"podTemplate,omitempty"`

	// Options are the etcd settings that Tend lets users tune.
	// +optional
	Options Options `json:"options,omitempty"`

	// MemberReplacement says when Tend replaces a member that stays
	// unhealthy.
	// +kubebuilder:default={policy: Auto, unhealthyFor: "5m"}
	// +optional
	MemberReplacement MemberReplacement `json:"memberReplacement,omitempty"`

	// QuorumLoss says what Tend does when fewer than a quorum of voting
	// members are healthy for good: by default it reports a recovery plan
	// and waits for a person to approve it.
	// +kubebuilder:default={policy: Manual, after: "5m"}
	// +optional
	QuorumLoss QuorumLoss `json:"quorumLoss,omitempty"`

	// UpdateStrategy says how a change of what the members run (version,
	// image, resources, options, pod template) reaches them: one member at
	// a time, each restarted only when the cluster can spare it.
	// +kubebuilder:default={memberTimeout: "5m"}
	// +optional
	UpdateStrategy UpdateStrategy `json:"updateStrategy,omitempty"`

	// Maintenance is the upkeep of the members' storage: compaction,
	// defragmentation, and recovery from NOSPACE. Each part has a default
	// that applies without it (see docs/etcdcluster.md).
	// +optional
	Maintenance Maintenance `json:"maintenance,omitempty"`

	// Paused stops Tend from changing the cluster: no scaling, no member
	// replacement, no restarts; a roll holds between members. Status is
	// still reported.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// DeletionPolicy is what deleting the EtcdCluster does to its data:
	// Snapshot (the default) takes a final backup first, then deletes the
	// members and their volumes; Delete deletes them at once; Retain keeps
	// the volumes.
	// +kubebuilder:default=Snapshot
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// Backup is where the cluster's own backups go: the final snapshot on
	// deletion, and backups taken without a destination of their own.
	// Without it, the final snapshot goes to a new PersistentVolumeClaim
	// <name>-final-snapshot, which stays after the cluster is gone.
	// +optional
	Backup *ClusterBackup `json:"backup,omitempty"`

	// Archive is the continuous archive: every revision after a base
	// backup, stored within seconds. Its base backups go to spec.backup's
	// destination, which it needs.
	// +optional
	Archive *ClusterArchive `json:"archive,omitempty"`

	// Bootstrap says how a new cluster's data starts: empty, or restored
	// from a backup. It is read only when the cluster is created.
	// +optional
	Bootstrap *Bootstrap `json:"bootstrap,omitempty"`
}

// DeletionPolicy is what deleting an EtcdCluster does to its data.
// +kubebuilder:validation:Enum=Snapshot;Delete;Retain
type DeletionPolicy string

const (
	// DeletionSnapshot: a final backup, then the members and volumes go.
	DeletionSnapshot DeletionPolicy = "Snapshot"
	// DeletionDelete: the members and volumes go, with no backup.
	DeletionDelete DeletionPolicy = "Delete"
	// DeletionRetain: the members go; the volumes stay.
	DeletionRetain DeletionPolicy = "Retain"
)

// ClusterBackup is where a cluster's own backups go.
//
// +kubebuilder:validation:XValidation:rule="!has(self.destination.s3) || !has(self.destination.s3.key)",message="spec.backup.destination.s3.key would name every backup of the cluster (final snapshots, pre-upgrade and plugin backups) alike, and each later one would be refused: use prefix, and each object is named after its backup"
type ClusterBackup struct {
	// Destination of the final snapshot, and of backups taken without one.
	Destination BackupDestination `json:"destination"`
	// Compression of those backups.
	// +kubebuilder:default=None
	// +optional
	Compression Compression `json:"compression,omitempty"`
}

// Bootstrap says how a new cluster's data starts.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.bootstrap is used only when the cluster is created and cannot change: to restore an existing cluster, create an EtcdRestore"
type Bootstrap struct {
	// Restore starts every member from a backup.
	// +optional
	Restore *BootstrapRestore `json:"restore,omitempty"`
}

// BootstrapRestore names the backup a new cluster starts from: an
// EtcdBackup in the same namespace, or a file; and, to go on past the
// backup, another cluster's continuous archive and the point to stop at.
//
// +kubebuilder:validation:XValidation:rule="has(self.backupRef) != has(self.source)",message="set exactly one of backupRef and source"
// +kubebuilder:validation:XValidation:rule="!has(self.target) || has(self.archive)",message="a target is a point in an archive: set archive too"
type BootstrapRestore struct {
	// BackupRef names a Complete EtcdBackup in the same namespace.
	// +optional
	BackupRef *corev1.LocalObjectReference `json:"backupRef,omitempty"`
	// Source is a backup's file, for one whose EtcdBackup is gone (such as
	// the final snapshot of a deleted cluster in another namespace).
	// +optional
	Source *RestoreSource `json:"source,omitempty"`
	// Archive is the continuous archive (spec.archive) of the cluster the
	// backup was taken from: after restoring the backup, each member
	// replays the archive's revisions after it, up to target. The backup
	// must be one of that archive's bases (status.archive.baseBackup of
	// the source cluster, or an older one).
	// +optional
	Archive *ArchiveSource `json:"archive,omitempty"`
	// Target is how far to replay the archive: a revision, a time, or,
	// when empty or unset, every revision the archive holds.
	// +optional
	Target *RestoreTarget `json:"target,omitempty"`
}

// ArchiveSource is an archive's folder, as the source cluster's
// status.archive.location names it.
//
// +kubebuilder:validation:XValidation:rule="has(self.s3) != has(self.volume)",message="set exactly one of s3 and volume"
// +kubebuilder:validation:XValidation:rule="!has(self.s3) || has(self.s3.key)",message="archive.s3.key is the archive's folder (<prefix><namespace>/<name>/archive-<uid>), and is required"
// +kubebuilder:validation:XValidation:rule="!has(self.volume) || has(self.volume.path)",message="archive.volume.path is the archive's folder on the claim, and is required"
type ArchiveSource struct {
	// S3 is the bucket; key is the archive's folder.
	// +optional
	S3 *S3Location `json:"s3,omitempty"`
	// Volume is the claim; path is the archive's folder on it.
	// +optional
	Volume *VolumeLocation `json:"volume,omitempty"`
}

// RestoreTarget is a point in a cluster's history: a revision, or the
// last revision the archive received at or before a time. Neither is the
// newest revision the archive holds.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.revision) && has(self.time))",message="set revision or time, not both"
type RestoreTarget struct {
	// Revision is the store revision the restored data holds: every
	// change up to it, none after.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// Time restores every revision the archive received at or before it
	// (RFC 3339, such as 2026-11-28T14:03:00Z).
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// RestoreSource is a backup's file.
//
// +kubebuilder:validation:XValidation:rule="has(self.s3) != has(self.volume)",message="set exactly one of s3 and volume"
// +kubebuilder:validation:XValidation:rule="!has(self.s3) || has(self.s3.key)",message="source.s3.key names the backup's object, and is required"
// +kubebuilder:validation:XValidation:rule="!has(self.volume) || has(self.volume.path)",message="source.volume.path names the backup's file, and is required"
type RestoreSource struct {
	// S3 is the object; key is required.
	// +optional
	S3 *S3Location `json:"s3,omitempty"`
	// Volume is the file; path is required.
	// +optional
	Volume *VolumeLocation `json:"volume,omitempty"`
	// Compression of the file: None (the default), Gzip or Zstd.
	// +kubebuilder:default=None
	// +optional
	Compression Compression `json:"compression,omitempty"`
	// SHA256, when set, is checked against the file before it is used.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +optional
	SHA256 string `json:"sha256,omitempty"`
}

// UpdateStrategy says how Tend rolls a change of what the members run.
type UpdateStrategy struct {
	// MemberTimeout is how long a restarted member may take to become
	// healthy and catch up with the leader. A member that takes longer
	// stops the roll (Degraded, reason UpdateStalled): no other member is
	// touched until the spec is corrected.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s')",message="spec.updateStrategy.memberTimeout must be at least 30s: a member needs that long to restart"
	// +optional
	MemberTimeout *metav1.Duration `json:"memberTimeout,omitempty"`
}

// MemberReplacementPolicy says whether Tend replaces unhealthy members.
// +kubebuilder:validation:Enum=Auto;Manual
type MemberReplacementPolicy string

const (
	// ReplacementAuto: Tend removes a member that stays unhealthy and adds a
	// new one with empty data in its place, when the others keep a quorum.
	ReplacementAuto MemberReplacementPolicy = "Auto"
	// ReplacementManual: Tend reports unhealthy members and leaves them.
	ReplacementManual MemberReplacementPolicy = "Manual"
)

// MemberReplacement says when Tend replaces a member that stays unhealthy.
type MemberReplacement struct {
	// Policy is Auto (the default) or Manual.
	// +kubebuilder:default=Auto
	// +optional
	Policy MemberReplacementPolicy `json:"policy,omitempty"`
	// UnhealthyFor is how long a member must stay unhealthy before Tend
	// replaces it. Long enough to ride out a node restart; the default is
	// five minutes.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s')",message="spec.memberReplacement.unhealthyFor must be at least 10s: a member needs that long to restart"
	// +optional
	UnhealthyFor *metav1.Duration `json:"unhealthyFor,omitempty"`
}

// QuorumLossPolicy says whether Tend recovers a cluster that lost its
// quorum by itself.
// +kubebuilder:validation:Enum=Manual;Auto
type QuorumLossPolicy string

const (
	// QuorumLossManual: Tend reports the plan (the most advanced surviving
	// member, the latest verified backup) and recovers once a person
	// approves it with the annotation etcd.tend.dev/recover-from.
	QuorumLossManual QuorumLossPolicy = "Manual"
	// QuorumLossAuto: Tend recovers by itself, from the most advanced
	// surviving member, else from the latest verified backup.
	QuorumLossAuto QuorumLossPolicy = "Auto"
)

// QuorumLoss says when and how Tend rebuilds a cluster that lost its
// quorum. Tend acts only when the members it gives up cannot vote any more
// (their pods are gone or not running, or their data is lost), never on
// members that merely do not answer.
type QuorumLoss struct {
	// Policy is Manual (the default) or Auto.
	// +kubebuilder:default=Manual
	// +optional
	Policy QuorumLossPolicy `json:"policy,omitempty"`
	// After is how long the quorum must stay lost before Tend recovers (Auto)
	// or accepts an approval (Manual).
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s')",message="spec.quorumLoss.after must be at least 10s: members need that long to restart"
	// +optional
	After *metav1.Duration `json:"after,omitempty"`
}

// Storage is where a member keeps its data.
//
// +kubebuilder:validation:XValidation:rule="!has(self.size) || !has(oldSelf.size) || quantity(string(self.size)).compareTo(quantity(string(oldSelf.size))) >= 0",message="spec.storage.size cannot shrink: a volume cannot be made smaller; create a new cluster from a backup instead"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.storageClassName) || has(self.storageClassName)",message="spec.storage.storageClassName cannot be unset once set: name the class the members should move to"
// +kubebuilder:validation:XValidation:rule="!(has(self.ephemeral) && self.ephemeral) || has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",message="spec.storage.storageClassName is immutable for ephemeral members: they have no volume claims"
// +kubebuilder:validation:XValidation:rule="(has(self.ephemeral) && self.ephemeral) == (has(oldSelf.ephemeral) && oldSelf.ephemeral)",message="spec.storage.ephemeral is immutable: create a new cluster instead"
type Storage struct {
	// Size of each member's volume. It may grow, not shrink: claims whose
	// StorageClass allows expansion grow in place; the others' members
	// move onto new claims of this size, as for a class change.
	// +kubebuilder:default="1Gi"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// StorageClassName of the volumes; empty uses the cluster's default
	// StorageClass. A change moves the members, one at a time, onto new
	// claims of the new class (status.maintenance.volumeMigration), after
	// a verified backup; once set, it cannot be unset.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// Ephemeral keeps data in an emptyDir instead of a PersistentVolume: a
	// member whose pod is deleted loses its data, and Tend replaces it with
	// a new member. For tests and caches only.
	// +kubebuilder:default=false
	// +optional
	Ephemeral bool `json:"ephemeral"`
}

// TLSMode says who issues the cluster's certificates.
// +kubebuilder:validation:Enum=Auto;Provided
type TLSMode string

const (
	// TLSAuto: Tend runs a CA and issues and rotates peer, server and client
	// certificates.
	TLSAuto TLSMode = "Auto"
	// TLSProvided: the user's Secrets hold the certificates.
	TLSProvided TLSMode = "Provided"
)

// TLS secures client and peer traffic.
//
// +kubebuilder:validation:XValidation:rule="self.mode == oldSelf.mode",message="spec.tls.mode is immutable: members would lose trust in each other mid-change"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Provided' || has(self.secrets)",message="spec.tls.secrets is required when spec.tls.mode is Provided"
type TLS struct {
	// Mode is Auto (the default) or Provided.
	// +kubebuilder:default=Auto
	// +optional
	Mode TLSMode `json:"mode,omitempty"`

	// Secrets name the user's certificates when Mode is Provided. Each is a
	// kubernetes.io/tls Secret with ca.crt.
	// +optional
	Secrets *TLSSecrets `json:"secrets,omitempty"`
}

// TLSSecrets name the Secrets of a Provided TLS setup.
type TLSSecrets struct {
	// Server is the members' serving certificate for clients; its SANs must
	// cover the client Service and the members' peer DNS names.
	Server string `json:"server"`
	// Peer is the members' certificate for each other.
	Peer string `json:"peer"`
	// Client is a client certificate that Tend uses to manage the cluster.
	Client string `json:"client"`
}

// Auth configures etcd's authentication.
//
// +kubebuilder:validation:XValidation:rule="(has(self.enabled) && self.enabled) == (has(oldSelf.enabled) && oldSelf.enabled)",message="spec.auth.enabled is immutable in v1alpha1: Tend sets up authentication when the cluster is created"
type Auth struct {
	// Enabled turns on authentication; Tend creates the root user.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled"`
}

// PodTemplate adds scheduling and metadata to the member pods.
type PodTemplate struct {
	// Labels added to the member pods.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations added to the member pods.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// Affinity replaces the default, which prefers members on different
	// nodes.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// Tolerations of the member pods.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// NodeSelector of the member pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// PriorityClassName of the member pods.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// AutoCompactionMode is etcd's --auto-compaction-mode.
// +kubebuilder:validation:Enum=periodic;revision
type AutoCompactionMode string

// Options are the etcd settings that Tend lets users tune; each maps to the
// etcd flag of the same name.
//
// +kubebuilder:validation:XValidation:rule="(has(self.electionTimeoutMillis) ? self.electionTimeoutMillis : 1000) >= 5 * (has(self.heartbeatIntervalMillis) ? self.heartbeatIntervalMillis : 100)",message="spec.options.electionTimeoutMillis (default 1000) should be at least 5 times heartbeatIntervalMillis (default 100), as etcd's tuning guide says"
type Options struct {
	// QuotaBackendBytes is the database size at which etcd raises a NOSPACE
	// alarm (--quota-backend-bytes). By default it is etcd's 2Gi, or three
	// quarters of spec.storage.size when that is smaller.
	// +optional
	QuotaBackendBytes *resource.Quantity `json:"quotaBackendBytes,omitempty"`
	// AutoCompactionMode is periodic or revision.
	// +optional
	AutoCompactionMode AutoCompactionMode `json:"autoCompactionMode,omitempty"`
	// AutoCompactionRetention is a duration for periodic (for example "1h")
	// or a revision count for revision mode.
	// +kubebuilder:validation:Pattern=`^([0-9]+|[0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +optional
	AutoCompactionRetention string `json:"autoCompactionRetention,omitempty"`
	// HeartbeatIntervalMillis is --heartbeat-interval.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=5000
	// +optional
	HeartbeatIntervalMillis *int32 `json:"heartbeatIntervalMillis,omitempty"`
	// ElectionTimeoutMillis is --election-timeout.
	// +kubebuilder:validation:Minimum=50
	// +kubebuilder:validation:Maximum=50000
	// +optional
	ElectionTimeoutMillis *int32 `json:"electionTimeoutMillis,omitempty"`
	// SnapshotCount is --snapshot-count.
	// +kubebuilder:validation:Minimum=1
	// +optional
	SnapshotCount *int64 `json:"snapshotCount,omitempty"`
}

// Member is one etcd member as Tend last saw it.
type Member struct {
	// Name is the member's name, the name of its pod.
	Name string `json:"name"`
	// ID is the member ID in hexadecimal, as etcdctl prints it.
	// +optional
	ID string `json:"id,omitempty"`
	// Leader is true for the raft leader.
	// +optional
	Leader bool `json:"leader,omitempty"`
	// Learner is true for a member that does not vote yet.
	// +optional
	Learner bool `json:"learner,omitempty"`
	// Healthy is true when the member answered Tend's last check.
	Healthy bool `json:"healthy"`
	// UnhealthySince is when Tend first saw the member unhealthy, in its
	// current spell; empty while it is healthy.
	// +optional
	UnhealthySince *metav1.Time `json:"unhealthySince,omitempty"`
	// Version is the etcd version the member runs.
	// +optional
	Version string `json:"version,omitempty"`
	// DBSize is the size of the member's database file.
	// +optional
	DBSize *resource.Quantity `json:"dbSize,omitempty"`
	// VolumeUID is the UID of the PersistentVolumeClaim (with ephemeral
	// storage, the pod) that held the member's data when Tend first saw it
	// healthy. A member found on another one has lost its data, and Tend
	// replaces it at once.
	// +optional
	VolumeUID types.UID `json:"volumeUID,omitempty"`
}

// EtcdClusterStatus is the observed state of an EtcdCluster.
type EtcdClusterStatus struct {
	// Phase summarises the conditions for display; nothing acts on it.
	// +optional
	Phase string `json:"phase,omitempty"`
	// Replicas is the number of members, for the /scale subresource.
	// +optional
	Replicas int32 `json:"replicas"`
	// ReadyMembers is the number of healthy voting members.
	// +optional
	ReadyMembers int32 `json:"readyMembers"`
	// Members as Tend last saw them, sorted by name.
	// +listType=map
	// +listMapKey=name
	// +optional
	Members []Member `json:"members,omitempty"`
	// Leader is the name of the leader member.
	// +optional
	Leader string `json:"leader,omitempty"`
	// CurrentVersion is the lowest version any member runs.
	// +optional
	CurrentVersion string `json:"currentVersion,omitempty"`
	// ClientEndpoint is the URL that clients use: the client Service.
	// +optional
	ClientEndpoint string `json:"clientEndpoint,omitempty"`
	// Selector selects the member pods, for the /scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`
	// ObservedGeneration is the generation that the last successful pass
	// acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// RestoredFrom is the backup the cluster's data started from.
	// +optional
	RestoredFrom *RestoredFrom `json:"restoredFrom,omitempty"`
	// FinalSnapshot is the backup taken when the cluster was deleted.
	// +optional
	FinalSnapshot string `json:"finalSnapshot,omitempty"`
	// Update is the roll in progress: set when the first member is about
	// to restart for a change of what the members run, cleared once every
	// member runs it and the check Job confirmed the cluster.
	// +optional
	Update *UpdateStatus `json:"update,omitempty"`
	// Recovery is the in-place restore (an EtcdRestore) or the quorum-loss
	// recovery in progress, else the last one: while it runs, Tend makes
	// no other change to the members.
	// +optional
	Recovery *RecoveryStatus `json:"recovery,omitempty"`
	// Maintenance is the storage upkeep: the last compaction, the
	// defragmentation round under way or the last one, a NOSPACE recovery.
	// +optional
	Maintenance *MaintenanceStatus `json:"maintenance,omitempty"`
	// Archive is the continuous archive's window, as its agent reports it.
	// +optional
	Archive *ArchiveStatus `json:"archive,omitempty"`
	// Certificates are when the certificates in the cluster's TLS Secrets
	// expire: the CA (Auto mode), server, peer and client. Tend renews its
	// own at two thirds of their life; Provided ones are the user's to renew.
	// +listType=map
	// +listMapKey=secret
	// +optional
	Certificates []CertificateStatus `json:"certificates,omitempty"`
	// UpdatedGeneration is the generation whose spec every member ran when
	// the last roll ended. A roll that starts while it equals the
	// generation was caused by a new Tend, not by the spec, and waits for
	// its turn among the clusters that Tend rolls.
	// +optional
	UpdatedGeneration int64 `json:"updatedGeneration,omitempty"`
	// Conditions are Available, Progressing and Degraded, and Restored for
	// a cluster made from a backup.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CertificateStatus is when the certificate in one TLS Secret expires.
type CertificateStatus struct {
	// Secret is the Secret's name, in the cluster's namespace.
	Secret string `json:"secret"`
	// NotAfter is the end of the certificate's validity (tls.crt's first).
	NotAfter metav1.Time `json:"notAfter"`
}

// UpdateStatus is a roll in progress.
type UpdateStatus struct {
	// From and To are the etcd versions before and after; equal when the
	// roll changes something else.
	From string `json:"from"`
	To   string `json:"to"`
	// Revision identifies what the members are rolled to: the hash of the
	// member pod template that the pods carry in the annotation
	// etcd.tend.dev/member-revision.
	Revision string `json:"revision"`
	// Cause is Spec when the EtcdCluster's spec changed, Operator when a
	// new Tend builds the members differently.
	Cause UpdateCause `json:"cause"`
	// StartedAt is when the first member was restarted, or the pre-upgrade
	// backup was asked for.
	StartedAt metav1.Time `json:"startedAt"`
	// Backup is the EtcdBackup taken before a minor-version upgrade.
	// +optional
	Backup string `json:"backup,omitempty"`
	// Member is the member being restarted, and MemberSince when Tend
	// restarted it; spec.updateStrategy.memberTimeout runs from then.
	// +optional
	Member string `json:"member,omitempty"`
	// +optional
	MemberSince *metav1.Time `json:"memberSince,omitempty"`
	// UpdatedMembers run the new revision and are healthy; PendingMembers
	// do not run it yet.
	// +optional
	UpdatedMembers []string `json:"updatedMembers,omitempty"`
	// +optional
	PendingMembers []string `json:"pendingMembers,omitempty"`
	// LeaderMoves counts the leadership moves this roll made: one, to an
	// updated member before the last member (the leader) restarts.
	// +optional
	LeaderMoves int32 `json:"leaderMoves,omitempty"`
	// CheckJob is the Job that checks the cluster after the last member.
	// +optional
	CheckJob string `json:"checkJob,omitempty"`
}

// RecoveryKind says what replaces a cluster's data.
// +kubebuilder:validation:Enum=Restore;Survivor
type RecoveryKind string

const (
	// RecoveryFromBackup: an EtcdRestore restores every member from a
	// backup (asked for by a person, or by a quorum-loss recovery).
	RecoveryFromBackup RecoveryKind = "Restore"
	// RecoveryFromSurvivor: a quorum-loss recovery keeps the most advanced
	// surviving member's data (etcd's --force-new-cluster) and adds the
	// other members anew.
	RecoveryFromSurvivor RecoveryKind = "Survivor"
)

// RecoveryStatus is an in-place restore or a quorum-loss recovery.
type RecoveryStatus struct {
	// Kind is Restore or Survivor.
	Kind RecoveryKind `json:"kind"`
	// Restore is the EtcdRestore of a Restore.
	// +optional
	Restore string `json:"restore,omitempty"`
	// Survivor is the member whose data a Survivor recovery keeps.
	// +optional
	Survivor string `json:"survivor,omitempty"`
	// Cause says why: the EtcdRestore's creation, or the quorum loss and
	// who approved the recovery.
	Cause string `json:"cause"`
	// Phase is StoppingMembers, RestoringData, StartingMembers, Checking,
	// Complete or Failed.
	Phase string `json:"phase"`
	// Job is the Job of the current step.
	// +optional
	Job string `json:"job,omitempty"`
	// Revision is the store revision the recovered data holds: the
	// survivor's, or the backup's (before the bump).
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// StartedAt is when Tend began stopping the members, CompletedAt when
	// it ended.
	StartedAt metav1.Time `json:"startedAt"`
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Message says what happened last, or why it failed.
	// +optional
	Message string `json:"message,omitempty"`
}

// UpdateCause says why a roll happens.
// +kubebuilder:validation:Enum=Spec;Operator
type UpdateCause string

const (
	// UpdateCauseSpec: the EtcdCluster's spec changed.
	UpdateCauseSpec UpdateCause = "Spec"
	// UpdateCauseOperator: a new Tend builds the member pods differently.
	UpdateCauseOperator UpdateCause = "Operator"
)

// RestoredFrom is the backup a cluster's data started from.
type RestoredFrom struct {
	// Backup is the EtcdBackup, when the restore named one.
	// +optional
	Backup string `json:"backup,omitempty"`
	// URI of the file.
	URI string `json:"uri"`
	// Revision the snapshot held; the restored store's revisions start
	// above it.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// Time the members' data was restored.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// Archive is what a restore to a point replayed after the backup.
	// +optional
	Archive *ArchiveReplayed `json:"archive,omitempty"`
}

// ArchiveReplayed is the part of a continuous archive that a restore
// replayed onto its backup.
type ArchiveReplayed struct {
	// Location is the archive's folder.
	Location string `json:"location"`
	// Target is the point asked for: a revision, a time, or "latest".
	Target string `json:"target"`
	// Revision is the revision the replay reached, the restored data's
	// (before the bump), and Time when the archive received it.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// Revisions and Segments count the revisions replayed and the
	// segments read.
	// +optional
	Revisions int64 `json:"revisions,omitempty"`
	// +optional
	Segments int32 `json:"segments,omitempty"`
}

// EtcdCluster is an etcd cluster that Tend runs as a StatefulSet, with TLS,
// scaling through learners, and member replacement.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=etcd,categories=tend
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Members",type=integer,JSONPath=`.status.readyMembers`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.currentVersion`
// +kubebuilder:printcolumn:name="Leader",type=string,JSONPath=`.status.leader`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,priority=1
// +kubebuilder:printcolumn:name="Archived",type=date,JSONPath=`.status.archive.lastTime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="an EtcdCluster's name is at most 52 characters: its StatefulSet has its name, and the StatefulSet's pods carry <name>-<revision hash> in a label of at most 63"
type EtcdCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EtcdClusterSpec   `json:"spec"`
	Status EtcdClusterStatus `json:"status,omitempty"`
}

// EtcdClusterList is a list of EtcdClusters.
//
// +kubebuilder:object:root=true
type EtcdClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdCluster `json:"items"`
}
