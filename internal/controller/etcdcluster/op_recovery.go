package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tend-dev/tend/internal/etcdnames"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// runRecovery takes the in-place restore or quorum-loss recovery under
// way (status.recovery) as far as this pass can. Each step stops, deletes
// or starts something: it acts on the recovery as the apiserver has it,
// not on a cache that may lag a step behind (a stale RestoringData would
// delete volume claims of members that came back since).
func (r *Reconciler) runRecovery(ctx context.Context, s *scope, w *world, _ decision) error {
	c := s.cluster
	live := &etcdv1alpha1.EtcdCluster{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(c), live); err != nil {
		return fmt.Errorf("reading the EtcdCluster before a recovery step: %w", err)
	}
	if live.ResourceVersion != c.ResourceVersion {
		return fmt.Errorf("%w: the recovery waits for the next pass", errStaleCluster)
	}
	rec := w.recovery
	s.obs.recovery = &recoveryObservation{status: rec, holding: true}
	if c.Spec.Paused {
		s.obs.recovery.message = fmt.Sprintf("spec.paused is true: the recovery holds at %s", rec.Phase)
		return nil
	}
	return r.advanceRecovery(ctx, s, rec, w.restores, w.data)
}

// runFailedHold keeps the members of a failed recovery stopped: their data
// may be half replaced. Another restore ends the hold (it comes first in
// the precedence); a recovery from a survivor whose Job someone deleted is
// tried again.
func (r *Reconciler) runFailedHold(ctx context.Context, s *scope, w *world, _ decision) error {
	rec := w.recovery
	s.obs.recovery = &recoveryObservation{status: rec, holding: true}
	if !w.retryRecovery {
		return nil
	}
	rec.Phase, rec.CompletedAt, rec.Message = etcdv1alpha1.RecoveryRestoring, nil, fmt.Sprintf("Job %s was deleted: trying again", rec.Job)
	r.event(s.cluster, corev1.EventTypeNormal, "RecoveryRetried", "Recover", "%s", rec.Message)
	return r.advanceRecovery(ctx, s, rec, w.restores, w.data)
}

// advanceRecovery takes the recovery rec as far as this pass can.
func (r *Reconciler) advanceRecovery(ctx context.Context, s *scope, rec *etcdv1alpha1.RecoveryStatus, restores []etcdv1alpha1.EtcdRestore, data memberData) error {
	c := s.cluster
	obs := s.obs.recovery
	var rs *etcdv1alpha1.EtcdRestore
	if rec.Kind == etcdv1alpha1.RecoveryFromBackup {
		for i := range restores {
			if restores[i].Name == rec.Restore {
				rs = &restores[i]
			}
		}
		if rs == nil {
			r.failRecovery(s, rec, nil, fmt.Sprintf("EtcdRestore %s was deleted during the restore; the members stay stopped. Create a new EtcdRestore to bring the cluster back", rec.Restore))
			return nil
		}
	}
	for i := range restores {
		if other := &restores[i]; other.Name != rec.Restore && !restoreFinished(other) && other.Status.Phase != etcdv1alpha1.RecoveryPending {
			if err := r.setRestore(ctx, other, func(st *etcdv1alpha1.EtcdRestoreStatus) {
				pendingRestoreStatus(st, other, fmt.Sprintf("Waiting for the recovery under way (%s) to end", rec.Cause))
			}); err != nil {
				return err
			}
		}
	}
	s.requeueAfter(requeueStep)
	var err error
	for {
		phase := rec.Phase
		switch rec.Phase {
		case etcdv1alpha1.RecoveryStopping:
			err = r.stopMembers(ctx, s, rec, data)
		case etcdv1alpha1.RecoveryRestoring:
			if rec.Kind == etcdv1alpha1.RecoveryFromBackup {
				err = r.restoreMembers(ctx, s, rec, rs, data)
			} else {
				err = r.forceNewCluster(ctx, s, rec, data)
			}
		case etcdv1alpha1.RecoveryStarting:
			err = r.startMembers(ctx, s, rec, rs, data)
		case etcdv1alpha1.RecoveryChecking:
			err = r.checkRestore(ctx, s, rec, rs)
		}
		if err != nil || rec.Phase == phase {
			break
		}
		if recovering(rec) {
			r.event(c, corev1.EventTypeNormal, "Recovery"+rec.Phase, "Recover", "%s: %s", rec.Cause, rec.Message)
		}
		if rs != nil {
			if err := r.setRestore(ctx, rs, func(st *etcdv1alpha1.EtcdRestoreStatus) {
				st.Phase = rec.Phase
				if rec.Phase == etcdv1alpha1.RecoveryFailed {
					failRestoreStatus(st, rs, etcdv1alpha1.ReasonRestoreFailed, rec.Message, s.now)
				}
			}); err != nil {
				return err
			}
		}
		if !recovering(rec) {
			obs.holding = false
			break
		}
	}
	if err == nil && !recovering(rec) && rec.Kind == etcdv1alpha1.RecoveryFromBackup {
		err = r.releaseBackups(ctx, c)
	}
	return err
}

// stopMembers scales the StatefulSet to nothing and waits for the member
// pods to be gone.
func (r *Reconciler) stopMembers(ctx context.Context, s *scope, rec *etcdv1alpha1.RecoveryStatus, data memberData) error {
	if err := r.syncStatefulSet(ctx, s, 0, Bootstrap{Members: allMembers(s.cluster), State: "existing"}); err != nil {
		return err
	}
	if n := len(data.pods); n > 0 {
		s.obs.recovery.message = fmt.Sprintf("Stopping the members: %d pod(s) left", n)
		return nil
	}
	rec.Phase, rec.Message = etcdv1alpha1.RecoveryRestoring, "The members are stopped"
	return nil
}

// restoreMembers fills every member's volume from the restore's backup,
// one Job per member, the data each held moved aside until the restored
// data is in place. The volumes' member-ID marks go: the restored members
// have new IDs, and are marked anew once seen healthy.
func (r *Reconciler) restoreMembers(ctx context.Context, s *scope, rec *etcdv1alpha1.RecoveryStatus, rs *etcdv1alpha1.EtcdRestore, data memberData) error {
	c := s.cluster
	src, progress, err := r.resolveRestoreOf(ctx, c, rs)
	if err != nil {
		return err
	}
	if progress != nil {
		r.failRecovery(s, rec, rs, progress.message)
		return nil
	}
	if src.replay != nil {
		// The archive is read only once its pod is gone: then it holds
		// everything it received, and changes no more while the members'
		// replays read it.
		if n, err := r.archivePods(ctx, c); err != nil || n > 0 {
			s.obs.recovery.message = fmt.Sprintf("Waiting for the archive's pod to store what it received and stop (%d left)", n)
			return err
		}
	}
	got, err := r.restoreVolumes(ctx, volumeRestore{
		cluster: s.template(), src: src,
		run: func(i int) restoreRun {
			return restoreRun{job: restoreRunJob(rs, i), id: string(rs.UID), replace: true}
		},
		jobOf: func(ctx context.Context, name string) (*batchv1.Job, error) { return r.restoreJobOf(ctx, c, rs, name) },
		mark:  func(job *batchv1.Job) *batchv1.Job { return forRestore(job, rs) },
	}, data.pvcs)
	if err != nil {
		return err
	}
	failed, done := got.failed, len(got.done)
	switch {
	case len(failed) > 0:
		r.failRecovery(s, rec, rs, fmt.Sprintf("Restoring from %s failed: %v. The Jobs' pod logs say why. The members stay stopped, their data partly replaced: create a new EtcdRestore, from a good backup, to bring the cluster back", src.from.URI, failed))
	case done < int(replicas(c)):
		s.obs.recovery.message = fmt.Sprintf("Restoring every member's data from %s: %d of %d done", src.from.URI, done, replicas(c))
	case src.replay != nil:
		replayed, err := r.replayedTo(ctx, src, got.done)
		if errors.Is(err, errReplayDiffers) {
			r.failRecovery(s, rec, rs, err.Error()+". The members stay stopped: create a new EtcdRestore with a revision as its target")
			return nil
		}
		if err != nil {
			return err
		}
		from := src.from
		from.Archive = replayed
		if err := r.setRestore(ctx, rs, func(st *etcdv1alpha1.EtcdRestoreStatus) { st.RestoredFrom = &from }); err != nil {
			return err
		}
		rec.Revision = replayed.Revision
		rec.Phase, rec.Message = etcdv1alpha1.RecoveryStarting, fmt.Sprintf("Every member's data is restored from %s and the archive replayed onto it to revision %d (%d revisions from %d segments)",
			src.from.URI, replayed.Revision, replayed.Revisions, replayed.Segments)
	default:
		rec.Phase, rec.Message = etcdv1alpha1.RecoveryStarting, fmt.Sprintf("Every member's data is restored from %s", src.from.URI)
	}
	return nil
}

// startMembers starts the members on their recovered data and waits for
// them to be healthy: every member after a restore; the survivor after a
// recovery from it (the others join later as learners, as in any scale
// out). A restore's members then get the spec's authentication and root
// password (the backup brought its own) and their volumes' marks.
func (r *Reconciler) startMembers(ctx context.Context, s *scope, rec *etcdv1alpha1.RecoveryStatus, rs *etcdv1alpha1.EtcdRestore, data memberData) error {
	c := s.cluster
	size, boot := replicas(c), Bootstrap{Members: allMembers(c), State: "existing"}
	want := int(replicas(c))
	if rec.Kind == etcdv1alpha1.RecoveryFromSurvivor {
		ordinal, _ := memberOrdinal(c, rec.Survivor)
		size, boot, want = int32(ordinal+1), Bootstrap{Members: []string{rec.Survivor}, State: "existing"}, 1
	}
	if err := r.syncStatefulSet(ctx, s, size, boot); err != nil {
		return err
	}
	cli, err := r.connectMembers(ctx, s, data)
	if cli == nil || err != nil {
		s.obs.recovery.message = "Starting the members"
		return err
	}
	defer func() { _ = cli.Close() }()
	callCtx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	statuses, err := cli.Status(callCtx)
	if err != nil {
		s.obs.recovery.message = fmt.Sprintf("Starting the members: %v", err)
		return nil
	}
	healthy := 0
	for _, st := range statuses {
		if st.Healthy && !st.IsLearner {
			healthy++
		}
	}
	if len(statuses) != want || healthy != want {
		s.obs.recovery.message = fmt.Sprintf("Starting the members: %d of %d healthy", healthy, want)
		return nil
	}
	if rec.Kind == etcdv1alpha1.RecoveryFromSurvivor {
		rec.Phase, rec.CompletedAt = etcdv1alpha1.RecoveryComplete, &metav1.Time{Time: s.now.Truncate(time.Second)}
		rec.Message = fmt.Sprintf("%s serves alone with its data (revision %d); the other members are added anew as learners", rec.Survivor, rec.Revision)
		r.event(c, corev1.EventTypeNormal, "Recovered", "Recover", "%s", rec.Message)
		return nil
	}
	if err := applyAuth(callCtx, c, cli, s.rootPassword, true); err != nil {
		return err
	}
	views := viewsOf(c, statuses, s.now)
	if err := r.markVolumes(ctx, s, views, data.pvcs); err != nil {
		return err
	}
	rec.Phase, rec.Job = etcdv1alpha1.RecoveryChecking, restoreCheckJob(rs)
	rec.Message = fmt.Sprintf("Every member is healthy; Job %s checks the cluster", rec.Job)
	return nil
}

// markVolumes marks each member's volume claim with its member ID.
func (r *Reconciler) markVolumes(ctx context.Context, s *scope, views []memberView, pvcs []corev1.PersistentVolumeClaim) error {
	ids := map[int]string{}
	for _, v := range views {
		ids[v.Ordinal] = v.ID.String()
	}
	for i := range pvcs {
		pvc := &pvcs[i]
		ordinal, ok := isMemberPVC(s.cluster, pvc)
		if !ok || ids[ordinal] == "" || pvc.Annotations[annotationMemberID] == ids[ordinal] {
			continue
		}
		if err := r.markClaim(ctx, pvc, ids[ordinal]); err != nil {
			return err
		}
	}
	return nil
}

// checkRestore runs the check Job after a restore, and ends it.
func (r *Reconciler) checkRestore(ctx context.Context, s *scope, rec *etcdv1alpha1.RecoveryStatus, rs *etcdv1alpha1.EtcdRestore) error {
	c := s.cluster
	job, err := r.restoreJobOf(ctx, c, rs, rec.Job)
	if err != nil || job == nil {
		return err
	}
	if job.Name == "" {
		if err := r.createOwned(ctx, c, forRestore(checkJob(c, rec.Job, r.AgentImage), rs)); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		s.obs.recovery.message = rec.Message
		return nil
	}
	switch state, msg := jobStateOf(job); state {
	case jobFailed:
		r.failRecovery(s, rec, rs, fmt.Sprintf("The members run the restored data, but the check Job %s failed (%s); read its logs. The members stay stopped: create a new EtcdRestore to try again", rec.Job, msg))
	case jobComplete:
		now := metav1.Time{Time: s.now.Truncate(time.Second)}
		rec.Phase, rec.CompletedAt = etcdv1alpha1.RecoveryComplete, &now
		from := *rs.Status.RestoredFrom
		from.Time = &now
		data, rev := from.URI, from.Revision
		if a := from.Archive; a != nil {
			data, rev = fmt.Sprintf("%s with the archive replayed onto it to %s", from.URI, targetString(&etcdv1alpha1.RestoreTarget{Revision: a.Revision})), a.Revision
		}
		rec.Message = fmt.Sprintf("Every member runs the data of %s (revision %d; new revisions start above %d), checked by Job %s", data, rev, rev+bumpRevision, rec.Job)
		s.obs.recovery.restoredFrom = &from
		if err := r.setRestore(ctx, rs, func(st *etcdv1alpha1.EtcdRestoreStatus) {
			st.Phase, st.CompletionTime, st.RestoredFrom = etcdv1alpha1.RecoveryComplete, &now, &from
			apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: etcdv1alpha1.RestoreComplete, Status: metav1.ConditionTrue,
				Reason: etcdv1alpha1.ReasonRestoreSucceeded, Message: rec.Message, ObservedGeneration: rs.Generation})
		}); err != nil {
			return err
		}
		r.event(c, corev1.EventTypeNormal, "Restored", "Restore", "%s", rec.Message)
		r.Recorder.Eventf(rs, c, corev1.EventTypeNormal, "Restored", "Restore", "%s", rec.Message)
		for i := range int(replicas(c)) {
			job, err := r.restoreJobOf(ctx, c, rs, restoreRunJob(rs, i))
			if err != nil {
				return err
			}
			if job != nil && job.Name != "" {
				if err := r.deleteDoneJob(ctx, c, job); err != nil {
					return err
				}
			}
		}
	default:
		s.obs.recovery.message = rec.Message
	}
	return nil
}

// failRecovery ends rec as failed; the members stay stopped.
func (r *Reconciler) failRecovery(s *scope, rec *etcdv1alpha1.RecoveryStatus, rs *etcdv1alpha1.EtcdRestore, msg string) {
	rec.Phase, rec.Message = etcdv1alpha1.RecoveryFailed, msg
	rec.CompletedAt = &metav1.Time{Time: s.now.Truncate(time.Second)}
	r.event(s.cluster, corev1.EventTypeWarning, "RecoveryFailed", "Recover", "%s", msg)
	if rs != nil {
		r.Recorder.Eventf(rs, s.cluster, corev1.EventTypeWarning, "RestoreFailed", "Restore", "%s", msg)
	}
}

// allMembers names every member the spec wants.
func allMembers(c *etcdv1alpha1.EtcdCluster) []string {
	names := make([]string, 0, replicas(c))
	for i := range int(replicas(c)) {
		names = append(names, memberName(c, i))
	}
	return names
}

// runningImageOr is the etcd image the members ran, else the spec's.
func runningImageOr(s *scope) string {
	if img := runningImage(s.sts); img != "" {
		return img
	}
	return etcdnames.Image(s.template())
}
