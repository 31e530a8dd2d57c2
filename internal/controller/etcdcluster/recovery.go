package etcdcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/etcd"
	"github.com/tend-dev/tend/internal/podspec"
	"github.com/tend-dev/tend/internal/readiness"
)

// recoveryObservation is what the recovery phase saw and did.
type recoveryObservation struct {
	// status is the status.recovery to write.
	status *etcdv1alpha1.RecoveryStatus
	// holding: the members are stopped, or held, for a recovery; the pass
	// did nothing else.
	holding bool
	// message says how far it got.
	message string
	// restoredFrom is set when a restore completed.
	restoredFrom *etcdv1alpha1.RestoredFrom
}

// recovering tells whether rec is under way.
func recovering(rec *etcdv1alpha1.RecoveryStatus) bool {
	return rec != nil && rec.Phase != etcdv1alpha1.RecoveryComplete && rec.Phase != etcdv1alpha1.RecoveryFailed
}

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

// errStaleCluster: the cache's EtcdCluster is older than the apiserver's.
var errStaleCluster = errors.New("the cached EtcdCluster is older than the apiserver's")

// restoresOf lists the EtcdRestores of c, oldest first.
func (r *Reconciler) restoresOf(ctx context.Context, c *etcdv1alpha1.EtcdCluster) ([]etcdv1alpha1.EtcdRestore, error) {
	var list etcdv1alpha1.EtcdRestoreList
	if err := r.List(ctx, &list, client.InNamespace(c.Namespace), client.MatchingFields{indexRestoreCluster: c.Name}); err != nil {
		return nil, fmt.Errorf("listing EtcdRestores: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b etcdv1alpha1.EtcdRestore) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	return list.Items, nil
}

// restoreFinished tells whether rs completed or failed.
func restoreFinished(rs *etcdv1alpha1.EtcdRestore) bool {
	return apimeta.IsStatusConditionTrue(rs.Status.Conditions, etcdv1alpha1.RestoreComplete) ||
		apimeta.IsStatusConditionTrue(rs.Status.Conditions, etcdv1alpha1.RestoreFailed)
}

// pendingRestore is the oldest restore that has not finished.
func pendingRestore(restores []etcdv1alpha1.EtcdRestore) *etcdv1alpha1.EtcdRestore {
	for i := range restores {
		if rs := &restores[i]; rs.DeletionTimestamp == nil && !restoreFinished(rs) {
			return rs
		}
	}
	return nil
}

// runStartRestore begins the pending EtcdRestore, which next found may
// start: it holds the backup it reads, records the recovery in
// status.recovery, and stops the members.
func (r *Reconciler) runStartRestore(ctx context.Context, s *scope, w *world, _ decision) error {
	c, rs, src := s.cluster, w.pending.rs, w.pending.src
	if rs.Spec.BackupRef != nil {
		// Before the members stop: the backup and its file stay until the
		// restore is done.
		if err := r.holdBackup(ctx, c, rs.Spec.BackupRef.Name); err != nil {
			return err
		}
	}
	rec := &etcdv1alpha1.RecoveryStatus{
		Kind: etcdv1alpha1.RecoveryFromBackup, Restore: rs.Name, Cause: "EtcdRestore " + rs.Name,
		Phase: etcdv1alpha1.RecoveryStopping, StartedAt: metav1.Time{Time: s.now.Truncate(time.Second)},
		Revision: src.from.Revision,
	}
	from := src.from
	if err := r.setRestore(ctx, rs, func(st *etcdv1alpha1.EtcdRestoreStatus) {
		st.Phase, st.StartTime, st.MembersStopped, st.RestoredFrom = etcdv1alpha1.RecoveryStopping, &rec.StartedAt, true, &from
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: etcdv1alpha1.RestoreComplete, Status: metav1.ConditionFalse,
			Reason: etcdv1alpha1.ReasonRestoring, Message: "Stopping the members", ObservedGeneration: rs.Generation})
	}); err != nil {
		return err
	}
	r.event(c, corev1.EventTypeWarning, "RestoreStarted", "Restore", "EtcdRestore %s replaces every member's data with %s: stopping the members", rs.Name, src.from.URI)
	r.Recorder.Eventf(rs, c, corev1.EventTypeNormal, "RestoreStarted", "Restore", "Stopping the members of EtcdCluster %s", c.Name)
	s.obs.recovery = &recoveryObservation{status: rec, holding: true}
	return r.advanceRecovery(ctx, s, rec, []etcdv1alpha1.EtcdRestore{*rs}, w.data)
}

// answerPendingRestore tells the pending EtcdRestore that did not start
// why: it waits (for its backup, for the cluster to be resumed), or it is
// refused and fails.
func (r *Reconciler) answerPendingRestore(ctx context.Context, s *scope, w *world, v *restoreVerdict) error {
	if v == nil {
		return nil
	}
	rs := w.pending.rs
	if v.reason == "" {
		if v.retry {
			s.requeueAfter(requeueSteady)
		}
		return r.setRestore(ctx, rs, func(st *etcdv1alpha1.EtcdRestoreStatus) { pendingRestoreStatus(st, rs, v.message) })
	}
	r.Recorder.Eventf(rs, s.cluster, corev1.EventTypeWarning, "RestoreRefused", "Restore", v.message)
	return r.setRestore(ctx, rs, func(st *etcdv1alpha1.EtcdRestoreStatus) {
		failRestoreStatus(st, rs, v.reason, v.message, s.now)
	})
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
	src, progress, err := r.resolveSource(ctx, c, rs.Spec.BackupRef, rs.Spec.Source)
	if err != nil {
		return err
	}
	if progress != nil {
		r.failRecovery(s, rec, rs, progress.message)
		return nil
	}
	claims := map[string]*corev1.PersistentVolumeClaim{}
	for i := range data.pvcs {
		claims[data.pvcs[i].Name] = &data.pvcs[i]
	}
	var done int
	var failed []string
	for i := range int(replicas(c)) {
		pvc := claims[pvcName(c, i)]
		if _, ours := isMemberPVC(c, pvc); pvc != nil && !ours {
			return notOurs(c, "PersistentVolumeClaim", pvc)
		}
		switch {
		case pvc == nil:
			if err := r.Create(ctx, memberClaim(c, i)); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating volume claim %s: %w", pvcName(c, i), err)
			}
		case pvc.Annotations[annotationMemberID] != "":
			patch := client.MergeFrom(pvc.DeepCopy())
			delete(pvc.Annotations, annotationMemberID)
			if err := r.Patch(ctx, pvc, patch); err != nil {
				return fmt.Errorf("unmarking volume claim %s: %w", pvc.Name, err)
			}
		}
		name := restoreRunJob(rs, i)
		job, err := r.restoreJobOf(ctx, c, rs, name)
		if err != nil || job == nil {
			return err
		}
		if job.Name == "" {
			run := restoreRun{job: name, id: string(rs.UID), replace: true}
			if err := r.createOwned(ctx, c, forRestore(memberRestoreJob(s.template(), i, src, r.AgentImage, run), rs)); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			continue
		}
		switch state, msg := jobStateOf(job); state {
		case jobComplete:
			done++
		case jobFailed:
			failed = append(failed, fmt.Sprintf("%s (%s)", name, msg))
		}
	}
	switch {
	case len(failed) > 0:
		r.failRecovery(s, rec, rs, fmt.Sprintf("Restoring from %s failed: %v. The Jobs' pod logs say why. The members stay stopped, their data partly replaced: create a new EtcdRestore, from a good backup, to bring the cluster back", src.from.URI, failed))
	case done < int(replicas(c)):
		s.obs.recovery.message = fmt.Sprintf("Restoring every member's data from %s: %d of %d done", src.from.URI, done, replicas(c))
	default:
		rec.Phase, rec.Message = etcdv1alpha1.RecoveryStarting, fmt.Sprintf("Every member's data is restored from %s", src.from.URI)
	}
	return nil
}

// annotationRestoreUID on a restore's Jobs is the UID of the EtcdRestore
// they work for: a Job of the same name left by an earlier EtcdRestore of
// the same name (deleted and created again) is not this one's.
const annotationRestoreUID = "etcd.tend.dev/restore-uid"

// forRestore marks job as rs's.
func forRestore(job *batchv1.Job, rs *etcdv1alpha1.EtcdRestore) *batchv1.Job {
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[annotationRestoreUID] = string(rs.UID)
	return job
}

// restoreJobOf reads rs's Job name: an empty Job when there is none yet,
// to be made. A Job of that name that Tend made for this cluster for an
// earlier EtcdRestore of the same name is deleted first (its result is
// not this restore's); nil while it is still going. A Job of that name
// that Tend did not make for this cluster is left alone: the restore waits,
// with an error that says so, until someone deletes or renames it.
func (r *Reconciler) restoreJobOf(ctx context.Context, c *etcdv1alpha1.EtcdCluster, rs *etcdv1alpha1.EtcdRestore, name string) (*batchv1.Job, error) {
	job, err := r.ownedJob(ctx, c, name)
	switch {
	case err != nil:
		return nil, err
	case job == nil:
		return &batchv1.Job{}, nil
	case job.Annotations[annotationRestoreUID] == string(rs.UID):
		return job, nil
	case job.DeletionTimestamp != nil:
		return nil, nil // going; a later pass makes ours
	}
	// Deleted in the background, the Job goes at once (its pods later),
	// and ours can be made; if not, the create meets it and a later pass
	// comes back.
	if err := r.deleteOwned(ctx, c, "Job", job); err != nil {
		return nil, fmt.Errorf("deleting the Job of an earlier restore: %w", err)
	}
	r.event(c, corev1.EventTypeNormal, "JobReplaced", "Restore", "Deleted Job %s, left by an earlier EtcdRestore named %s, to run it for this one", name, rs.Name)
	return &batchv1.Job{}, nil
}

// restoreRunJob is the Job that restores the i-th member for rs.
func restoreRunJob(rs *etcdv1alpha1.EtcdRestore, i int) string {
	return fmt.Sprintf("%s-%d", rs.Name, i)
}

// forceNewCluster keeps the survivor's data as a one-member cluster: the
// other members' volumes go (their members could not vote any more, and
// come back as new learners), and a Job runs etcd --force-new-cluster on
// the survivor's volume until it leads alone.
func (r *Reconciler) forceNewCluster(ctx context.Context, s *scope, rec *etcdv1alpha1.RecoveryStatus, data memberData) error {
	c := s.cluster
	survivor, ok := memberOrdinal(c, rec.Survivor)
	if !ok {
		r.failRecovery(s, rec, nil, fmt.Sprintf("%s is not a member of the StatefulSet", rec.Survivor))
		return nil
	}
	left := 0
	for i := range data.pvcs {
		pvc := &data.pvcs[i]
		ordinal, ok := isMemberPVC(c, pvc)
		if !ok || ordinal == survivor {
			continue
		}
		left++
		if pvc.DeletionTimestamp == nil {
			if err := r.deleteExactly(ctx, "volume claim of a lost member", pvc); err != nil {
				return err
			}
			r.event(c, corev1.EventTypeWarning, "VolumeDeleted", "Recover", "Deleted volume claim %s: its member is given up, and comes back as a new learner", pvc.Name)
		}
	}
	if left > 0 {
		s.obs.recovery.message = fmt.Sprintf("Deleting the volume claims of the lost members: %d left (a claim goes once no pod mounts it, completed pods included)", left)
		return nil
	}
	job, err := r.ownedJob(ctx, c, rec.Job)
	if err == nil && job == nil {
		if err := r.createOwned(ctx, c, recoverJob(s.template(), survivor, rec.Job, r.AgentImage, runningImageOr(s))); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		s.obs.recovery.message = fmt.Sprintf("Job %s makes %s's data a one-member cluster (etcd --force-new-cluster)", rec.Job, rec.Survivor)
		return nil
	}
	if err != nil {
		return err
	}
	switch state, msg := jobStateOf(job); state {
	case jobFailed:
		r.failRecovery(s, rec, nil, fmt.Sprintf("Job %s, which runs etcd --force-new-cluster on %s's data, failed (%s); its pod logs say why. The members stay stopped: delete the Job to try again once the cause is fixed, or create an EtcdRestore from a backup to bring the cluster back", rec.Job, rec.Survivor, msg))
	case jobComplete:
		res, err := r.jobResult(ctx, job, "recover")
		if err != nil {
			return err
		}
		if res.Recovered != nil {
			rec.Revision = res.Recovered.Revision
		}
		if err := r.deleteDoneJob(ctx, c, job); err != nil {
			return err
		}
		rec.Phase = etcdv1alpha1.RecoveryStarting
		rec.Message = fmt.Sprintf("%s leads a one-member cluster at revision %d", rec.Survivor, rec.Revision)
	default:
		s.obs.recovery.message = fmt.Sprintf("Job %s makes %s's data a one-member cluster (etcd --force-new-cluster)", rec.Job, rec.Survivor)
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

// restoreCheckJob is the Job that checks the cluster after rs.
func restoreCheckJob(rs *etcdv1alpha1.EtcdRestore) string { return rs.Name + "-check" }

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
		rec.Message = fmt.Sprintf("Every member runs the data of %s (revision %d; new revisions start above %d), checked by Job %s", from.URI, from.Revision, from.Revision+bumpRevision, rec.Job)
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
	return Image(s.template())
}

// jobResult reads the agent's Result from the termination message of the
// container named ctr in job's succeeded pod. Only a pod that job controls
// counts: anyone can label a pod with the Job's name, and a Job of the same
// name deleted earlier leaves pods with that label too.
func (r *Reconciler) jobResult(ctx context.Context, job *batchv1.Job, ctr string) (agentapi.Result, error) {
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return agentapi.Result{}, fmt.Errorf("listing the pods of Job %s: %w", job.Name, err)
	}
	return resultOf(pods.Items, job, ctr)
}

// resultOf reads the Result of the container named ctr from the succeeded
// pod among pods that job controls.
func resultOf(pods []corev1.Pod, job *batchv1.Job, ctr string) (agentapi.Result, error) {
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded || !metav1.IsControlledBy(&p, job) {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == ctr && cs.State.Terminated != nil {
				return agentapi.ParseResult(cs.State.Terminated.Message, ctr)
			}
		}
	}
	return agentapi.Result{}, fmt.Errorf("job %s succeeded, but no pod of it has a result", job.Name)
}

// recoverJob runs etcd --force-new-cluster on the ordinal-th member's
// volume, as a native sidecar, while `tend recover` waits for it to lead a
// one-member cluster with its log replayed; when the agent exits, the
// kubelet stops etcd, which closes its data cleanly. etcd listens on the
// pod's loopback only: nothing else can reach it.
func recoverJob(c *etcdv1alpha1.EtcdCluster, ordinal int, name, agentImage, etcdImage string) *batchv1.Job {
	member := memberName(c, ordinal)
	mounts := []corev1.VolumeMount{{Name: dataVolume, MountPath: dataDir}}
	etcdCtr := corev1.Container{
		Name:            "etcd",
		Image:           etcdImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		RestartPolicy:   ptr.To(corev1.ContainerRestartPolicyAlways),
		Command: []string{"/usr/local/bin/etcd",
			"--name=" + member,
			"--data-dir=" + dataDir,
			"--force-new-cluster",
			"--listen-client-urls=http://127.0.0.1:" + strconv.Itoa(clientPort),
			"--advertise-client-urls=" + memberClientURL(c, member),
			"--listen-peer-urls=http://127.0.0.1:" + strconv.Itoa(peerPort),
			"--listen-metrics-urls=http://127.0.0.1:" + strconv.Itoa(metricsPort),
		},
		VolumeMounts:    mounts,
		SecurityContext: podspec.ContainerSecurity(),
	}
	var env []corev1.EnvVar
	if c.Spec.Auth.Enabled {
		// With auth on, etcd answers its status and member list only to a
		// user.
		env = []corev1.EnvVar{rootPasswordEnv(c)}
	}
	wait := agentStep(agentImage, "recover", []string{"recover",
		"--endpoint=http://127.0.0.1:" + strconv.Itoa(clientPort), "--member=" + member, "--timeout=3m"}, env, nil)
	return &batchv1.Job{
		ObjectMeta: meta(c, name),
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](2),
			PodFailurePolicy:      podspec.PodFailurePolicy(agentapi.ExitTerminal),
			ActiveDeadlineSeconds: podspec.ActiveDeadline(podspec.DataBytes(c)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: jobPodLabels(c, "etcd-recover")},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					SecurityContext:              podspec.PodSecurity(),
					InitContainers:               []corev1.Container{etcdCtr},
					Containers:                   []corev1.Container{wait},
					Volumes: []corev1.Volume{{Name: dataVolume, VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvcName(c, ordinal)},
					}}},
					Tolerations:  c.Spec.PodTemplate.Tolerations,
					NodeSelector: c.Spec.PodTemplate.NodeSelector,
					Affinity:     c.Spec.PodTemplate.Affinity,
				},
			},
		},
	}
}

// connectMembers opens a client to the members whose pods have an
// address; nil, with no error, when none has one.
func (r *Reconciler) connectMembers(ctx context.Context, s *scope, data memberData) (Members, error) {
	c := s.cluster
	var endpoints []string
	for i := range int(ptr.Deref(s.sts.Spec.Replicas, 0)) {
		if name := memberName(c, i); data.ips[memberHost(c, name)] != "" {
			endpoints = append(endpoints, memberClientURL(c, name))
		}
	}
	if len(endpoints) == 0 {
		return nil, nil
	}
	callCtx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	// No password: with auth on, etcd takes the user from the client
	// certificate's common name, root.
	cli, err := r.Connect(callCtx, etcd.Config{Endpoints: endpoints, TLS: s.tls, Dial: dialer(data.ips), Gate: r.Gate})
	if err != nil {
		return nil, fmt.Errorf("connecting to etcd: %w", err)
	}
	return cli, nil
}

// setRestore writes rs's status as change makes it, when it changes.
func (r *Reconciler) setRestore(ctx context.Context, rs *etcdv1alpha1.EtcdRestore, change func(*etcdv1alpha1.EtcdRestoreStatus)) error {
	before := rs.DeepCopy()
	change(&rs.Status)
	rs.Status.ObservedGeneration = rs.Generation
	readiness.Set(&rs.Status.Conditions, rs.Generation, rs.Status.ObservedGeneration, restoreReadiness(rs.Status.Conditions))
	if equality.Semantic.DeepEqual(before.Status, rs.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, rs, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("writing the status of EtcdRestore %s: %w", rs.Name, err)
	}
	return nil
}

// pendingRestoreStatus says that rs waits, and why.
func pendingRestoreStatus(st *etcdv1alpha1.EtcdRestoreStatus, rs *etcdv1alpha1.EtcdRestore, msg string) {
	st.Phase = etcdv1alpha1.RecoveryPending
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: etcdv1alpha1.RestoreComplete, Status: metav1.ConditionFalse,
		Reason: etcdv1alpha1.ReasonRestorePending, Message: msg, ObservedGeneration: rs.Generation})
}

// failRestoreStatus ends rs as failed.
func failRestoreStatus(st *etcdv1alpha1.EtcdRestoreStatus, rs *etcdv1alpha1.EtcdRestore, reason, msg string, now time.Time) {
	st.Phase = etcdv1alpha1.RecoveryFailed
	if st.CompletionTime == nil {
		st.CompletionTime = &metav1.Time{Time: now.Truncate(time.Second)}
	}
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: etcdv1alpha1.RestoreFailed, Status: metav1.ConditionTrue,
		Reason: reason, Message: msg, ObservedGeneration: rs.Generation})
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: etcdv1alpha1.RestoreComplete, Status: metav1.ConditionFalse,
		Reason: reason, Message: msg, ObservedGeneration: rs.Generation})
}

// restoresWaitingForCluster marks the restores of a cluster that does not
// exist as pending.
func (r *Reconciler) restoresWaitingForCluster(ctx context.Context, key client.ObjectKey) error {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	restores, err := r.restoresOf(ctx, c)
	if err != nil {
		return err
	}
	for i := range restores {
		rs := &restores[i]
		if restoreFinished(rs) || rs.DeletionTimestamp != nil {
			continue
		}
		if rs.Status.MembersStopped {
			// Its cluster is gone during the restore: so is what it restored.
			err = errors.Join(err, r.setRestore(ctx, rs, func(st *etcdv1alpha1.EtcdRestoreStatus) {
				failRestoreStatus(st, rs, etcdv1alpha1.ReasonRestoreFailed, fmt.Sprintf("EtcdCluster %s was deleted during the restore", key.Name), time.Now())
			}))
			continue
		}
		err = errors.Join(err, r.setRestore(ctx, rs, func(st *etcdv1alpha1.EtcdRestoreStatus) {
			pendingRestoreStatus(st, rs, fmt.Sprintf("EtcdCluster %s does not exist (yet)", key.Name))
		}))
	}
	return err
}
