package etcdcluster

import (
	"context"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/podspec"
	"github.com/tend-dev/tend/internal/scheme"
)

// TestRestoreToAPointJob: a member's restore Job to a point fetches the
// base beside the snapshot it restores, restores the base for a scratch
// etcd that runs as a native sidecar on the pod's loopback and takes a
// revision as one transaction, replays the archive (read-only) to the
// target with the root password when auth is on, and restores the
// replayed snapshot as any restore does.
func TestRestoreToAPointJob(t *testing.T) {
	g := NewWithT(t)
	c := testCluster(func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Auth.Enabled = true
		s.Archive = &etcdv1alpha1.ClusterArchive{Destination: etcdv1alpha1.BackupDestination{
			Volume: &etcdv1alpha1.VolumeLocation{ClaimName: "archive", Path: "/wal"}}}
	})
	base := podspec.Source(etcdv1alpha1.RestoreSource{Volume: &etcdv1alpha1.VolumeLocation{ClaimName: "snaps", Path: "/b/base.db"}})
	src := &restoreSource{loc: base, replay: &archiveReplay{loc: archiveLocation(c), owner: string(c.UID), target: &etcdv1alpha1.RestoreTarget{Revision: 4242}}}
	job := restoreJob(c, 0, src, "tend:test")
	pod := job.Spec.Template.Spec

	byName := map[string]corev1.Container{}
	var names []string
	for _, ic := range pod.InitContainers {
		names = append(names, ic.Name)
		byName[ic.Name] = ic
	}
	g.Expect(names).To(Equal([]string{"prepare", "fetch", "restore-base", "scratch-etcd", "replay", "restore"}))
	g.Expect(byName["fetch"].Command).To(ContainElement("--out=/scratch/base.db"))
	g.Expect(byName["restore-base"].Command).To(ContainElements("/scratch/base.db", "--data-dir=/scratch/replay-etcd", "--name=replay"))
	g.Expect(byName["restore-base"].Command).NotTo(ContainElement(HavePrefix("--bump-revision")))

	server := byName["scratch-etcd"]
	g.Expect(server.RestartPolicy).To(HaveValue(Equal(corev1.ContainerRestartPolicyAlways)))
	g.Expect(server.Command).To(ContainElements("--listen-client-urls=http://127.0.0.1:2379", "--listen-peer-urls=http://127.0.0.1:2380",
		"--max-txn-ops=100000", "--max-request-bytes=134217728"))

	replay := byName["replay"]
	g.Expect(replay.Command).To(Equal([]string{"/tend", "replay", "--from=file:///archive/wal/db/main/archive-uid-1",
		"--local-endpoint=http://127.0.0.1:2379", "--out=/scratch/snapshot.db", "--owner=uid-1", "--to-revision=4242"}))
	g.Expect(replay.TerminationMessagePath).To(Equal(agentapi.TerminationMessagePath))
	g.Expect(replay.Env).To(ContainElement(HaveField("Name", "ETCD_ROOT_PASSWORD")))
	g.Expect(replay.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "archive", MountPath: "/archive", ReadOnly: true}))

	g.Expect(byName["restore"].Command).To(ContainElements("/scratch/snapshot.db", "--bump-revision=1000000000", "--mark-compacted"))
	claims := map[string]bool{}
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims[v.PersistentVolumeClaim.ClaimName] = v.PersistentVolumeClaim.ReadOnly
		}
	}
	g.Expect(claims).To(Equal(map[string]bool{"data-main-0": false, "snaps": true, "archive": true}))
	plain := restoreJob(c, 0, &restoreSource{loc: base}, "tend:test")
	g.Expect(*job.Spec.ActiveDeadlineSeconds).To(Equal(*plain.Spec.ActiveDeadlineSeconds + int64(replayDeadline/time.Second)))

	// A time target, and a bootstrap's archive that names no owner.
	at := metav1.NewTime(time.Date(2026, 11, 28, 14, 3, 0, 0, time.UTC))
	src.replay = &archiveReplay{loc: archiveSourceLocation(&etcdv1alpha1.ArchiveSource{S3: &etcdv1alpha1.S3Location{Bucket: "bk", Key: "etcd/db/old/archive-u0/"}}),
		target: &etcdv1alpha1.RestoreTarget{Time: &at}}
	job = restoreJob(c, 0, src, "tend:test")
	for _, ic := range job.Spec.Template.Spec.InitContainers {
		if ic.Name == "replay" {
			g.Expect(ic.Command).To(Equal([]string{"/tend", "replay", "--from=s3://bk/etcd/db/old/archive-u0",
				"--local-endpoint=http://127.0.0.1:2379", "--out=/scratch/snapshot.db", "--to-time=2026-11-28T14:03:00Z"}))
		}
	}
}

// TestRestoreTargetResolution: a target picks the newest base at or before
// it (by revision, or, for a time, completed by then), waits while the
// archive has not stored it, and is refused before the oldest base or on
// a cluster without an archive, with messages that name the window.
func TestRestoreTargetResolution(t *testing.T) {
	ctx := context.Background()
	c := testCluster(func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Archive = &etcdv1alpha1.ClusterArchive{Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "bk", Prefix: "etcd/"}}}
		s.Backup = &etcdv1alpha1.ClusterBackup{Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "bk", Prefix: "snaps/"}}}
	})
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	last := metav1.NewTime(t0.Add(3 * time.Hour))
	c.Status.Archive = &etcdv1alpha1.ArchiveStatus{LastRevision: 9000, LastTime: &last}
	base := func(epoch int32, rev int64, done time.Time, complete bool) *etcdv1alpha1.EtcdBackup {
		b := archiveBaseBackup(c, epoch, 0)
		b.OwnerReferences = []metav1.OwnerReference{{APIVersion: "etcd.tend.dev/v1alpha1", Kind: "EtcdCluster", Name: c.Name, UID: c.UID, Controller: ptr.To(true)}}
		if complete {
			b.Status.Snapshot = &etcdv1alpha1.SnapshotInfo{Revision: rev}
			b.Status.CompletionTime = &metav1.Time{Time: done}
			b.Status.Artifact = &etcdv1alpha1.Artifact{URI: "s3://bk/snaps/db/" + b.Name + ".db"}
			b.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.BackupComplete, Status: metav1.ConditionTrue, Reason: "Done", LastTransitionTime: metav1.Now()}}
		}
		return b
	}
	stranger := base(9, 10, t0, true)
	stranger.OwnerReferences = nil
	// Backups of the cluster made elsewhere (a schedule's): one taken in
	// the current epoch is a base; one from before it is not, nor one of
	// an older cluster of the same name.
	c.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
	c.Status.Archive.BaseRevision = 5000
	scheduled := func(name string, rev int64, created time.Time) *etcdv1alpha1.EtcdBackup {
		b := base(0, rev, created.Add(time.Minute), true)
		b.Name, b.Labels, b.OwnerReferences = name, map[string]string{etcdv1alpha1.LabelBackupCluster: c.Name}, nil
		b.Spec.ClusterRef.Name = c.Name
		b.CreationTimestamp = metav1.NewTime(created)
		return b
	}
	objs := []*etcdv1alpha1.EtcdBackup{base(0, 100, t0, true), base(1, 5000, t0.Add(time.Hour), true), base(2, 8000, t0.Add(2*time.Hour), false), stranger,
		scheduled("hourly-1", 6000, t0.Add(90*time.Minute)), scheduled("hourly-0", 4000, t0.Add(30*time.Minute)), scheduled("older-cluster", 6500, t0.Add(-2*time.Hour))}
	cl := fake.NewClientBuilder().WithScheme(scheme.Scheme)
	for _, o := range objs {
		cl = cl.WithObjects(o).WithStatusSubresource(o)
	}
	k := cl.Build()
	r := &Reconciler{Client: k, APIReader: k, Pods: k, Recorder: events.NewFakeRecorder(10)}
	restoreTo := func(t etcdv1alpha1.RestoreTarget) *etcdv1alpha1.EtcdRestore {
		return &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Name: "undo", Namespace: "db"}, Spec: etcdv1alpha1.EtcdRestoreSpec{Target: &t}}
	}
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }

	cases := map[string]struct {
		target       etcdv1alpha1.RestoreTarget
		wantBase     string
		wantFailed   bool
		wantWaitText string
		wantText     string
	}{
		"a revision between bases takes the older":  {target: etcdv1alpha1.RestoreTarget{Revision: 4999}, wantBase: "main-archive-base-0"},
		"a revision at a base takes it":             {target: etcdv1alpha1.RestoreTarget{Revision: 5000}, wantBase: "main-archive-base-1"},
		"a base not complete is not taken":          {target: etcdv1alpha1.RestoreTarget{Revision: 8500}, wantBase: "hourly-1"},
		"latest takes the newest complete base":     {target: etcdv1alpha1.RestoreTarget{}, wantBase: "hourly-1"},
		"a scheduled backup of the epoch is a base": {target: etcdv1alpha1.RestoreTarget{Revision: 6200}, wantBase: "hourly-1"},
		"one before the epoch is not":               {target: etcdv1alpha1.RestoreTarget{Revision: 4500}, wantBase: "main-archive-base-0"},
		"a time takes a base completed by then":     {target: etcdv1alpha1.RestoreTarget{Time: at(59 * time.Minute)}, wantBase: "main-archive-base-0"},
		"a revision before every base is refused": {target: etcdv1alpha1.RestoreTarget{Revision: 50}, wantFailed: true,
			wantText: "before the archive's window: its oldest base backup, main-archive-base-0, is at revision 100"},
		"a revision not stored yet waits": {target: etcdv1alpha1.RestoreTarget{Revision: 9001},
			wantWaitText: "The archive has stored up to revision 9000, received 2026-11-28T15:00:00Z, before the target revision 9001"},
		"a time not stored yet waits": {target: etcdv1alpha1.RestoreTarget{Time: at(4 * time.Hour)},
			wantWaitText: "before the target time 2026-11-28T16:00:00Z"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			src, progress, err := r.resolveRestoreOf(ctx, c, restoreTo(tc.target))
			g.Expect(err).NotTo(HaveOccurred())
			switch {
			case tc.wantFailed:
				g.Expect(progress).NotTo(BeNil())
				g.Expect(progress.failed).To(BeTrue())
				g.Expect(progress.message).To(ContainSubstring(tc.wantText))
			case tc.wantWaitText != "":
				g.Expect(progress).NotTo(BeNil())
				g.Expect(progress.failed).To(BeFalse())
				g.Expect(progress.message).To(ContainSubstring(tc.wantWaitText))
			default:
				g.Expect(progress).To(BeNil())
				g.Expect(src.from.Backup).To(Equal(tc.wantBase))
				g.Expect(src.replay.owner).To(Equal("uid-1"))
				g.Expect(src.replay.loc.URI).To(Equal("s3://bk/etcd/db/main/archive-uid-1"))
				g.Expect(src.from.Archive.Target).To(Equal(targetString(&tc.target)))
			}
		})
	}

	t.Run("a target past a gap after its base is refused", func(t *testing.T) {
		g := NewWithT(t)
		gapped := c.DeepCopy()
		gapped.Status.Archive.Gaps = []etcdv1alpha1.ArchiveGap{{From: 3000, To: 4999, Reason: "etcd compacted past the archive"}}
		_, progress, err := r.resolveRestoreOf(ctx, gapped, restoreTo(etcdv1alpha1.RestoreTarget{Revision: 3500}))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(progress.failed).To(BeTrue())
		g.Expect(progress.message).To(ContainSubstring("The archive lacks revisions 3000 to 4999 (etcd compacted past the archive), between the base at revision 100 and the target revision 3500"))
		src, progress, err := r.resolveRestoreOf(ctx, gapped, restoreTo(etcdv1alpha1.RestoreTarget{Revision: 2999}))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(progress).To(BeNil(), "a target before the gap")
		g.Expect(src.from.Backup).To(Equal("main-archive-base-0"))
		src, progress, _ = r.resolveRestoreOf(ctx, gapped, restoreTo(etcdv1alpha1.RestoreTarget{Revision: 5000}))
		g.Expect(progress).To(BeNil(), "a target from the base after the gap")
		g.Expect(src.from.Backup).To(Equal("main-archive-base-1"))
	})
	t.Run("a named base after the target is refused", func(t *testing.T) {
		g := NewWithT(t)
		rs := restoreTo(etcdv1alpha1.RestoreTarget{Revision: 4000})
		rs.Spec.BackupRef = &corev1.LocalObjectReference{Name: "main-archive-base-1"}
		_, progress, err := r.resolveRestoreOf(ctx, c, rs)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(progress.failed).To(BeTrue())
		g.Expect(progress.message).To(ContainSubstring("is at revision 5000, after the target revision 4000"))
	})
	t.Run("a cluster without an archive refuses a target", func(t *testing.T) {
		g := NewWithT(t)
		plain := c.DeepCopy()
		plain.Spec.Archive = nil
		_, progress, err := r.resolveRestoreOf(ctx, plain, restoreTo(etcdv1alpha1.RestoreTarget{Revision: 4000}))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(progress.failed).To(BeTrue())
		g.Expect(progress.message).To(ContainSubstring("the cluster has no spec.archive"))
	})
}

// TestReplaysMustAgree: the members' replays are read from each Job's
// replay step, an init container; members that reached different
// revisions fail the restore.
func TestReplaysMustAgree(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	var objs []*corev1.Pod
	var jobs []*batchv1.Job
	for i, reached := range []int64{700, 700, 701} {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "undo-" + strconv.Itoa(i), Namespace: "db", UID: types.UID("job-" + strconv.Itoa(i))}}
		msg := `{"op":"replay","replayed":{"from":100,"reached":` + strconv.FormatInt(reached, 10) + `,"revisions":600,"segments":3}}`
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-x", Namespace: "db", Labels: map[string]string{batchv1.JobNameLabel: job.Name},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded, InitContainerStatuses: []corev1.ContainerStatus{
				{Name: stepReplay, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}}}}},
		}
		objs, jobs = append(objs, pod), append(jobs, job)
	}
	b := fake.NewClientBuilder().WithScheme(scheme.Scheme)
	for _, p := range objs {
		b = b.WithObjects(p)
	}
	k := b.Build()
	r := &Reconciler{Client: k, APIReader: k, Pods: k}
	src := &restoreSource{from: etcdv1alpha1.RestoredFrom{Archive: &etcdv1alpha1.ArchiveReplayed{Location: "s3://bk/a", Target: "latest"}}}

	got, err := r.replayedTo(ctx, src, jobs[:2])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(&etcdv1alpha1.ArchiveReplayed{Location: "s3://bk/a", Target: "latest", Revision: 700, Revisions: 600, Segments: 3}))

	_, err = r.replayedTo(ctx, src, jobs)
	g.Expect(err).To(MatchError(errReplayDiffers))
	g.Expect(err.Error()).To(ContainSubstring("undo-0: 700, undo-1: 700, undo-2: 701"))
}
