package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterArchive is the continuous archive of a cluster: every revision
// after a base backup, stored within seconds of its write by one
// `tend archive` pod, so that a loss costs seconds of writes, not the time
// since the last backup.
//
// +kubebuilder:validation:XValidation:rule="has(self.destination.s3) != has(self.destination.volume)",message="spec.archive.destination takes exactly one of s3 and volume"
// +kubebuilder:validation:XValidation:rule="!has(self.destination.s3) || !has(self.destination.s3.key)",message="spec.archive.destination.s3 takes a prefix, not a key: the archive is a folder of objects"
type ClusterArchive struct {
	// Destination is where the segments go: under
	// <prefix><namespace>/<name>/archive-<uid> in a bucket, or
	// <path>/<namespace>/<name>/archive-<uid> on a volume claim. The
	// cluster's UID keeps apart the archives of clusters that had the same
	// name one after the other.
	Destination BackupDestination `json:"destination"`
	// Compression of the segments.
	// +kubebuilder:default=Zstd
	// +optional
	Compression Compression `json:"compression,omitempty"`
	// Segment bounds each segment: it is stored once its oldest revision is
	// maxAge old, or once it holds maxBytes of changes. maxAge is the most
	// writes a loss of the whole cluster costs, plus the store's write.
	// +optional
	Segment ArchiveSegment `json:"segment,omitempty"`
	// CompactionHold keeps Tend's compaction from passing the archive's
	// last stored revision while that revision was stored less than this
	// long ago: an archive that lags does not lose its history to a
	// compaction, and one that stopped for longer does not hold the
	// history for ever (it starts again from a new base).
	// +kubebuilder:default="1h"
	// +optional
	CompactionHold *metav1.Duration `json:"compactionHold,omitempty"`
}

// ArchiveSegment bounds a segment of the archive.
//
// +kubebuilder:validation:XValidation:rule="!has(self.maxAge) || (duration(self.maxAge) >= duration('1s') && duration(self.maxAge) <= duration('10m'))",message="spec.archive.segment.maxAge is 1s to 10m"
type ArchiveSegment struct {
	// MaxAge is how old a segment's oldest revision may be before the
	// segment is stored.
	// +kubebuilder:default="10s"
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
	// MaxBytes is how many bytes of changes a segment holds at most
	// (64 KiB to 256 MiB).
	// +kubebuilder:validation:Minimum=65536
	// +kubebuilder:validation:Maximum=268435456
	// +kubebuilder:default=8388608
	// +optional
	MaxBytes int64 `json:"maxBytes,omitempty"`
}

// ArchiveStatus is the archive as its agent last reported it.
type ArchiveStatus struct {
	// Location is the archive's folder: s3://bucket/... or pvc://claim/...
	Location string `json:"location,omitempty"`
	// BaseBackup is the EtcdBackup the archive runs from, and BaseRevision
	// its revision: the archive holds every revision after it.
	BaseBackup   string `json:"baseBackup,omitempty"`
	BaseRevision int64  `json:"baseRevision,omitempty"`
	// Epoch counts the archive's starts from a new base: after it broke,
	// or after a restore or recovery changed the history.
	Epoch int32 `json:"epoch,omitempty"`
	// FirstRevision and FirstTime are the oldest stored revision and when
	// the archive received it.
	// +optional
	FirstRevision int64        `json:"firstRevision,omitempty"`
	FirstTime     *metav1.Time `json:"firstTime,omitempty"`
	// LastRevision and LastTime are the newest stored revision and when
	// the archive received it.
	// +optional
	LastRevision int64        `json:"lastRevision,omitempty"`
	LastTime     *metav1.Time `json:"lastTime,omitempty"`
	// LagSeconds is how long the oldest received revision that is not yet
	// stored has waited; 0 when every received revision is stored.
	LagSeconds int64 `json:"lagSeconds,omitempty"`
	// Segments counts the stored segments.
	Segments int32 `json:"segments,omitempty"`
	// Gaps are the revisions after FirstRevision that the archive lacks
	// (it started again from a newer base), the newest ten.
	// +kubebuilder:validation:MaxItems=10
	// +optional
	Gaps []ArchiveGap `json:"gaps,omitempty"`
}

// ArchiveGap is a range of revisions that the archive lacks.
type ArchiveGap struct {
	From   int64  `json:"from"`
	To     int64  `json:"to"`
	Reason string `json:"reason,omitempty"`
}
