package etcdcluster

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/scheme"
)

func TestVerificationDue(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-d)} }
	for name, tc := range map[string]struct {
		interval *metav1.Duration
		request  string
		prev     *etcdv1alpha1.ArchiveVerificationStatus
		empty    bool
		want     string
	}{
		"never verified":                 {want: "it was never verified"},
		"never verified, nothing stored": {empty: true},
		"nothing stored, asked":          {empty: true, request: "1", want: `is "1"`},
		"verified an hour ago":           {prev: &etcdv1alpha1.ArchiveVerificationStatus{Time: at(time.Hour)}},
		"verified a day ago":             {prev: &etcdv1alpha1.ArchiveVerificationStatus{Time: at(24 * time.Hour)}, want: "older than 24h0m0s"},
		"on demand only, never asked":    {interval: &metav1.Duration{}},
		"on demand only, asked":          {interval: &metav1.Duration{}, request: "1", want: `etcd.tend.dev/verify-archive is "1"`},
		"asked, and answered already":    {request: "1", prev: &etcdv1alpha1.ArchiveVerificationStatus{Time: at(time.Minute), Request: "1"}},
		"asked again":                    {request: "2", prev: &etcdv1alpha1.ArchiveVerificationStatus{Time: at(time.Minute), Request: "1"}, want: `is "2"`},
		"failed to run, a minute ago":    {prev: &etcdv1alpha1.ArchiveVerificationStatus{Time: at(time.Minute), Result: etcdv1alpha1.ReasonArchiveVerificationFailed}},
		"failed to run, ten minutes ago": {prev: &etcdv1alpha1.ArchiveVerificationStatus{Time: at(10 * time.Minute), Result: etcdv1alpha1.ReasonArchiveVerificationFailed},
			want: "could not run to the end"},
		"a mismatch an hour ago waits for the interval": {prev: &etcdv1alpha1.ArchiveVerificationStatus{Time: at(time.Hour), Result: etcdv1alpha1.ReasonArchiveMismatch}},
		"a shorter interval, an hour gone":              {interval: &metav1.Duration{Duration: 30 * time.Minute}, prev: &etcdv1alpha1.ArchiveVerificationStatus{Time: at(time.Hour)}, want: "older than 30m0s"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c := testCluster(func(s *etcdv1alpha1.EtcdClusterSpec) {
				s.Archive = &etcdv1alpha1.ClusterArchive{Verification: etcdv1alpha1.ArchiveVerification{Interval: tc.interval}}
			})
			if tc.request != "" {
				c.Annotations = map[string]string{etcdv1alpha1.AnnotationVerifyArchive: tc.request}
			}
			got := verificationDue(c, tc.prev, !tc.empty, now)
			if tc.want == "" {
				g.Expect(got).To(BeEmpty())
			} else {
				g.Expect(got).To(ContainSubstring(tc.want))
			}
		})
	}
}

// TestArchiveVerifyJob: the verification fetches the base (checked),
// restores it for a scratch etcd beside the replay, and replays the whole
// archive with --verify, reading the cluster's connection and client
// certificate, saving nothing.
func TestArchiveVerifyJob(t *testing.T) {
	g := NewWithT(t)
	c := testCluster(func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Archive = &etcdv1alpha1.ClusterArchive{Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "bk", Prefix: "wal/"}}}
		s.Backup = &etcdv1alpha1.ClusterBackup{Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "bk", Prefix: "snaps/"}}}
	})
	base := archiveBaseBackup(c, 2, 0)
	base.Status.Artifact = &etcdv1alpha1.Artifact{URI: "s3://bk/snaps/db/main-archive-base-2.db", SHA256: "ab", Compression: etcdv1alpha1.CompressionNone}
	job := archiveVerifyJob(c, base, "req-1", "tend:test")
	g.Expect(job.Name).To(Equal("main-archive-verify"))
	g.Expect(job.Annotations[annotationVerifyRequest]).To(Equal("req-1"))
	pod := job.Spec.Template.Spec
	var names []string
	for _, ic := range pod.InitContainers {
		names = append(names, ic.Name)
	}
	g.Expect(names).To(Equal([]string{"fetch", "restore-base", "scratch-etcd"}))
	g.Expect(pod.InitContainers[0].Command).To(ContainElements("--from=s3://bk/snaps/db/main-archive-base-2.db", "--sha256=ab", "--out=/scratch/base.db"))
	g.Expect(pod.Containers).To(HaveLen(1))
	replay := pod.Containers[0]
	g.Expect(replay.Name).To(Equal(stepReplay))
	g.Expect(replay.Command).To(Equal([]string{"/tend", "replay", "--from=s3://bk/wal/db/main/archive-uid-1", "--local-endpoint=http://127.0.0.1:2379",
		"--verify", "--connection-dir=/etc/tend/connection", "--client-tls-dir=/etc/tend/client-tls", "--owner=uid-1"}))
	g.Expect(replay.VolumeMounts).To(ContainElements(
		HaveField("MountPath", "/etc/tend/connection"), HaveField("MountPath", "/etc/tend/client-tls"), HaveField("MountPath", "/scratch")))
	g.Expect(*pod.AutomountServiceAccountToken).To(BeFalse())
	g.Expect(job.Spec.Template.Labels).NotTo(HaveKey(LabelCluster))
}

// TestVerifyArchive: a due verification starts a Job; a completed one is
// read from its replay step into the status (and the Job goes), a failed
// one too (the Job stays for its logs until the next is due); the
// condition follows the result.
func TestVerifyArchive(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	c := testCluster(func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Archive = &etcdv1alpha1.ClusterArchive{Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "bk", Prefix: "wal/"}}}
		s.Backup = &etcdv1alpha1.ClusterBackup{Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "bk", Prefix: "snaps/"}}}
	})
	base := archiveBaseBackup(c, 0, 0)
	base.Status.Artifact = &etcdv1alpha1.Artifact{URI: "s3://bk/snaps/db/main-archive-base-0.db", Compression: etcdv1alpha1.CompressionNone}
	k := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(c).Build()
	r := &Reconciler{Client: k, APIReader: k, Pods: k, Recorder: events.NewFakeRecorder(20), AgentImage: "tend:test"}
	s := &scope{cluster: c, now: now}
	st := &etcdv1alpha1.ArchiveStatus{BaseRevision: 100, LastRevision: 900}

	g := NewWithT(t)
	g.Expect(r.verifyArchive(ctx, s, base, st)).To(Succeed())
	g.Expect(st.Verification).To(Equal(&etcdv1alpha1.ArchiveVerificationStatus{Job: "main-archive-verify"}))
	job := &batchv1.Job{}
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "db", Name: "main-archive-verify"}, job)).To(Succeed())
	_, _, _, ok := archiveVerifiedCondition(st)
	g.Expect(ok).To(BeFalse(), "no condition before the first verification ends")

	finish := func(job *batchv1.Job, typ batchv1.JobConditionType, phase corev1.PodPhase, msg string) {
		job.Status.Conditions = []batchv1.JobCondition{{Type: typ, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
		g.Expect(k.Status().Update(ctx, job)).To(Succeed())
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-" + string(phase), Namespace: "db", Labels: map[string]string{batchv1.JobNameLabel: job.Name},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
			Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{
				{Name: stepReplay, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}}}}},
		}
		g.Expect(k.Create(ctx, pod)).To(Succeed())
	}
	// A run still under way keeps the Job in status.
	g.Expect(r.verifyArchive(ctx, s, base, st)).To(Succeed())
	g.Expect(st.Verification.Job).To(Equal("main-archive-verify"))

	job.UID = "job-1"
	g.Expect(k.Update(ctx, job)).To(Succeed())
	finish(job, batchv1.JobComplete, corev1.PodSucceeded,
		`{"op":"replay","replayed":{"from":100,"reached":900,"revisions":800,"segments":4,"verification":{"revision":900,"keys":12,"hash":77,"liveHash":77,"liveKeys":12,"matches":true,"liveMember":"main-1","durationSeconds":1}}}`)
	g.Expect(r.verifyArchive(ctx, s, base, st)).To(Succeed())
	g.Expect(st.Verification.Result).To(Equal(etcdv1alpha1.ReasonArchiveMatches))
	g.Expect(st.Verification.Revision).To(Equal(int64(900)))
	g.Expect(st.Verification.BaseRevision).To(Equal(int64(100)))
	g.Expect(st.Verification.Job).To(BeEmpty())
	g.Expect(st.Verification.Time.Time).To(BeTemporally("==", now.Add(-time.Minute)))
	status, reason, msg, ok := archiveVerifiedCondition(st)
	g.Expect(ok).To(BeTrue())
	g.Expect(status).To(Equal(metav1.ConditionTrue))
	g.Expect(reason).To(Equal(etcdv1alpha1.ReasonArchiveMatches))
	g.Expect(msg).To(ContainSubstring("equals member main-1 at revision 900"))
	err := k.Get(ctx, client.ObjectKey{Namespace: "db", Name: "main-archive-verify"}, &batchv1.Job{})
	g.Expect(err).To(HaveOccurred(), "the completed Job is deleted")

	// Not due again for a day; asked for, it is.
	g.Expect(r.verifyArchive(ctx, s, base, st)).To(Succeed())
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "db", Name: "main-archive-verify"}, &batchv1.Job{})).NotTo(Succeed())
	c.Annotations = map[string]string{etcdv1alpha1.AnnotationVerifyArchive: "now"}
	g.Expect(r.verifyArchive(ctx, s, base, st)).To(Succeed())
	job = &batchv1.Job{}
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "db", Name: "main-archive-verify"}, job)).To(Succeed())
	g.Expect(job.Annotations[annotationVerifyRequest]).To(Equal("now"))

	// A mismatch: the replay step failed with a terminal error.
	job.UID = "job-2"
	g.Expect(k.Update(ctx, job)).To(Succeed())
	finish(job, batchv1.JobFailed, corev1.PodFailed,
		`{"op":"replay","error":"restored store does not match the live cluster: at revision 950 the replayed store's hash is 1 with 3 keys and member main-0's is 2 with 3 keys","terminal":true,"replayed":{"from":100,"reached":950,"revisions":850,"segments":4,"verification":{"revision":950,"keys":3,"hash":1,"liveHash":2,"liveKeys":3,"matches":false}}}`)
	g.Expect(r.verifyArchive(ctx, s, base, st)).To(Succeed())
	g.Expect(st.Verification.Result).To(Equal(etcdv1alpha1.ReasonArchiveMismatch))
	g.Expect(st.Verification.Request).To(Equal("now"))
	status, reason, msg, _ = archiveVerifiedCondition(st)
	g.Expect(status).To(Equal(metav1.ConditionFalse))
	g.Expect(reason).To(Equal(etcdv1alpha1.ReasonArchiveMismatch))
	g.Expect(msg).To(ContainSubstring("the replayed store's hash is 1"))
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "db", Name: "main-archive-verify"}, &batchv1.Job{})).To(Succeed(), "a failed Job stays for its logs")
}
