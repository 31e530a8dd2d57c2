package plugin

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

func TestBackupFor(t *testing.T) {
	g := NewWithT(t)
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo"}}
	_, err := BackupFor(c, "", t0)
	g.Expect(err).To(MatchError(ContainSubstring("has no spec.backup.destination")))

	c.Spec.Backup = &etcdv1alpha1.ClusterBackup{
		Destination: etcdv1alpha1.BackupDestination{Volume: &etcdv1alpha1.VolumeLocation{ClaimName: "backups"}},
		Compression: etcdv1alpha1.CompressionZstd,
	}
	b, err := BackupFor(c, "", t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Namespace).To(Equal("ns"))
	g.Expect(b.Name).To(Equal("demo-20261125030000"))
	g.Expect(b.Spec.ClusterRef.Name).To(Equal("demo"))
	g.Expect(b.Spec.Destination.Volume.ClaimName).To(Equal("backups"))
	g.Expect(b.Spec.Compression).To(Equal(etcdv1alpha1.CompressionZstd))
	b.Spec.Destination.Volume.ClaimName = "changed"
	g.Expect(c.Spec.Backup.Destination.Volume.ClaimName).To(Equal("backups"), "the cluster's spec is copied, not shared")

	b, err = BackupFor(c, "mine", t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Name).To(Equal("mine"))
}

func TestRestoreFor(t *testing.T) {
	g := NewWithT(t)
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-1"},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterRef: etcdv1alpha1.ClusterReference{Name: "demo"}}}
	_, err := RestoreFor("demo", b, "", t0)
	g.Expect(err).To(MatchError(ContainSubstring("is not Complete")))

	b.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.BackupComplete, Status: metav1.ConditionTrue}}
	_, err = RestoreFor("other", b, "", t0)
	g.Expect(err).To(MatchError(ContainSubstring("is of EtcdCluster demo, not other")))

	r, err := RestoreFor("demo", b, "", t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Namespace).To(Equal("ns"))
	g.Expect(r.Name).To(Equal("demo-restore-20261125030000"))
	g.Expect(r.Spec.ClusterRef.Name).To(Equal("demo"))
	g.Expect(r.Spec.BackupRef.Name).To(Equal("demo-1"))
	g.Expect(r.Spec.ConfirmOverwrite).To(BeTrue())
}

func TestRestoreToAPoint(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		revision int64
		at       string
		latest   bool
		want     *etcdv1alpha1.RestoreTarget
		wantErr  string
	}{
		{},
		{revision: 4242, want: &etcdv1alpha1.RestoreTarget{Revision: 4242}},
		{at: "2026-11-28T14:03:00Z", want: &etcdv1alpha1.RestoreTarget{Time: &metav1.Time{Time: time.Date(2026, 11, 28, 14, 3, 0, 0, time.UTC)}}},
		{latest: true, want: &etcdv1alpha1.RestoreTarget{}},
		{revision: 7, latest: true, wantErr: "give one of --to-revision, --to-time and --to-latest"},
		{revision: -3, wantErr: "a revision is positive"},
		{at: "14:03", wantErr: `--to-time "14:03" is not an RFC 3339 time`},
	} {
		got, err := ParseTarget(tc.revision, tc.at, tc.latest)
		if tc.wantErr != "" {
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(tc.want))
	}
	r := PointRestoreFor("ns", "demo", &etcdv1alpha1.RestoreTarget{Revision: 9}, "", t0)
	g.Expect(r.Name).To(Equal("demo-restore-20261125030000"))
	g.Expect(r.Spec.BackupRef).To(BeNil())
	g.Expect(r.Spec.Target.Revision).To(Equal(int64(9)))
	g.Expect(r.Spec.ConfirmOverwrite).To(BeTrue())
}

func TestPausePatch(t *testing.T) {
	g := NewWithT(t)
	c := &etcdv1alpha1.EtcdCluster{}
	patch, done := PausePatch(c, true)
	g.Expect(string(patch)).To(Equal(`{"spec":{"paused":true}}`))
	g.Expect(done).To(BeFalse())
	_, done = PausePatch(c, false)
	g.Expect(done).To(BeTrue(), "a running cluster is resumed already")

	s := &etcdv1alpha1.EtcdBackupSchedule{Spec: etcdv1alpha1.EtcdBackupScheduleSpec{Suspend: true}}
	patch, done = PausePatch(s, false)
	g.Expect(string(patch)).To(Equal(`{"spec":{"suspend":false}}`))
	g.Expect(done).To(BeFalse())

	ps := &appsv1alpha1.PodSet{}
	patch, done = PausePatch(ps, true)
	g.Expect(string(patch)).To(Equal(`{"metadata":{"annotations":{"tend.dev/paused":"true"}}}`))
	g.Expect(done).To(BeFalse())
	_, done = PausePatch(ps, false)
	g.Expect(done).To(BeTrue(), "no annotation: resumed already")

	q := &sqsv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{sqsv1alpha1.AnnotationPaused: "true"}}}
	_, done = PausePatch(q, true)
	g.Expect(done).To(BeTrue())
	patch, done = PausePatch(q, false)
	g.Expect(string(patch)).To(Equal(`{"metadata":{"annotations":{"tend.dev/paused":null}}}`))
	g.Expect(done).To(BeFalse())
	g.Expect(appsv1alpha1.AnnotationPaused).To(Equal(sqsv1alpha1.AnnotationPaused), "one key for both kinds")
}

func TestDefragPatch(t *testing.T) {
	g := NewWithT(t)
	request, patch := DefragPatch(time.Date(2026, 11, 27, 12, 0, 0, 5, time.UTC))
	g.Expect(request).To(Equal("2026-11-27T12:00:00.000000005Z"))
	g.Expect(string(patch)).To(Equal(`{"metadata":{"annotations":{"etcd.tend.dev/defragment":"2026-11-27T12:00:00.000000005Z"}}}`))
}

func TestRedrivePatch(t *testing.T) {
	g := NewWithT(t)
	q := &sqsv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orders-dlq"}}
	_, err := RedrivePatch(q, t0)
	g.Expect(err).To(MatchError(ContainSubstring("has no queue in SQS yet")))

	q.Status.QueueARN = "arn:aws:sqs:us-east-1:123456789012:orders-dlq"
	patch, err := RedrivePatch(q, t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(patch)).To(Equal(`{"metadata":{"annotations":{"sqs.tend.dev/redrive":"2026-11-25T03:00:00Z"}}}`))

	q.Status.Redrive = &sqsv1alpha1.RedriveStatus{Request: "x", State: "RUNNING"}
	_, err = RedrivePatch(q, t0)
	g.Expect(err).To(MatchError(ContainSubstring("is still RUNNING")))
	q.Status.Redrive.State = "COMPLETED"
	_, err = RedrivePatch(q, t0)
	g.Expect(err).NotTo(HaveOccurred(), "a finished move may be asked again")

	q.Spec.ManagementPolicy = sqsv1alpha1.ManagementPolicyObserve
	_, err = RedrivePatch(q, t0)
	g.Expect(err).To(MatchError(ContainSubstring("managementPolicy Observe")))
}

func TestRedriveProgress(t *testing.T) {
	g := NewWithT(t)
	g.Expect(RedriveProgress(&sqsv1alpha1.RedriveStatus{Request: "r", State: "Failed", Message: "SQS refused"})).
		To(Equal("Failed (asked r): SQS refused"))
	g.Expect(RedriveProgress(&sqsv1alpha1.RedriveStatus{Request: "r", State: "COMPLETED", MessagesMoved: 2, MessagesToMove: 2})).
		To(Equal("COMPLETED: 2 of 2 messages moved (asked r)"))
}
