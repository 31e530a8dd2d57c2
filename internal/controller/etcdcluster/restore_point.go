package etcdcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcdnames"
	"github.com/tend-dev/tend/internal/podspec"
)

// A restore to a point (a target) restores a base backup and then replays
// a continuous archive onto it: in each member's restore Job, the base is
// restored into a scratch etcd that runs beside the Job's steps on the
// pod's loopback, `tend replay` applies the archive's revisions up to the
// target, each as one transaction so that revisions keep their numbers,
// and saves the store as a snapshot; the usual steps then restore that
// snapshot into the member's volume, with the revision bumped and the
// history before it marked compacted.

// archiveReplay is what a restore to a point replays after its base.
type archiveReplay struct {
	// loc is the archive's folder; owner the UID its manifest must name
	// ("" takes the one it names).
	loc   podspec.Location
	owner string
	// target is how far; nil is every revision the archive holds.
	target *etcdv1alpha1.RestoreTarget
	// verify compares the replayed store with the live cluster's (the
	// archive's verification), through the cluster's connection
	// ConfigMap and client certificate, which the caller mounts.
	verify bool
}

// The scratch etcd of a replay: on the pod's loopback, its data in the
// pod's scratch volume.
const (
	scratchEtcdName    = "replay"
	scratchEtcdClient  = "http://127.0.0.1:2379"
	scratchEtcdPeer    = "http://127.0.0.1:2380"
	scratchEtcdMetrics = "http://127.0.0.1:2381"
	// The replay applies a revision as one transaction: the scratch etcd
	// takes one as large as etcd's largest request.
	scratchMaxTxnOps      = "100000"
	scratchMaxRequestSize = "134217728"
)

var scratchEtcdDir = path.Join(podspec.ScratchDir, "replay-etcd")

// replayDeadline is what a replay adds to a restore Job's deadline: at the
// measured 4,000 revisions a second, half an hour replays seven million.
const replayDeadline = 30 * time.Minute

// targetString names a target in messages and in status.
func targetString(t *etcdv1alpha1.RestoreTarget) string {
	switch {
	case t != nil && t.Revision > 0:
		return "revision " + strconv.FormatInt(t.Revision, 10)
	case t != nil && t.Time != nil:
		return "time " + t.Time.UTC().Format(time.RFC3339)
	}
	return "latest"
}

// replaySteps are the containers of a Job that replays the archive onto
// the base fetched to base: the base restored for the scratch etcd, the
// scratch etcd (a native sidecar, stopped by the kubelet when the Job's
// last step ends), and the replay, which saves the store to out (unless
// out is empty).
func replaySteps(c *etcdv1alpha1.EtcdCluster, rp *archiveReplay, agentImage, base, out string, mounts []corev1.VolumeMount) []corev1.Container {
	image := etcdnames.Image(c)
	etcdStep := func(name string, cmd []string) corev1.Container {
		return corev1.Container{Name: name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent, Command: cmd,
			VolumeMounts: mounts, SecurityContext: podspec.ContainerSecurity()}
	}
	restoreBase := etcdStep("restore-base", []string{"/usr/local/bin/etcdutl", "snapshot", "restore", base,
		"--name=" + scratchEtcdName, "--initial-cluster=" + scratchEtcdName + "=" + scratchEtcdPeer,
		"--initial-advertise-peer-urls=" + scratchEtcdPeer, "--data-dir=" + scratchEtcdDir})
	server := etcdStep("scratch-etcd", []string{"/usr/local/bin/etcd", "--name=" + scratchEtcdName, "--data-dir=" + scratchEtcdDir,
		"--listen-client-urls=" + scratchEtcdClient, "--advertise-client-urls=" + scratchEtcdClient,
		"--listen-peer-urls=" + scratchEtcdPeer, "--initial-advertise-peer-urls=" + scratchEtcdPeer,
		"--initial-cluster=" + scratchEtcdName + "=" + scratchEtcdPeer, "--listen-metrics-urls=" + scratchEtcdMetrics,
		"--max-txn-ops=" + scratchMaxTxnOps, "--max-request-bytes=" + scratchMaxRequestSize,
		"--quota-backend-bytes=" + strconv.FormatInt(quotaOf(c), 10),
		// Throwaway data: a crash loses nothing that the Job does not
		// make again.
		"--unsafe-no-fsync"})
	server.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	args := []string{"replay", "--from=" + rp.loc.AgentURI, "--local-endpoint=" + scratchEtcdClient}
	if out != "" {
		args = append(args, "--out="+out)
	}
	if rp.verify {
		args = append(args, "--verify", "--connection-dir="+podspec.ConnectionDir, "--client-tls-dir="+podspec.ClientTLSDir)
	}
	if rp.owner != "" {
		args = append(args, "--owner="+rp.owner)
	}
	if t := rp.target; t != nil && t.Revision > 0 {
		args = append(args, "--to-revision="+strconv.FormatInt(t.Revision, 10))
	} else if t != nil && t.Time != nil {
		args = append(args, "--to-time="+t.Time.UTC().Format(time.RFC3339))
	}
	args = append(args, rp.loc.Args...)
	env := append([]corev1.EnvVar{}, rp.loc.Env...)
	if c.Spec.Auth.Enabled {
		// The base holds the cluster's users: the replay logs in as root.
		env = append(env, rootPasswordEnv(c))
	}
	replay := agentStep(agentImage, stepReplay, args, env, append(append([]corev1.VolumeMount{}, mounts...), rp.loc.ReadOnly().Mounts...))
	return []corev1.Container{restoreBase, server, replay}
}

// stepReplay is the restore Job's container that replays the archive: its
// result says how far it got.
const stepReplay = "replay"

// resolveRestoreOf finds what the EtcdRestore rs restores: its backup, and,
// with a target, the cluster's archive after it. Without a backup named,
// the base is the newest of the archive's Complete base backups at or
// before the target. A target the archive has not stored yet makes the
// restore wait; one before every base, or a cluster without an archive,
// refuses it.
func (r *Reconciler) resolveRestoreOf(ctx context.Context, c *etcdv1alpha1.EtcdCluster, rs *etcdv1alpha1.EtcdRestore) (*restoreSource, *restoreProgress, error) {
	t := rs.Spec.Target
	if t == nil {
		return r.resolveSource(ctx, c, rs.Spec.BackupRef, rs.Spec.Source)
	}
	if c.Spec.Archive == nil {
		return nil, &restoreProgress{reason: etcdv1alpha1.ReasonRestoreFailed, failed: true, message: fmt.Sprintf(
			"EtcdRestore %s restores to %s, a point in EtcdCluster %s's continuous archive, but the cluster has no spec.archive", rs.Name, targetString(t), c.Name)}, nil
	}
	ref := rs.Spec.BackupRef
	if ref == nil && rs.Spec.Source == nil {
		base, progress, err := r.chooseBase(ctx, c, t)
		if base == nil {
			return nil, progress, err
		}
		ref = &corev1.LocalObjectReference{Name: base.Name}
	}
	src, progress, err := r.resolveSource(ctx, c, ref, rs.Spec.Source)
	if src == nil {
		return nil, progress, err
	}
	if t.Revision > 0 && src.from.Revision > t.Revision {
		return nil, &restoreProgress{reason: etcdv1alpha1.ReasonRestoreFailed, failed: true, message: fmt.Sprintf(
			"The base backup %s is at revision %d, after the target %s: name an older base, or leave backupRef out and Tend picks one", ref.Name, src.from.Revision, targetString(t))}, nil
	}
	if st := c.Status.Archive; st != nil && src.from.Revision < st.PrunedThrough {
		return nil, &restoreProgress{reason: etcdv1alpha1.ReasonRestoreFailed, failed: true, message: fmt.Sprintf(
			"The base backup %s is at revision %d, but the archive's retention deleted its revisions through %d: name a base at or after it, or leave backupRef out and Tend picks one", ref.Name, src.from.Revision, st.PrunedThrough)}, nil
	}
	if gap := gapCrossed(c.Status.Archive, src.from.Revision, t); gap != nil {
		return nil, &restoreProgress{reason: etcdv1alpha1.ReasonRestoreFailed, failed: true, message: fmt.Sprintf(
			"The archive lacks revisions %d to %d (%s), between the base at revision %d and the target %s: choose a target before revision %d, or at or after %d",
			gap.From, gap.To, gap.Reason, src.from.Revision, targetString(t), gap.From, gap.To)}, nil
	}
	if wait := archiveBehind(c.Status.Archive, t); wait != "" {
		return nil, &restoreProgress{reason: etcdv1alpha1.ReasonWaitingForBackup, message: wait}, nil
	}
	loc := archiveLocation(c)
	src.replay = &archiveReplay{loc: loc, owner: string(c.UID), target: t}
	src.from.Archive = &etcdv1alpha1.ArchiveReplayed{Location: loc.URI, Target: targetString(t)}
	return src, nil, nil
}

// gapCrossed is the gap of the archive (as status reports it) that a
// replay from base to the revision target t would cross, or nil: such a
// restore would stop the members and then fail at the gap, so it is
// refused first. A time target's revision is known only to the replay,
// which refuses a gap itself.
func gapCrossed(st *etcdv1alpha1.ArchiveStatus, base int64, t *etcdv1alpha1.RestoreTarget) *etcdv1alpha1.ArchiveGap {
	if st == nil || t.Revision <= 0 {
		return nil
	}
	for i := range st.Gaps {
		if g := &st.Gaps[i]; base < g.To && t.Revision >= g.From {
			return g
		}
	}
	return nil
}

// archiveBehind tells why the archive cannot reach the target yet, or "":
// the target is past its newest stored revision.
func archiveBehind(st *etcdv1alpha1.ArchiveStatus, t *etcdv1alpha1.RestoreTarget) string {
	last, at := int64(0), "no revision yet"
	if st != nil && st.LastRevision > 0 {
		last = st.LastRevision
		if st.LastTime != nil {
			at = fmt.Sprintf("revision %d, received %s", last, st.LastTime.UTC().Format(time.RFC3339))
		} else {
			at = fmt.Sprintf("revision %d", last)
		}
	}
	switch {
	case t.Revision > 0 && t.Revision > last:
	case t.Time != nil && (st == nil || st.LastTime == nil || st.LastTime.Before(t.Time)):
	default:
		return ""
	}
	return fmt.Sprintf("The archive has stored up to %s, before the target %s: the restore starts once it has stored the target (the archive's pod must run for that)", at, targetString(t))
}

// chooseBase picks the base backup of a restore to t: the newest Complete
// base whose data is entirely at or before t. Those of a time target must
// have been completed by then (every revision they hold was written before
// the target).
func (r *Reconciler) chooseBase(ctx context.Context, c *etcdv1alpha1.EtcdCluster, t *etcdv1alpha1.RestoreTarget) (*etcdv1alpha1.EtcdBackup, *restoreProgress, error) {
	var list etcdv1alpha1.EtcdBackupList
	if err := r.List(ctx, &list, client.InNamespace(c.Namespace)); err != nil {
		return nil, nil, fmt.Errorf("listing the archive's base backups: %w", err)
	}
	var bases []*etcdv1alpha1.EtcdBackup
	for i := range list.Items {
		if b := &list.Items[i]; isArchiveBase(c, b) {
			bases = append(bases, b)
		}
	}
	var found *etcdv1alpha1.EtcdBackup
	for _, b := range bases {
		fits := true
		switch {
		case t.Revision > 0:
			fits = b.Status.Snapshot.Revision <= t.Revision
		case t.Time != nil:
			fits = b.Status.CompletionTime != nil && !b.Status.CompletionTime.After(t.Time.Time)
		}
		if fits && (found == nil || b.Status.Snapshot.Revision > found.Status.Snapshot.Revision) {
			found = b
		}
	}
	if found != nil {
		return found, nil, nil
	}
	if len(bases) == 0 {
		return nil, &restoreProgress{reason: etcdv1alpha1.ReasonWaitingForBackup, message: fmt.Sprintf(
			"EtcdCluster %s's archive has no Complete base backup yet: the restore to %s waits for one", c.Name, targetString(t))}, nil
	}
	oldest := slices.MinFunc(bases, func(a, b *etcdv1alpha1.EtcdBackup) int {
		return cmp.Compare(a.Status.Snapshot.Revision, b.Status.Snapshot.Revision)
	})
	since := ""
	if oldest.Status.CompletionTime != nil {
		since = ", completed " + oldest.Status.CompletionTime.UTC().Format(time.RFC3339)
	}
	return nil, &restoreProgress{reason: etcdv1alpha1.ReasonRestoreFailed, failed: true, message: fmt.Sprintf(
		"The target %s is before the archive's window: its oldest base backup, %s, is at revision %d%s", targetString(t), oldest.Name, oldest.Status.Snapshot.Revision, since)}, nil
}

// isArchiveBase tells whether b can be the base of a restore to a point
// of c's archive: a Complete backup of c that the archive goes on from.
// That is an epoch's own base, or any other backup of c (scheduled or
// one-shot) taken during the current epoch, whose every later revision
// the archive holds. A backup of an older cluster of the same name (made
// before c was) never is: its history is not c's; nor is one older than
// what the archive's retention pruned.
func isArchiveBase(c *etcdv1alpha1.EtcdCluster, b *etcdv1alpha1.EtcdBackup) bool {
	if b.DeletionTimestamp != nil || b.Status.Snapshot == nil || !apimeta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.BackupComplete) {
		return false
	}
	st := c.Status.Archive
	if st != nil && b.Status.Snapshot.Revision < st.PrunedThrough {
		return false // the archive's retention deleted the revisions after it
	}
	if _, ok := b.Labels[labelArchiveEpoch]; ok && b.Labels[labelClusterUID] == string(c.UID) && metav1.IsControlledBy(b, c) {
		return true
	}
	return b.Spec.ClusterRef.Name == c.Name && !b.CreationTimestamp.Before(&c.CreationTimestamp) &&
		st != nil && st.BaseRevision > 0 && b.Status.Snapshot.Revision >= st.BaseRevision
}

// replayedTo reads how far each member's replay got, from the replay step
// of the done Jobs, and checks that every member reached the same
// revision: the members must hold the same data.
func (r *Reconciler) replayedTo(ctx context.Context, src *restoreSource, done []*batchv1.Job) (*etcdv1alpha1.ArchiveReplayed, error) {
	out := *src.from.Archive
	var reached []string
	for i, job := range done {
		res, err := r.jobResult(ctx, job, stepReplay)
		if err != nil {
			return nil, err
		}
		rep := res.Replayed
		if rep == nil {
			return nil, fmt.Errorf("the replay of Job %s reported nothing", job.Name)
		}
		if i == 0 {
			out.Revision, out.Revisions, out.Segments = rep.Reached, rep.Revisions, int32(rep.Segments)
			if !rep.ReachedTime.IsZero() {
				out.Time = &metav1.Time{Time: rep.ReachedTime.Truncate(time.Second)}
			}
		}
		reached = append(reached, fmt.Sprintf("%s: %d", job.Name, rep.Reached))
		if rep.Reached != out.Revision {
			return nil, fmt.Errorf("%w: the members' replays reached different revisions (%s)", errReplayDiffers, strings.Join(reached, ", "))
		}
	}
	return &out, nil
}

// errReplayDiffers: the members' replays did not reach one revision (the
// archive changed while they ran); the restore fails rather than start
// members on different data.
var errReplayDiffers = errors.New("replays differ")
