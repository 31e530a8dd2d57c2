package etcdcluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/names"
	"github.com/tend-dev/tend/internal/podspec"
)

// The archive's verification: a Job restores the archive's base into a
// scratch etcd, replays the whole archive onto it, and compares the store
// with the live cluster's at the revision reached (HashKV and the key
// count, after compacting the scratch store to the live compaction). It
// runs every spec.archive.verification.interval, and when the annotation
// etcd.tend.dev/verify-archive takes a new value, only while the archive
// runs; its end goes into status.archive.verification and the condition
// ArchiveVerified.

// defaultVerifyInterval is spec.archive.verification.interval's default,
// as the CRD's.
const defaultVerifyInterval = 24 * time.Hour

// annotationVerifyRequest on a verification Job is the value of
// etcd.tend.dev/verify-archive it answers.
const annotationVerifyRequest = "etcd.tend.dev/verify-request"

// archiveVerifyJobName is the Job of the archive's verification.
func archiveVerifyJobName(c *etcdv1alpha1.EtcdCluster) string {
	return names.Child(c.Name, "-archive-verify", names.Job)
}

// verifyInterval is spec.archive.verification.interval with its default;
// 0 verifies on demand only.
func verifyInterval(a *etcdv1alpha1.ClusterArchive) time.Duration {
	if d := a.Verification.Interval; d != nil {
		return d.Duration
	}
	return defaultVerifyInterval
}

// verificationDue tells why the archive is to be verified now, or "": it
// never was since it stored its first segment (stored false: there is
// nothing but the base, which its own backup verified), prev, the last
// verification, is an interval old, or someone asked.
func verificationDue(c *etcdv1alpha1.EtcdCluster, prev *etcdv1alpha1.ArchiveVerificationStatus, stored bool, now time.Time) string {
	request := c.Annotations[etcdv1alpha1.AnnotationVerifyArchive]
	interval := verifyInterval(c.Spec.Archive)
	switch {
	case request != "" && (prev == nil || prev.Request != request):
		return fmt.Sprintf("%s is %q", etcdv1alpha1.AnnotationVerifyArchive, request)
	case interval <= 0:
		return ""
	case prev == nil || prev.Time == nil:
		if !stored {
			return ""
		}
		return "it was never verified"
	case now.Sub(prev.Time.Time) >= interval:
		return fmt.Sprintf("the last verification is older than %s", interval)
	case prev.Result == etcdv1alpha1.ReasonArchiveVerificationFailed && now.Sub(prev.Time.Time) >= verifyRetry:
		return fmt.Sprintf("the last verification could not run to the end, %s ago", verifyRetry)
	}
	return ""
}

// verifyRetry is how soon a verification that could not run to the end
// (the cluster or the store was unreachable, a restore stopped the
// members) is tried again, within the interval.
const verifyRetry = 10 * time.Minute

// archiveVerifyJob verifies c's archive from base (a Complete base backup
// of the archive's current epoch), answering request.
func archiveVerifyJob(c *etcdv1alpha1.EtcdCluster, base *etcdv1alpha1.EtcdBackup, request, agentImage string) *batchv1.Job {
	src := podspec.Destination(base.Spec.Destination, base.Namespace, base.Name, base.Spec.Compression).ReadOnly()
	scratch := []corev1.VolumeMount{{Name: "scratch", MountPath: podspec.ScratchDir}}
	fetched := podspec.ScratchDir + "/base.db"
	fetch := []string{"fetch", "--from=" + src.AgentURI, "--compression=" + string(base.Status.Artifact.Compression), "--out=" + fetched}
	if base.Status.Artifact.SHA256 != "" {
		fetch = append(fetch, "--sha256="+base.Status.Artifact.SHA256)
	}
	fetch = append(fetch, src.Args...)
	rp := &archiveReplay{loc: archiveLocation(c), owner: string(c.UID), verify: true}
	steps := replaySteps(c, rp, agentImage, fetched, "", scratch)
	replay := steps[len(steps)-1]
	conn, connMounts := connectionVolumes(c)
	replay.VolumeMounts = append(replay.VolumeMounts, connMounts...)
	volumes := slices.Concat([]corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}, conn, src.Volumes, rp.loc.ReadOnly().Volumes)
	job := &batchv1.Job{
		ObjectMeta: meta(c, archiveVerifyJobName(c)),
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](1),
			PodFailurePolicy:      podspec.PodFailurePolicy(agentapi.ExitTerminal),
			ActiveDeadlineSeconds: ptr.To(*podspec.ActiveDeadline(podspec.DataBytes(c)) + int64(replayDeadline/time.Second)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: jobPodLabels(c, "etcd-archive-verify")},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					SecurityContext:              podspec.PodSecurity(),
					InitContainers:               append([]corev1.Container{agentStep(agentImage, "fetch", fetch, src.Env, append(append([]corev1.VolumeMount{}, scratch...), src.Mounts...))}, steps[:len(steps)-1]...),
					Containers:                   []corev1.Container{replay},
					Volumes:                      volumes,
					Tolerations:                  c.Spec.PodTemplate.Tolerations,
					NodeSelector:                 c.Spec.PodTemplate.NodeSelector,
				},
			},
		},
	}
	job.Annotations = map[string]string{annotationVerifyRequest: request}
	return job
}

// verifyArchive starts the archive's verification when it is due, and
// records the end of the one under way. base is the archive's current
// base backup, Complete; st the status.archive this pass writes.
func (r *Reconciler) verifyArchive(ctx context.Context, s *scope, base *etcdv1alpha1.EtcdBackup, st *etcdv1alpha1.ArchiveStatus) error {
	c := s.cluster
	name := archiveVerifyJobName(c)
	job, err := r.ownedJob(ctx, c, name)
	if err != nil {
		return err
	}
	v := st.Verification
	if job != nil {
		state, msg := jobStateOf(job)
		switch state {
		case jobComplete, jobFailed:
			// A failed Job kept for its logs was read when it ended: its
			// pods are not listed again on every pass.
			if !alreadyRead(v, job) {
				st.Verification = r.verificationOf(ctx, job, state, msg, s.now)
				r.recordVerification(c, st.Verification)
			}
			// A failed Job stays for its logs until the next verification.
			if state == jobComplete {
				return r.deleteOwned(ctx, c, "Job", job)
			}
			v = st.Verification
		default:
			if v == nil {
				v = &etcdv1alpha1.ArchiveVerificationStatus{}
			}
			st.Verification = v.DeepCopy()
			st.Verification.Job = name
			return nil
		}
	}
	why := verificationDue(c, v, st.LastRevision > st.BaseRevision, s.now)
	if why == "" || base.Status.Artifact == nil {
		return nil
	}
	if job != nil {
		// The failed Job of the last verification: its logs were kept
		// until this one.
		if err := r.deleteOwned(ctx, c, "Job", job); err != nil {
			return err
		}
		return nil // the next pass makes the new one, once this one is gone
	}
	want := archiveVerifyJob(c, base, c.Annotations[etcdv1alpha1.AnnotationVerifyArchive], r.AgentImage)
	if err := r.createOwned(ctx, c, want); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	r.event(c, corev1.EventTypeNormal, "ArchiveVerifying", "Verify", "Job %s replays the archive onto %s and compares it with the cluster: %s", name, base.Name, why)
	if v == nil {
		v = &etcdv1alpha1.ArchiveVerificationStatus{}
	}
	st.Verification = v.DeepCopy()
	st.Verification.Job = name
	return nil
}

// verificationOf reads how the finished verification Job ended.
func (r *Reconciler) verificationOf(ctx context.Context, job *batchv1.Job, state jobState, msg string, now time.Time) *etcdv1alpha1.ArchiveVerificationStatus {
	v := &etcdv1alpha1.ArchiveVerificationStatus{Time: &metav1.Time{Time: now.Truncate(time.Second)}, Request: job.Annotations[annotationVerifyRequest]}
	if finished := jobFinishedAt(job); finished != nil {
		v.Time = finished
	}
	res, err := r.stepResult(ctx, job, stepReplay)
	switch {
	case err != nil && state == jobComplete:
		v.Message = fmt.Sprintf("Job %s completed, but its result cannot be read: %v", job.Name, err)
	case err != nil:
		v.Message = fmt.Sprintf("Job %s failed (%s); its pod's log says why", job.Name, msg)
	case res.Error != "":
		v.Message = res.Error
	}
	v.Result = etcdv1alpha1.ReasonArchiveVerificationFailed
	if res.Terminal {
		// The archive itself is wrong: a mismatch, a revision missing, a
		// segment that fails its checksum or is another's.
		v.Result = etcdv1alpha1.ReasonArchiveMismatch
	}
	if rep := res.Replayed; rep != nil {
		v.BaseRevision = rep.From
		if ver := rep.Verification; ver != nil {
			v.Revision = ver.Revision
			if ver.Matches && res.Error == "" && err == nil {
				v.Result = etcdv1alpha1.ReasonArchiveMatches
				v.Message = fmt.Sprintf("The archive replayed onto its base at revision %d (%d revisions from %d segments) equals member %s at revision %d: hash %d, %d keys",
					rep.From, rep.Revisions, rep.Segments, ver.LiveMember, ver.Revision, ver.Hash, ver.Keys)
			}
		}
	}
	return v
}

// alreadyRead tells whether v records the end of the finished Job job:
// the same request, ended at the same time.
func alreadyRead(v *etcdv1alpha1.ArchiveVerificationStatus, job *batchv1.Job) bool {
	finished := jobFinishedAt(job)
	return v != nil && v.Time != nil && finished != nil && v.Time.Equal(finished) && v.Request == job.Annotations[annotationVerifyRequest]
}

// jobFinishedAt is when a finished Job completed or failed.
func jobFinishedAt(job *batchv1.Job) *metav1.Time {
	for _, cond := range job.Status.Conditions {
		if (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) && cond.Status == corev1.ConditionTrue {
			t := cond.LastTransitionTime
			return &t
		}
	}
	return nil
}

// stepResult reads the Result of the container ctr of job's last pod that
// ended, succeeded or failed: a failed step's result says why.
func (r *Reconciler) stepResult(ctx context.Context, job *batchv1.Job, ctr string) (agentapi.Result, error) {
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return agentapi.Result{}, fmt.Errorf("listing the pods of Job %s: %w", job.Name, err)
	}
	var last *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if !metav1.IsControlledBy(p, job) || (p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed) {
			continue
		}
		if last == nil || last.CreationTimestamp.Before(&p.CreationTimestamp) {
			last = p
		}
	}
	if last == nil {
		return agentapi.Result{}, fmt.Errorf("no pod of Job %s ended", job.Name)
	}
	if r, ok, err := podResult(last, ctr); ok {
		return r, err
	}
	return agentapi.Result{}, fmt.Errorf("the step %s of Job %s did not end", ctr, job.Name)
}

// recordVerification tells, in an Event, how a verification ended.
func (r *Reconciler) recordVerification(c *etcdv1alpha1.EtcdCluster, v *etcdv1alpha1.ArchiveVerificationStatus) {
	if v.Result == etcdv1alpha1.ReasonArchiveMatches {
		r.event(c, corev1.EventTypeNormal, "ArchiveVerified", "Verify", "%s", v.Message)
		return
	}
	r.event(c, corev1.EventTypeWarning, "ArchiveVerificationFailed", "Verify", "%s", v.Message)
}

// archiveVerifiedCondition is the ArchiveVerified condition of st; ok is
// false before the first verification ended.
func archiveVerifiedCondition(st *etcdv1alpha1.ArchiveStatus) (status metav1.ConditionStatus, reason, message string, ok bool) {
	if st == nil || st.Verification == nil || st.Verification.Time == nil {
		return "", "", "", false
	}
	v := st.Verification
	status = metav1.ConditionFalse
	if v.Result == etcdv1alpha1.ReasonArchiveMatches {
		status = metav1.ConditionTrue
	}
	return status, v.Result, v.Message, true
}
