package etcdcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tend-dev/tend/internal/etcdnames"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/names"
	"github.com/tend-dev/tend/internal/podspec"
)

// restoreDir is where etcdutl restores, inside the member's volume, before
// the agent moves the data into place (internal/agent: restore install).
const restoreDir = dataDir + "/.tend-restore"

// restoreSource is the file a new cluster starts from.
type restoreSource struct {
	loc         podspec.Location
	sha256      string
	compression etcdv1alpha1.Compression
	from        etcdv1alpha1.RestoredFrom
	// replay, when set, is the archive replayed after the backup: a
	// restore to a point (restore_point.go).
	replay *archiveReplay
}

// restoreJobName is the Job that restores the i-th member's data.
func restoreJobName(c *etcdv1alpha1.EtcdCluster, i int) string {
	return names.Child(c.Name, "-restore-"+strconv.Itoa(i), names.Job)
}

// restoreJob restores the i-th member's data from src into its volume
// claim: the agent fetches the file and checks it, the etcdutl of the
// cluster's version restores it as this member of the new cluster, with
// the revision bumped, and the agent moves the data into place. Each step
// finds its own earlier work done, so a retried pod is safe.
func restoreJob(c *etcdv1alpha1.EtcdCluster, i int, src *restoreSource, agentImage string) *batchv1.Job {
	return memberRestoreJob(c, i, src, agentImage, restoreRun{job: restoreJobName(c, i), id: string(c.UID)})
}

// restoreRun names one restore of a cluster's members: the Job of each
// member is <job>, and id is both the agent's restore id (a retried pod
// finds its own work done) and etcd's initial cluster token, from which
// the new cluster ID comes. replace moves the member's existing data
// aside (an in-place restore).
type restoreRun struct {
	job, id string
	replace bool
}

// memberRestoreJob is restoreJob for any restore run.
func memberRestoreJob(c *etcdv1alpha1.EtcdCluster, i int, src *restoreSource, agentImage string, run restoreRun) *batchv1.Job {
	member := memberName(c, i)
	members := make([]string, 0, replicas(c))
	for j := range int(replicas(c)) {
		members = append(members, memberName(c, j))
	}
	loc := src.loc.ReadOnly()
	id := run.id
	prepare := []string{"restore", "prepare", "--data-dir=" + dataDir, "--id=" + id}
	if run.replace {
		prepare = append(prepare, "--replace")
	}
	mounts := []corev1.VolumeMount{{Name: dataVolume, MountPath: dataDir}, {Name: "scratch", MountPath: podspec.ScratchDir}}
	tend := func(name string, args []string, env []corev1.EnvVar, extra []corev1.VolumeMount) corev1.Container {
		return agentStep(agentImage, name, args, env, append(append([]corev1.VolumeMount{}, mounts...), extra...))
	}
	snapshot := podspec.ScratchDir + "/snapshot.db"
	fetched := snapshot
	if src.replay != nil {
		fetched = podspec.ScratchDir + "/base.db"
	}
	fetch := []string{"fetch", "--from=" + src.loc.AgentURI, "--compression=" + string(cmp.Or(src.compression, etcdv1alpha1.CompressionNone)),
		"--out=" + fetched}
	if src.sha256 != "" {
		fetch = append(fetch, "--sha256="+src.sha256)
	}
	fetch = append(fetch, loc.Args...)
	etcdutl := corev1.Container{
		Name:            "restore",
		Image:           etcdnames.Image(c),
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{"/usr/local/bin/etcdutl", "snapshot", "restore", snapshot,
			"--name=" + member,
			"--initial-cluster=" + initialCluster(c, members),
			"--initial-cluster-token=" + id,
			"--initial-advertise-peer-urls=" + peerURL(c, member),
			"--data-dir=" + restoreDir,
			"--bump-revision=" + strconv.Itoa(bumpRevision),
			"--mark-compacted",
		},
		VolumeMounts:    mounts,
		SecurityContext: podspec.ContainerSecurity(),
	}
	volumes := append([]corev1.Volume{
		{Name: dataVolume, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvcName(c, i)}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}, loc.Volumes...)
	steps := []corev1.Container{tend("prepare", prepare, nil, nil), tend("fetch", fetch, loc.Env, loc.Mounts)}
	deadline := podspec.ActiveDeadline(podspec.DataBytes(c))
	if rp := src.replay; rp != nil {
		steps = append(steps, replaySteps(c, rp, agentImage, fetched, snapshot, mounts)...)
		volumes = append(volumes, rp.loc.ReadOnly().Volumes...)
		deadline = ptr.To(*deadline + int64(replayDeadline/time.Second))
	}
	return &batchv1.Job{
		ObjectMeta: meta(c, run.job),
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](2),
			PodFailurePolicy:      podspec.PodFailurePolicy(agentapi.ExitTerminal),
			ActiveDeadlineSeconds: deadline,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: jobPodLabels(c, "etcd-restore")},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					SecurityContext:              podspec.PodSecurity(),
					InitContainers:               append(steps, etcdutl),
					Containers:                   []corev1.Container{tend("install", []string{"restore", "install", "--data-dir=" + dataDir, "--id=" + id}, nil, nil)},
					Volumes:                      volumes,
					Tolerations:                  c.Spec.PodTemplate.Tolerations,
					NodeSelector:                 c.Spec.PodTemplate.NodeSelector,
					Affinity:                     c.Spec.PodTemplate.Affinity,
				},
			},
		},
	}
}

// resolveRestoreSource finds the file the cluster starts from. A backup
// that is not Complete yet makes the restore wait; one that failed stops it.
// With an archive, the members replay it after the backup, to the target.
func (r *Reconciler) resolveRestoreSource(ctx context.Context, c *etcdv1alpha1.EtcdCluster) (*restoreSource, *restoreProgress, error) {
	spec := c.Spec.Bootstrap.Restore
	src, progress, err := r.resolveSource(ctx, c, spec.BackupRef, spec.Source)
	if src == nil || spec.Archive == nil {
		return src, progress, err
	}
	t := spec.Target
	if t != nil && t.Revision > 0 && src.from.Revision > t.Revision {
		return nil, &restoreProgress{reason: etcdv1alpha1.ReasonRestoreFailed, failed: true, message: fmt.Sprintf(
			"The backup is at revision %d, after the target %s: restore an older base backup of the archive", src.from.Revision, targetString(t))}, nil
	}
	loc := archiveSourceLocation(spec.Archive)
	// The archive's manifest names its owner, the source cluster; every
	// segment must be that owner's.
	src.replay = &archiveReplay{loc: loc, target: t}
	src.from.Archive = &etcdv1alpha1.ArchiveReplayed{Location: loc.URI, Target: targetString(t)}
	return src, nil, nil
}

// archiveSourceLocation is the folder of a bootstrap's archive.
func archiveSourceLocation(a *etcdv1alpha1.ArchiveSource) podspec.Location {
	if a.S3 != nil {
		return podspec.S3(a.S3, strings.TrimSuffix(a.S3.Key, "/"))
	}
	return podspec.ArchiveVolume(a.Volume, a.Volume.Path, true)
}

// resolveSource finds the file of a restore of c: an EtcdBackup in c's
// namespace, or an explicit source.
func (r *Reconciler) resolveSource(ctx context.Context, c *etcdv1alpha1.EtcdCluster, backupRef *corev1.LocalObjectReference, source *etcdv1alpha1.RestoreSource) (*restoreSource, *restoreProgress, error) {
	namespace := c.Namespace
	if source != nil {
		loc := podspec.Source(*source)
		return &restoreSource{loc: loc, sha256: source.SHA256, compression: source.Compression,
			from: etcdv1alpha1.RestoredFrom{URI: loc.URI}}, nil, nil
	}
	name := backupRef.Name
	b := &etcdv1alpha1.EtcdBackup{}
	err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, b)
	if apierrors.IsNotFound(err) {
		return nil, &restoreProgress{reason: etcdv1alpha1.ReasonWaitingForBackup,
			message: fmt.Sprintf("EtcdBackup %s does not exist; create it, or restore from another backup", name)}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading EtcdBackup %s: %w", name, err)
	}
	if sourceDeleting(c, b) {
		return nil, &restoreProgress{reason: etcdv1alpha1.ReasonRestoreFailed, failed: true,
			message: fmt.Sprintf("EtcdBackup %s is being deleted, and its file with it: restore from another backup", name)}, nil
	}
	if f := apimeta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.BackupFailed); f != nil && f.Status == metav1.ConditionTrue {
		return nil, &restoreProgress{reason: etcdv1alpha1.ReasonRestoreFailed, failed: true,
			message: fmt.Sprintf("EtcdBackup %s failed (%s): restore from another backup", name, f.Message)}, nil
	}
	if !apimeta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.BackupComplete) || b.Status.Artifact == nil {
		return nil, &restoreProgress{reason: etcdv1alpha1.ReasonWaitingForBackup,
			message: fmt.Sprintf("Waiting for EtcdBackup %s to be Complete", name)}, nil
	}
	src := &restoreSource{
		loc:         podspec.Destination(b.Spec.Destination, b.Namespace, b.Name, b.Spec.Compression),
		sha256:      b.Status.Artifact.SHA256,
		compression: b.Status.Artifact.Compression,
		from:        etcdv1alpha1.RestoredFrom{Backup: name, URI: b.Status.Artifact.URI},
	}
	if b.Status.Snapshot != nil {
		src.from.Revision = b.Status.Snapshot.Revision
	}
	return src, nil, nil
}

// reconcileRestore fills every member's volume from the backup before the
// StatefulSet exists: one volume claim and one Job per member. It tells
// whether all are done.
func (r *Reconciler) reconcileRestore(ctx context.Context, s *scope) (bool, error) {
	c := s.cluster
	src, progress, err := r.resolveRestoreSource(ctx, c)
	if err != nil {
		return false, err
	}
	if progress != nil {
		s.obs.restore = progress
		if !progress.failed {
			s.requeueAfter(requeueSteady)
		}
		return false, nil
	}
	if ref := c.Spec.Bootstrap.Restore.BackupRef; ref != nil {
		if err := r.holdBackup(ctx, c, ref.Name); err != nil {
			return false, err
		}
	}
	pvcs, err := r.claimsOf(ctx, c)
	if err != nil {
		return false, err
	}
	got, err := r.restoreVolumes(ctx, volumeRestore{
		cluster: c, src: src, strangersWait: true,
		run: func(i int) restoreRun { return restoreRun{job: restoreJobName(c, i), id: string(c.UID)} },
		jobOf: func(ctx context.Context, name string) (*batchv1.Job, error) {
			job, err := r.ownedJob(ctx, c, name)
			if job == nil && err == nil {
				job = &batchv1.Job{}
			}
			return job, err
		},
	}, pvcs)
	if err != nil {
		return false, err
	}
	for _, i := range got.started {
		r.event(c, corev1.EventTypeNormal, "RestoreStarted", "Restore", "Restoring member %s from %s", memberName(c, i), src.from.URI)
	}
	done, failed, foreign := got.done, got.failed, got.waiting
	from := src.from
	switch {
	case len(foreign) > 0:
		s.obs.restore = &restoreProgress{reason: etcdv1alpha1.ReasonRestoring, from: &from,
			message: "The restore waits: " + strings.Join(foreign, "; ")}
		s.requeueAfter(requeueSteady)
		return false, nil
	case len(failed) > 0:
		if err := r.releaseBackups(ctx, c); err != nil {
			return false, err
		}
		s.obs.restore = &restoreProgress{reason: etcdv1alpha1.ReasonRestoreFailed, failed: true, from: &from, message: fmt.Sprintf(
			"Restoring from %s failed: %s. The Jobs' pod logs say why; delete the EtcdCluster and create it again once the cause is fixed",
			from.URI, strings.Join(failed, "; "))}
		return false, nil
	case len(done) < int(replicas(c)):
		s.obs.restore = &restoreProgress{reason: etcdv1alpha1.ReasonRestoring, from: &from,
			message: fmt.Sprintf("Restoring the members' data from %s: %d of %d done", from.URI, len(done), replicas(c))}
		return false, nil
	}
	if src.replay != nil {
		replayed, err := r.replayedTo(ctx, src, done)
		if errors.Is(err, errReplayDiffers) {
			s.obs.restore = &restoreProgress{reason: etcdv1alpha1.ReasonRestoreFailed, failed: true, from: &from, message: err.Error() +
				": delete the EtcdCluster and create it again with a revision as its target"}
			return false, r.releaseBackups(ctx, c)
		}
		if err != nil {
			return false, err
		}
		from.Archive = replayed
	}
	from.Time = &metav1.Time{Time: s.now.Truncate(1e9)}
	s.obs.restore = &restoreProgress{reason: etcdv1alpha1.ReasonRestoredFromBackup, done: true, from: &from}
	r.event(c, corev1.EventTypeNormal, "Restored", "Restore", "Restored every member's data from %s%s (revision %d, bumped by %d)", from.URI, replayedWords(&from), restoredRevision(&from), bumpRevision)
	for _, job := range done {
		if err := r.deleteDoneJob(ctx, c, job); err != nil {
			return false, err
		}
	}
	return true, r.releaseBackups(ctx, c)
}

// recordRestored reports the restore of a new cluster as done, once its
// StatefulSet exists (it is made only after every member's data was
// restored), for a status that missed the pass that finished it.
func (r *Reconciler) recordRestored(ctx context.Context, s *scope) error {
	c := s.cluster
	src, progress, err := r.resolveRestoreSource(ctx, c)
	if err != nil {
		return err
	}
	from := etcdv1alpha1.RestoredFrom{URI: "(the backup is gone)"}
	switch {
	case src != nil:
		from = src.from
	case progress != nil && c.Spec.Bootstrap.Restore.BackupRef != nil:
		from.Backup = c.Spec.Bootstrap.Restore.BackupRef.Name
	}
	if prev := c.Status.RestoredFrom; prev != nil && prev.Archive != nil {
		// What the replay reached was read from Jobs that are gone.
		from.Archive = prev.Archive
	}
	from.Time = &metav1.Time{Time: s.sts.CreationTimestamp.Time}
	if from.Time.IsZero() {
		from.Time.Time = s.now.Truncate(time.Second)
	}
	s.obs.restore = &restoreProgress{reason: etcdv1alpha1.ReasonRestoredFromBackup, done: true, from: &from}
	return r.releaseBackups(ctx, c)
}
