package etcdcluster

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// volumeRestore is one restore of every member's volume from a backup,
// one Job per member: a new cluster's, before its StatefulSet exists
// (restore.go), or a stopped cluster's, in place (an EtcdRestore,
// op_recovery.go).
type volumeRestore struct {
	// cluster is what the Jobs are built for; src the backup's file.
	cluster *etcdv1alpha1.EtcdCluster
	src     *restoreSource
	// run is member i's restore run: its Job's name, the restore's id.
	run func(i int) restoreRun
	// jobOf reads the Job of a run: an empty Job when it is to be made,
	// nil (and no error) while an earlier restore's Job of that name goes.
	jobOf func(ctx context.Context, name string) (*batchv1.Job, error)
	// mark, when set, marks a new Job as the restore's.
	mark func(*batchv1.Job) *batchv1.Job
	// strangersWait: a Job of a run's name that Tend did not make for
	// this cluster makes the restore wait (it is reported), rather than
	// fail the pass.
	strangersWait bool
}

// volumesRestored is how far a volumeRestore got.
type volumesRestored struct {
	// done are the Jobs that completed; failed and waiting say, per
	// member, which Job failed and why, or why it cannot run.
	done            []*batchv1.Job
	failed, waiting []string
	// started are the members whose Job this pass made.
	started []int
}

// restoreVolumes makes sure every member has a volume claim of its own,
// unmarked (the restored members get new IDs, and are marked anew once
// seen healthy), and a restore Job, and reads how far the Jobs got.
func (r *Reconciler) restoreVolumes(ctx context.Context, vr volumeRestore, pvcs []corev1.PersistentVolumeClaim) (volumesRestored, error) {
	c := vr.cluster
	var out volumesRestored
	for i := range int(replicas(c)) {
		if err := r.claimForRestore(ctx, c, i, pvcs); err != nil {
			return out, err
		}
		run := vr.run(i)
		job, err := vr.jobOf(ctx, run.job)
		switch {
		case errors.Is(err, errNotOurs) && vr.strangersWait:
			// Another's Job of that name: its result says nothing of this
			// member's volume.
			out.waiting = append(out.waiting, err.Error())
			continue
		case err != nil || job == nil:
			return out, err
		case job.Name == "":
			job = memberRestoreJob(c, i, vr.src, r.AgentImage, run)
			if vr.mark != nil {
				job = vr.mark(job)
			}
			if err := r.createOwned(ctx, c, job); err != nil && !apierrors.IsAlreadyExists(err) {
				return out, err
			}
			out.started = append(out.started, i)
			continue
		}
		switch state, msg := jobStateOf(job); state {
		case jobComplete:
			out.done = append(out.done, job)
		case jobFailed:
			out.failed = append(out.failed, fmt.Sprintf("%s (%s)", job.Name, msg))
		}
	}
	return out, nil
}

// claimForRestore makes member i's volume claim, or takes the member-ID
// mark off the one it has. A claim of that name that is not this
// cluster's stops the restore.
func (r *Reconciler) claimForRestore(ctx context.Context, c *etcdv1alpha1.EtcdCluster, i int, pvcs []corev1.PersistentVolumeClaim) error {
	var pvc *corev1.PersistentVolumeClaim
	for j := range pvcs {
		if pvcs[j].Name == pvcName(c, i) {
			pvc = &pvcs[j]
		}
	}
	if pvc == nil {
		if err := r.Create(ctx, memberClaim(c, i)); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating volume claim %s: %w", pvcName(c, i), err)
		}
		return nil
	}
	if _, ours := isMemberPVC(c, pvc); !ours {
		return notOurs(c, "PersistentVolumeClaim", pvc)
	}
	if pvc.Annotations[annotationMemberID] == "" {
		return nil
	}
	patch := client.MergeFrom(pvc.DeepCopy())
	delete(pvc.Annotations, annotationMemberID)
	if err := r.Patch(ctx, pvc, patch); err != nil {
		return fmt.Errorf("unmarking volume claim %s: %w", pvc.Name, err)
	}
	return nil
}
