package etcdcluster

import (
	"fmt"
	"path"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/names"
	"github.com/tend-dev/tend/internal/podspec"
)

// The continuous archive (spec.archive): one `tend archive` pod, run by a
// Deployment of the cluster, stores every revision after a base backup
// that Tend takes for it (an EtcdBackup of the cluster, one per epoch).
// The epoch moves on, and a new base is taken, when the archive broke
// (etcd compacted past it) or a restore or recovery changed the history.

// archiveStatusPort is where the agent serves its state and figures.
const archiveStatusPort = 8080

// Defaults of spec.archive, as the CRD's.
const (
	defaultSegmentMaxAge   = 10 * time.Second
	defaultSegmentMaxBytes = 8 << 20
	defaultCompactionHold  = time.Hour
)

// archiveDeploymentName is the Deployment of the archive's agent: at most
// 60 characters for a cluster name of 52.
func archiveDeploymentName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-archive" }

// archiveBaseName is the base backup of the archive's epoch: seq 0 is the
// one the epoch starts from, the others those that spec.archive.retention
// takes after it.
func archiveBaseName(c *etcdv1alpha1.EtcdCluster, epoch int32, seq int) string {
	suffix := "-archive-base-" + strconv.Itoa(int(epoch))
	if seq > 0 {
		suffix += "-" + strconv.Itoa(seq)
	}
	return names.Child(c.Name, suffix, names.EtcdBackup)
}

// archiveLocation is the archive's folder: a prefix in the bucket, or a
// directory on the claim, of the namespace, the name and the UID.
func archiveLocation(c *etcdv1alpha1.EtcdCluster) podspec.Location {
	a := c.Spec.Archive
	rel := c.Namespace + "/" + c.Name + "/archive-" + string(c.UID)
	if s3 := a.Destination.S3; s3 != nil {
		return podspec.S3(s3, s3.Prefix+rel)
	}
	return podspec.ArchiveVolume(a.Destination.Volume, path.Join(a.Destination.Volume.Path, rel), false)
}

// archiveBaseBackup is the base backup seq of epoch: a verified backup of
// the cluster to spec.backup, owned by the cluster. Its file stays when
// the cluster goes (the archive's segments need it to be restored): the
// annotation etcd.tend.dev/keep-artifact keeps it, and the archive's
// retention takes that annotation off before it deletes a base it no
// longer needs, file and all.
func archiveBaseBackup(c *etcdv1alpha1.EtcdCluster, epoch int32, seq int) *etcdv1alpha1.EtcdBackup {
	b := finalBackup(c)
	b.ObjectMeta = metav1.ObjectMeta{
		Name: archiveBaseName(c, epoch, seq), Namespace: c.Namespace, Labels: b.Labels,
		Annotations: map[string]string{etcdv1alpha1.AnnotationKeepArtifact: "true"},
	}
	b.Labels[labelArchiveEpoch] = strconv.Itoa(int(epoch))
	b.Labels[labelArchiveBaseSeq] = strconv.Itoa(seq)
	b.Spec.ArtifactPolicy = etcdv1alpha1.ArtifactDelete
	return b
}

// labelArchiveEpoch marks a base backup with its epoch, and
// labelArchiveBaseSeq with its place among the epoch's bases.
const (
	labelArchiveEpoch   = "etcd.tend.dev/archive-epoch"
	labelArchiveBaseSeq = "etcd.tend.dev/archive-base-seq"
)

// archivePodLabels label the agent's pod: not the members' labels, so that
// the member pod cache, the Services and the budget never take it.
func archivePodLabels(c *etcdv1alpha1.EtcdCluster) map[string]string {
	l := jobPodLabels(c, "etcd-archive")
	l[labelClusterUID] = string(c.UID)
	return l
}

// archiveSettings are spec.archive's limits with their defaults.
func archiveSettings(a *etcdv1alpha1.ClusterArchive) (maxAge time.Duration, maxBytes int64, hold time.Duration) {
	maxAge, maxBytes, hold = defaultSegmentMaxAge, defaultSegmentMaxBytes, defaultCompactionHold
	if d := a.Segment.MaxAge; d != nil && d.Duration > 0 {
		maxAge = d.Duration
	}
	if a.Segment.MaxBytes > 0 {
		maxBytes = a.Segment.MaxBytes
	}
	if d := a.CompactionHold; d != nil {
		hold = d.Duration
	}
	return maxAge, maxBytes, hold
}

// archiveDeployment runs `tend archive` for c from the base backup at
// baseRevision, deleting the segments that hold no revision after
// pruneBefore (0: none; see spec.archive.retention): one pod, replaced only after the old one is gone
// (Recreate: two agents never write at once), with no Kubernetes API
// access, under the restricted pod security. running false keeps it at
// no pod, while a restore or recovery changes the history.
func archiveDeployment(c *etcdv1alpha1.EtcdCluster, baseRevision, pruneBefore int64, agentImage string, running bool) *appsv1.Deployment {
	a := c.Spec.Archive
	loc := archiveLocation(c)
	maxAge, maxBytes, _ := archiveSettings(a)
	compression := a.Compression
	if compression == "" {
		compression = etcdv1alpha1.CompressionZstd
	}
	args := append([]string{"archive",
		"--connection-dir=" + podspec.ConnectionDir, "--client-tls-dir=" + podspec.ClientTLSDir,
		"--to=" + loc.AgentURI, "--owner=" + string(c.UID),
		"--base-revision=" + strconv.FormatInt(baseRevision, 10),
		"--compression=" + string(compression),
		"--segment-max-age=" + maxAge.String(),
		"--segment-max-bytes=" + strconv.FormatInt(maxBytes, 10),
		"--status-address=:" + strconv.Itoa(archiveStatusPort),
	}, loc.Args...)
	if pruneBefore > 0 {
		args = append(args, "--prune-before="+strconv.FormatInt(pruneBefore, 10))
	}
	volumes, mounts := connectionVolumes(c)
	volumes, mounts = append(volumes, loc.Volumes...), append(mounts, loc.Mounts...)
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("status")}},
			PeriodSeconds: 10, FailureThreshold: 3, TimeoutSeconds: 5,
		}
	}
	podLabels := archivePodLabels(c)
	replicas := int32(0)
	if running {
		replicas = 1
	}
	d := &appsv1.Deployment{
		ObjectMeta: meta(c, archiveDeploymentName(c)),
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					SecurityContext:              podspec.PodSecurity(),
					// The agent stores what it received on SIGTERM.
					TerminationGracePeriodSeconds: ptr.To[int64](30),
					Containers: []corev1.Container{{
						Name:            "archive",
						Image:           agentImage,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         append([]string{podspec.AgentBinary}, args...),
						Env:             loc.Env,
						Ports:           []corev1.ContainerPort{{Name: "status", ContainerPort: archiveStatusPort, Protocol: corev1.ProtocolTCP}},
						ReadinessProbe:  probe("/readyz"),
						LivenessProbe:   probe("/healthz"),
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
						}},
						VolumeMounts:    mounts,
						SecurityContext: podspec.ContainerSecurity(),
					}},
					Volumes:      volumes,
					Tolerations:  c.Spec.PodTemplate.Tolerations,
					NodeSelector: c.Spec.PodTemplate.NodeSelector,
				},
			},
		},
	}
	// The apiserver fills in defaults of the template, so the Deployment
	// read back never equals the one built: the hash of the built spec,
	// kept on it, tells whether it must change.
	d.Annotations = map[string]string{annotationArchiveSpec: hashOf(d.Spec)}
	return d
}

// annotationArchiveSpec holds the hash of the archive Deployment's spec as
// Tend built it.
const annotationArchiveSpec = "etcd.tend.dev/archive-spec"

// archiveNeedsNewBase tells why the archive must start again from a new
// base, or "": its agent found the history compacted past its next
// revision, or a restore or recovery completed after the base was taken.
// It is the one place that decides it, from what the pass knows: the base
// before the agent is read, the agent's state after.
func archiveNeedsNewBase(base *etcdv1alpha1.EtcdBackup, state *agentapi.ArchiveState, recovery *etcdv1alpha1.RecoveryStatus) string {
	if state != nil && state.Phase == agentapi.ArchiveBroken && state.Cause == agentapi.ArchiveCauseCompacted {
		return "etcd compacted its history past the archive's next revision"
	}
	if base != nil && recovery != nil && recovery.CompletedAt != nil && base.CreationTimestamp.Before(recovery.CompletedAt) {
		return fmt.Sprintf("the %s changed the history after the base backup %s", recoveryWord(recovery), base.Name)
	}
	return ""
}

// recoveryWord names a recovery in a message.
func recoveryWord(rs *etcdv1alpha1.RecoveryStatus) string {
	if rs.Kind == etcdv1alpha1.RecoveryFromBackup && rs.Restore != "" {
		return "restore"
	}
	return "quorum-loss recovery"
}

// baseProgress reads a base backup: its revision once it is done, or why
// it is not ready.
func baseProgress(b *etcdv1alpha1.EtcdBackup) (rev int64, failed bool, msg string) {
	state, why := finalBackupState(b)
	switch {
	case state == backupFailed:
		return 0, true, fmt.Sprintf("the base backup %s failed: %s", b.Name, why)
	case state == backupRunning || b.Status.Snapshot == nil:
		return 0, false, fmt.Sprintf("waiting for the base backup %s", b.Name)
	}
	return b.Status.Snapshot.Revision, false, ""
}

// archiveRetryFailedBase is how long after a base backup failed Tend takes
// another: a destination that refuses backups is not hammered.
const archiveRetryFailedBase = 10 * time.Minute

// failedAt is when b failed, as its Failed condition says.
func failedAt(b *etcdv1alpha1.EtcdBackup) time.Time {
	if f := apimeta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.BackupFailed); f != nil {
		return f.LastTransitionTime.Time
	}
	return b.CreationTimestamp.Time
}

// archiveFloor is the revision that Tend's compaction keeps the history
// from for the archive (0: none): the one after its last stored revision
// (or after its base, before it stored any), while that was received less
// than spec.archive.compactionHold ago.
func archiveFloor(c *etcdv1alpha1.EtcdCluster, now time.Time) int64 {
	a, st := c.Spec.Archive, c.Status.Archive
	if a == nil || st == nil || st.BaseRevision == 0 {
		return 0
	}
	_, _, hold := archiveSettings(a)
	if hold <= 0 {
		return 0
	}
	last, at := st.LastRevision, st.LastTime
	if last == 0 {
		last = st.BaseRevision
	}
	if at != nil && now.Sub(at.Time) > hold {
		return 0
	}
	return last + 1
}

// archiveStatusOf is the status of the archive from its agent's state,
// on top of what was known.
func archiveStatusOf(prev *etcdv1alpha1.ArchiveStatus, loc string, base string, baseRev int64, epoch int32, state *agentapi.ArchiveState) *etcdv1alpha1.ArchiveStatus {
	st := &etcdv1alpha1.ArchiveStatus{Location: loc, BaseBackup: base, BaseRevision: baseRev, Epoch: epoch}
	if prev != nil {
		// The last verification stays until the next, and what retention
		// pruned stays pruned, whatever the epoch.
		st.Verification, st.PrunedThrough = prev.Verification, prev.PrunedThrough
	}
	if prev != nil && prev.Epoch == epoch {
		st.FirstRevision, st.FirstTime = prev.FirstRevision, prev.FirstTime
		st.LastRevision, st.LastTime = prev.LastRevision, prev.LastTime
		st.Segments, st.Gaps = prev.Segments, prev.Gaps
	}
	if state == nil {
		return st
	}
	timeOf := func(t time.Time) *metav1.Time {
		if t.IsZero() {
			return nil
		}
		return &metav1.Time{Time: t.Truncate(time.Second)}
	}
	st.FirstRevision, st.FirstTime = state.FirstRevision, timeOf(state.FirstTime)
	st.LastRevision, st.LastTime = state.LastRevision, timeOf(state.LastTime)
	st.LagSeconds = int64(state.LagSeconds)
	st.Segments = int32(state.Segments)
	st.Gaps = nil
	gaps := state.Gaps
	if len(gaps) > 10 {
		gaps = gaps[len(gaps)-10:]
	}
	for _, g := range gaps {
		st.Gaps = append(st.Gaps, etcdv1alpha1.ArchiveGap{From: g.From, To: g.To, Reason: g.Reason})
	}
	return st
}
