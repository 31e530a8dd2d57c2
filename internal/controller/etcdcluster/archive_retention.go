package etcdcluster

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// The archive's retention (spec.archive.retention, R). Tend takes a base
// backup of its own for the archive whenever its newest one completed R
// ago. Once one of them completed R ago and is newer than the archive's
// base, the archive goes on from it: status.archive names it as the base
// and its revision as prunedThrough, the agent (started again with
// --prune-before) deletes the segments that hold no revision after it,
// and Tend deletes its own older bases, files and all. The window so goes
// back between R and 2R, and the agent starts again once per R.
// Scheduled and one-shot backups stay for their own retention; a restore
// to a point no longer starts from one older than prunedThrough.

// verificationRunning tells whether the archive's verification Job runs.
func (r *Reconciler) verificationRunning(ctx context.Context, c *etcdv1alpha1.EtcdCluster) (bool, error) {
	job, err := r.ownedJob(ctx, c, archiveVerifyJobName(c))
	if err != nil || job == nil {
		return false, err
	}
	state, _ := jobStateOf(job)
	return state != jobComplete && state != jobFailed, nil
}

// ownBase is a base backup that Tend took for the archive.
type ownBase struct {
	b          *etcdv1alpha1.EtcdBackup
	epoch, seq int
}

// ownBases lists, from the cache, the base backups Tend took for c's
// archive (labelled with c's UID, an epoch and a place, and controlled by
// c), by epoch and place.
func (r *Reconciler) ownBases(ctx context.Context, c *etcdv1alpha1.EtcdCluster) ([]ownBase, error) {
	var list etcdv1alpha1.EtcdBackupList
	if err := r.List(ctx, &list, client.InNamespace(c.Namespace), client.MatchingLabels{labelClusterUID: string(c.UID)}, client.HasLabels{labelArchiveEpoch}); err != nil {
		return nil, fmt.Errorf("listing the archive's base backups: %w", err)
	}
	var out []ownBase
	for i := range list.Items {
		b := &list.Items[i]
		epoch, err1 := strconv.Atoi(b.Labels[labelArchiveEpoch])
		seq, err2 := strconv.Atoi(cmp.Or(b.Labels[labelArchiveBaseSeq], "0"))
		if err1 != nil || err2 != nil || !metav1.IsControlledBy(b, c) {
			continue
		}
		out = append(out, ownBase{b: b, epoch: epoch, seq: seq})
	}
	slices.SortFunc(out, func(x, y ownBase) int { return cmp.Or(cmp.Compare(x.epoch, y.epoch), cmp.Compare(x.seq, y.seq)) })
	return out, nil
}

// keepArchiveRetention applies spec.archive.retention to the archive
// whose base is base (Complete) and whose status this pass writes is st.
// It returns the base the archive goes on from: base, or a newer one that
// completed retention ago. It does nothing while the archive's
// verification runs.
func (r *Reconciler) keepArchiveRetention(ctx context.Context, s *scope, base *etcdv1alpha1.EtcdBackup, st *etcdv1alpha1.ArchiveStatus) (*etcdv1alpha1.EtcdBackup, error) {
	c := s.cluster
	keep := c.Spec.Archive.Retention
	if keep == nil || keep.Duration <= 0 {
		return base, nil
	}
	if verifying, err := r.verificationRunning(ctx, c); err != nil || verifying {
		return base, err
	}
	bases, err := r.ownBases(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := r.dropPrunedBases(ctx, c, bases, base, st.PrunedThrough); err != nil {
		return nil, err
	}
	if err := r.takeRetentionBase(ctx, s, bases, st.Epoch, keep.Duration); err != nil {
		return nil, err
	}
	next := retentionBase(bases, base, s.now.Add(-keep.Duration))
	if next == nil {
		return base, nil
	}
	rev := next.Status.Snapshot.Revision
	r.event(c, corev1.EventTypeNormal, "ArchiveRetention", "Archive",
		"The archive goes on from the base backup %s (revision %d), which completed more than %s ago: the segments that hold no revision after it are deleted, and so are the older base backups Tend took for the archive",
		next.Name, rev, keep.Duration)
	st.BaseBackup, st.BaseRevision, st.PrunedThrough = next.Name, rev, rev
	return next, nil
}

// retentionBase is the base the archive moves on to, or nil: the newest
// of Tend's Complete bases that completed at or before cutoff and is
// newer than base.
func retentionBase(bases []ownBase, base *etcdv1alpha1.EtcdBackup, cutoff time.Time) *etcdv1alpha1.EtcdBackup {
	var next *etcdv1alpha1.EtcdBackup
	for _, o := range bases {
		b := o.b
		state, _ := finalBackupState(b)
		if state != backupDone || b.DeletionTimestamp != nil || b.Status.Snapshot == nil || b.Status.CompletionTime == nil ||
			b.Status.CompletionTime.After(cutoff) || b.Status.Snapshot.Revision <= base.Status.Snapshot.Revision {
			continue
		}
		if next == nil || b.Status.Snapshot.Revision > next.Status.Snapshot.Revision {
			next = b
		}
	}
	return next
}

// takeRetentionBase takes the next base of the epoch once the newest one
// completed keep ago, or failed archiveRetryFailedBase ago (the failed
// one goes: it has no file). The name follows the newest's place, so a
// pass on a stale cache makes no second one.
func (r *Reconciler) takeRetentionBase(ctx context.Context, s *scope, bases []ownBase, epoch int32, keep time.Duration) error {
	c := s.cluster
	var newest *ownBase
	for i := range bases {
		if bases[i].epoch == int(epoch) {
			newest = &bases[i]
		}
	}
	if newest == nil || newest.b.DeletionTimestamp != nil {
		return nil
	}
	state, _ := finalBackupState(newest.b)
	switch {
	case state == backupRunning:
		return nil
	case state == backupFailed && s.now.Sub(failedAt(newest.b)) < archiveRetryFailedBase:
		return nil
	case state == backupDone && (newest.b.Status.CompletionTime == nil || s.now.Sub(newest.b.Status.CompletionTime.Time) < keep):
		return nil
	}
	b := archiveBaseBackup(c, epoch, newest.seq+1)
	err := r.createOwned(ctx, c, b)
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case err != nil:
		return err
	}
	r.event(c, corev1.EventTypeNormal, "ArchiveBaseBackup", "Backup", "Created EtcdBackup %s: the archive's next base, as spec.archive.retention keeps %s", b.Name, keep)
	if state == backupFailed && newest.seq > 0 {
		return r.deleteOwned(ctx, c, "EtcdBackup", newest.b)
	}
	return nil
}

// dropPrunedBases deletes Tend's bases below prunedThrough, which no
// restore can start from any more, with their files: the annotation that
// kept a file comes off first. base, the archive's, stays.
func (r *Reconciler) dropPrunedBases(ctx context.Context, c *etcdv1alpha1.EtcdCluster, bases []ownBase, base *etcdv1alpha1.EtcdBackup, prunedThrough int64) error {
	var gone, kept []string
	for _, o := range bases {
		b := o.b
		if b.UID == base.UID || b.DeletionTimestamp != nil || b.Status.Snapshot == nil || b.Status.Snapshot.Revision >= prunedThrough {
			continue
		}
		if b.Annotations[etcdv1alpha1.AnnotationKeepArtifact] != "" {
			patch := client.MergeFromWithOptions(b.DeepCopy(), client.MergeFromWithOptimisticLock{})
			delete(b.Annotations, etcdv1alpha1.AnnotationKeepArtifact)
			if err := r.Patch(ctx, b, patch); err != nil {
				return fmt.Errorf("letting EtcdBackup %s delete its file: %w", b.Name, err)
			}
		}
		if err := r.deleteOwned(ctx, c, "EtcdBackup", b); err != nil {
			return err
		}
		if b.Spec.ArtifactPolicy == etcdv1alpha1.ArtifactRetain && b.Status.Artifact != nil {
			// A base made with artifactPolicy Retain keeps its file.
			kept = append(kept, b.Status.Artifact.URI)
		}
		gone = append(gone, b.Name)
	}
	if len(gone) > 0 {
		r.event(c, corev1.EventTypeNormal, "ArchiveBasesDeleted", "Delete",
			"Deleted the base backups %s: the archive no longer holds the revisions after them (prunedThrough %d)", strings.Join(gone, ", "), prunedThrough)
	}
	if len(kept) > 0 {
		r.event(c, corev1.EventTypeWarning, "ArchiveBaseFilesKept", "Delete",
			"The files of deleted base backups stay, as their artifactPolicy Retain says: %s; delete them yourself if they are not wanted", strings.Join(kept, ", "))
	}
	return nil
}
