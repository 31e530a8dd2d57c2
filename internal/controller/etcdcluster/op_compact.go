package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcd"
)

// compactTimeout bounds one compaction: a physical compaction returns
// once the member applied it, which takes a while on a long history.
const compactTimeout = time.Minute

// runCompact drops the history older than the retention.
func (r *Reconciler) runCompact(ctx context.Context, s *scope, w *world, d decision) error {
	// The pages a compaction frees may put a member past the
	// defragmentation threshold: the next look comes soon, not at the idle
	// interval. Compactions are minutes apart (planCompaction), and so are
	// these looks.
	s.requeueAfter(requeueStep)
	return r.compact(ctx, s, w, d.compact, fmt.Sprintf("%s kept", w.maint.compaction))
}

// compact compacts to rev and records it in status.maintenance.compaction.
// A revision that is compacted already is done.
func (r *Reconciler) compact(ctx context.Context, s *scope, w *world, rev int64, why string) error {
	callCtx, cancel := context.WithTimeout(ctx, compactTimeout)
	defer cancel()
	if err := s.cli.Compact(callCtx, rev); err != nil && !errors.Is(err, etcd.ErrCompacted) {
		return fmt.Errorf("compacting the history before revision %d: %w", rev, err)
	}
	st := &w.maint.status
	if st.Compaction == nil {
		st.Compaction = &etcdv1alpha1.CompactionStatus{}
	}
	st.Compaction.Revision, st.Compaction.Time = rev, &metav1.Time{Time: s.now}
	r.event(s.cluster, corev1.EventTypeNormal, "Compacted", "Compact", "Compacted the history before revision %d (%s)", rev, why)
	return nil
}
