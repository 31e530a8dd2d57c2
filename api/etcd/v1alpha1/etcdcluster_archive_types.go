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
// +kubebuilder:validation:XValidation:rule="!has(self.retention) || duration(self.retention) >= duration('1h')",message="spec.archive.retention is at least 1h"
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
	// Retention is how far back a restore to a point can go. Without it
	// the archive keeps every segment and every base backup that Tend
	// took for it. With it, Tend takes a base backup of its own whenever
	// its newest completed retention ago, and once one of them completed
	// retention ago the archive goes on from it: the segments that only
	// older bases needed are deleted, and so are Tend's older bases, with
	// their files. The window so reaches back between retention and twice
	// that. Other EtcdBackups stay for their own retention, but one older
	// than status.archive.prunedThrough no longer starts a restore to a
	// point.
	// +optional
	Retention *metav1.Duration `json:"retention,omitempty"`
	// Verification replays the archive onto its base in a throwaway etcd,
	// in a Job, and compares the store with the live cluster's at the
	// revision reached (etcd's HashKV): every interval, and when the
	// annotation etcd.tend.dev/verify-archive changes.
	// +optional
	Verification ArchiveVerification `json:"verification,omitempty"`
}

// ArchiveVerification schedules the archive's verification.
//
// +kubebuilder:validation:XValidation:rule="!has(self.interval) || duration(self.interval) == duration('0s') || duration(self.interval) >= duration('10m')",message="spec.archive.verification.interval is at least 10m, or 0s for on demand only"
type ArchiveVerification struct {
	// Interval between verifications; 0s verifies only on demand.
	// +kubebuilder:default="24h"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
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
	// PrunedThrough is the newest revision that the archive may no longer
	// hold: spec.archive.retention moved its base to that revision, and
	// the segments that only older bases needed are deleted. A base backup
	// older than it cannot start a restore to a point.
	// +optional
	PrunedThrough int64 `json:"prunedThrough,omitempty"`
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
	// Verification is the last verification of the archive, or the one
	// under way.
	// +optional
	Verification *ArchiveVerificationStatus `json:"verification,omitempty"`
}

// ArchiveVerificationStatus is how the archive's last verification ended.
type ArchiveVerificationStatus struct {
	// Job is the verification under way.
	// +optional
	Job string `json:"job,omitempty"`
	// Time is when the last verification ended, and Result how: Matches
	// (the archive replayed from the base at BaseRevision equalled the
	// live cluster at Revision), Mismatch (it did not, or the archive
	// lacks a revision or holds a damaged segment) or VerificationFailed
	// (it could not run to the end).
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// +optional
	Result string `json:"result,omitempty"`
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// +optional
	BaseRevision int64 `json:"baseRevision,omitempty"`
	// Message says what was compared, or why it failed.
	// +optional
	Message string `json:"message,omitempty"`
	// Request is the value of etcd.tend.dev/verify-archive that the last
	// verification answered.
	// +optional
	Request string `json:"request,omitempty"`
}

// ArchiveGap is a range of revisions that the archive lacks.
type ArchiveGap struct {
	From   int64  `json:"from"`
	To     int64  `json:"to"`
	Reason string `json:"reason,omitempty"`
}
