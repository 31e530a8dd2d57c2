package plugin

import (
	"bytes"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

var t0 = time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)

func at(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }

func demoCluster() *etcdv1alpha1.EtcdCluster {
	since := at(-30 * time.Second)
	return &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo", UID: "c-uid"},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3), Version: "v3.6.16"},
		Status: etcdv1alpha1.EtcdClusterStatus{
			Phase: "Degraded", ReadyMembers: 2, Leader: "demo-1", CurrentVersion: "3.6.16",
			ClientEndpoint: "https://demo-client.ns.svc:2379",
			Members: []etcdv1alpha1.Member{
				{Name: "demo-0", Healthy: false, UnhealthySince: &since, Version: "3.6.16"},
				{Name: "demo-1", Healthy: true, Leader: true, Version: "3.6.16", DBSize: resource.NewQuantity(20480, resource.BinarySI)},
				{Name: "demo-2", Healthy: true, Learner: true, Version: "3.6.16"},
			},
			Certificates: []etcdv1alpha1.CertificateStatus{{Secret: "demo-ca", NotAfter: at(24 * time.Hour)}, {Secret: "demo-server-tls", NotAfter: at(-time.Hour)}},
			Update: &etcdv1alpha1.UpdateStatus{From: "3.5.35", To: "3.6.16", Cause: etcdv1alpha1.UpdateCauseSpec, StartedAt: at(-2 * time.Minute),
				Member: "demo-0", UpdatedMembers: []string{"demo-2"}, PendingMembers: []string{"demo-0", "demo-1"}},
			Conditions: []metav1.Condition{
				{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Degraded", Message: "1 of 3 members is unhealthy", LastTransitionTime: at(-time.Minute)},
			},
		},
	}
}

func TestEtcdClusterStatus(t *testing.T) {
	g := NewWithT(t)
	pod := func(name string, restarts int32, started time.Duration) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			RestartCount: restarts, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(started)}},
		}}}}
	}
	backup := func(name string, created time.Duration, phase string, v *etcdv1alpha1.Verification, verify *bool) etcdv1alpha1.EtcdBackup {
		b := etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(created)}}
		b.Spec.Verify = verify
		b.Status.Phase, b.Status.Verification = phase, v
		if phase == etcdv1alpha1.BackupPhaseVerified {
			b.Status.Artifact = &etcdv1alpha1.Artifact{SizeBytes: 2048}
			b.Status.Snapshot = &etcdv1alpha1.SnapshotInfo{Revision: 42}
			b.Status.CompletionTime = ptr.To(at(created + time.Minute))
		}
		return b
	}
	var backups []etcdv1alpha1.EtcdBackup
	for i := range 6 {
		backups = append(backups, backup("old-"+string(rune('a'+i)), time.Duration(-10-i)*time.Hour, etcdv1alpha1.BackupPhaseVerified, &etcdv1alpha1.Verification{HashMatches: true, Keys: 7}, nil))
	}
	backups = append(backups,
		backup("newest", -time.Hour, etcdv1alpha1.BackupPhaseFailed, nil, nil),
		backup("unverified", -2*time.Hour, etcdv1alpha1.BackupPhaseComplete, nil, ptr.To(false)),
		backup("mismatch", -3*time.Hour, etcdv1alpha1.BackupPhaseVerified, &etcdv1alpha1.Verification{}, nil),
	)
	warnings := []corev1.Event{
		{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "demo-0"}, Reason: "BackOff", Message: "restarting", Count: 3, LastTimestamp: at(-10 * time.Second)},
		{InvolvedObject: corev1.ObjectReference{Kind: "EtcdCluster", Name: "demo"}, Reason: "MemberUnhealthy", Message: "demo-0 does not answer", EventTime: metav1.NewMicroTime(t0.Add(-5 * time.Second))},
	}
	st := EtcdClusterStatus(demoCluster(), []corev1.Pod{pod("demo-0", 2, -20*time.Second), pod("demo-1", 0, -time.Hour)}, backups, warnings)

	g.Expect(st.Ready).To(Equal("False (Degraded)"))
	g.Expect(st.Summary).To(Equal("1 of 3 members is unhealthy"))
	g.Expect(st.Members).To(Equal([]MemberStatus{
		{Name: "demo-0", Role: "follower", Health: "unhealthy", Version: "3.6.16", Since: ptr.To(at(-30 * time.Second)), Restarts: 2},
		{Name: "demo-1", Role: "leader", Health: "healthy", Version: "3.6.16", DBSize: "20.0 KiB", Since: ptr.To(at(-time.Hour))},
		{Name: "demo-2", Role: "learner", Health: "healthy", Version: "3.6.16"},
	}), "an unhealthy member's since is unhealthySince, a healthy one's its container's start; a member without a pod has none")
	g.Expect(st.Backups).To(HaveLen(maxBackups), "the newest five only")
	g.Expect(st.Backups[0]).To(Equal(BackupStatus{Name: "newest", Phase: "Failed", Verification: "-"}))
	g.Expect(st.Backups[1].Verification).To(Equal("off"))
	g.Expect(st.Backups[2].Verification).To(Equal("hash differs"))
	g.Expect(st.Backups[3]).To(Equal(BackupStatus{Name: "old-a", Phase: "Verified", Completed: ptr.To(at(-10*time.Hour + time.Minute)), SizeBytes: 2048, Revision: 42, Verification: "hash matches, 7 keys"}))
	g.Expect(st.Warnings).To(HaveLen(2))
	g.Expect(st.Warnings[0].Object).To(Equal("EtcdCluster/demo"), "newest first, whichever Event API wrote it")
	g.Expect(st.Warnings[1].Count).To(Equal(int32(3)))

	var out bytes.Buffer
	g.Expect(printStatus(&out, st, "", t0)).To(Succeed())
	want, err := os.ReadFile("testdata/etcdcluster-status.golden")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.String()).To(Equal(string(want)))
}

func TestPodSetStatusWithoutConditions(t *testing.T) {
	g := NewWithT(t)
	ps := &appsv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: appsv1alpha1.PodSetSpec{LeaderElection: true}}
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "web-b", CreationTimestamp: at(-time.Minute)}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web-a", CreationTimestamp: at(-time.Minute), Labels: map[string]string{appsv1alpha1.LabelRole: "leader"}},
			Spec:   corev1.PodSpec{NodeName: "node"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}},
	}
	st := PodSetStatus(ps, pods, nil)
	g.Expect(st.Ready).To(Equal("Unknown (not reconciled yet)"))
	g.Expect(st.Facts).To(ContainElement(Fact{"Replicas", "0 ready, 0 running, 1 desired"}), "replicas defaults to 1")
	g.Expect(st.Facts).To(ContainElement(Fact{"Leader", "none, Service web-leader"}))
	g.Expect(st.Pods).To(Equal([]PodStatus{
		{Name: "web-a", Phase: "Running", Ready: true, Leader: true, Node: "node", Created: at(-time.Minute)},
		{Name: "web-b", Phase: "Pending", Created: at(-time.Minute)},
	}))
	var out bytes.Buffer
	g.Expect(printStatus(&out, st, "", t0)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("\nNo warning Events.\n"))
	g.Expect(out.String()).NotTo(ContainSubstring("Conditions:"))
}

func TestPrintStatusAsData(t *testing.T) {
	g := NewWithT(t)
	st := EtcdClusterStatus(demoCluster(), nil, nil, nil)
	var js, ys bytes.Buffer
	g.Expect(printStatus(&js, st, "json", t0)).To(Succeed())
	g.Expect(js.String()).To(ContainSubstring(`"notAfter": "2026-11-26T03:00:00Z"`))
	g.Expect(printStatus(&ys, st, "yaml", t0)).To(Succeed())
	g.Expect(ys.String()).To(ContainSubstring("ready: False (Degraded)"))
}

func TestHumanBytes(t *testing.T) {
	g := NewWithT(t)
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 20512: "20.0 KiB", 5 << 20: "5.0 MiB", 3 << 40: "3.0 TiB", 5 << 50: "5120.0 TiB"} {
		g.Expect(humanBytes(n)).To(Equal(want), "%d", n)
	}
}

func TestQueueStatus(t *testing.T) {
	g := NewWithT(t)
	q := &sqsv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orders"}}
	st := QueueStatus(q, nil)
	g.Expect(st.Facts).To(Equal([]Fact{
		{"Queue name", "orders"}, {"URL", "-"}, {"ARN", "-"}, {"FIFO", "false"}, {"Management", "Manage"}, {"Messages", "-"}, {"Last synced", "never"},
	}), "the queue name defaults to the Queue's")
	q.Spec.QueueName, q.Spec.FIFOQueue = "orders.fifo", true
	q.Status.QueueURL, q.Status.QueueARN, q.Status.LastSyncTime = "http://sqs/1/orders.fifo", "arn:aws:sqs:r:1:orders.fifo", ptr.To(at(0))
	q.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Available", Message: "in line"}}
	st = QueueStatus(q, nil)
	g.Expect(st.Ready).To(Equal("True (Available)"))
	g.Expect(st.Facts).To(Equal([]Fact{
		{"Queue name", "orders.fifo"}, {"URL", "http://sqs/1/orders.fifo"}, {"ARN", "arn:aws:sqs:r:1:orders.fifo"}, {"FIFO", "true"},
		{"Management", "Manage"}, {"Messages", "-"}, {"Last synced", "2026-11-25T03:00:00Z"},
	}))
	q.Spec.ManagementPolicy = sqsv1alpha1.ManagementPolicyObserve
	q.Status.Messages = &sqsv1alpha1.QueueMessages{Visible: 12, InFlight: 3, Delayed: 1}
	q.Status.Redrive = &sqsv1alpha1.RedriveStatus{Request: "2026-11-25T03:00:00Z", State: "RUNNING", MessagesMoved: 4, MessagesToMove: 10}
	st = QueueStatus(q, nil)
	g.Expect(st.Facts[4:]).To(Equal([]Fact{
		{"Management", "Observe"}, {"Messages", "12 visible, 3 in flight, 1 delayed"}, {"Last synced", "2026-11-25T03:00:00Z"},
		{"Redrive", "RUNNING: 4 of 10 messages moved (asked 2026-11-25T03:00:00Z)"},
	}))
}

func TestMaintenanceFacts(t *testing.T) {
	g := NewWithT(t)
	g.Expect(maintenanceFacts(nil)).To(BeEmpty())
	at := metav1.NewTime(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	facts := maintenanceFacts(&etcdv1alpha1.MaintenanceStatus{
		Compaction: &etcdv1alpha1.CompactionStatus{By: "Tend", Retention: "1h0m0s", Revision: 4000, Time: &at},
		Defragmentation: &etcdv1alpha1.DefragmentationStatus{Cause: etcdv1alpha1.DefragmentationRequested, Phase: etcdv1alpha1.DefragmentationRunning,
			Members: []string{"kv-0", "kv-2", "kv-1"}, Results: []etcdv1alpha1.DefragmentationResult{{Member: "kv-0"}}},
		NoSpace: &etcdv1alpha1.NoSpaceStatus{Since: at, Stage: etcdv1alpha1.NoSpaceRetention, Message: "defragmenting every member"},
		VolumeMigration: &etcdv1alpha1.VolumeMigrationStatus{StorageClassName: "fast", Size: ptr.To(resource.MustParse("2Gi")),
			Phase: etcdv1alpha1.MigrationMigrating, Remaining: []string{"kv-2"}, RetainedVolumes: []string{"pv-1"}, Message: "Waiting for kv-1 to be a healthy voter"},
	})
	g.Expect(facts).To(Equal([]Fact{
		{"Compaction", "by Tend, keeping 1h0m0s; last to revision 4000 at 2026-11-27T12:00:00Z"},
		{"Defragmentation", "Running (Requested), 1 of 3 members"},
		{"NOSPACE", "since 2026-11-27T12:00:00Z, Retention: defragmenting every member"},
		{"Volume migration", "Migrating to fast 2Gi, to move: kv-2, old volumes kept: pv-1: Waiting for kv-1 to be a healthy voter"},
	}))
	done := maintenanceFacts(&etcdv1alpha1.MaintenanceStatus{VolumeMigration: &etcdv1alpha1.VolumeMigrationStatus{
		Size: ptr.To(resource.MustParse("2Gi")), Phase: etcdv1alpha1.MigrationCompleted, Message: "Every member stands on a volume claim of 2Gi"}})
	g.Expect(done).To(Equal([]Fact{{"Volume migration", "Completed to 2Gi"}}))
}

func TestArchiveFacts(t *testing.T) {
	g := NewWithT(t)
	g.Expect(archiveFacts(nil)).To(BeEmpty())
	at := metav1.NewTime(time.Date(2026, 11, 28, 14, 3, 0, 0, time.UTC))
	later := metav1.NewTime(at.Add(time.Hour))
	facts := archiveFacts(&etcdv1alpha1.ArchiveStatus{
		Location: "s3://b/archive/db/kv/archive-uid", BaseBackup: "kv-archive-base-1", BaseRevision: 100,
		FirstRevision: 101, FirstTime: &at, LastRevision: 900, LastTime: &later, LagSeconds: 4, Segments: 12,
		Gaps:         []etcdv1alpha1.ArchiveGap{{From: 50, To: 99, Reason: "started again"}},
		Verification: &etcdv1alpha1.ArchiveVerificationStatus{Time: &later, Result: "Matches", Revision: 880, Job: "kv-archive-verify"},
	})
	g.Expect(facts).To(Equal([]Fact{
		{"Archive", "revisions 101 (2026-11-28T14:03:00Z) to 900 (2026-11-28T15:03:00Z), 12 segments; base kv-archive-base-1 at revision 100"},
		{"Archive lag", "4s"},
		{"Archive location", "s3://b/archive/db/kv/archive-uid"},
		{"Archive gap", "revisions 50 to 99: started again"},
		{"Archive verified", "Matches at 2026-11-28T15:03:00Z, revision 880; Job kv-archive-verify runs again"},
	}))
	pruned := archiveFacts(&etcdv1alpha1.ArchiveStatus{BaseBackup: "kv-archive-base-1-3", BaseRevision: 700, PrunedThrough: 700})
	g.Expect(pruned).To(ContainElement(Fact{"Archive pruned", "through revision 700: no restore to a point starts from a backup before it"}))
	fresh := archiveFacts(&etcdv1alpha1.ArchiveStatus{BaseBackup: "kv-archive-base-0"})
	g.Expect(fresh[0].Value).To(Equal("nothing stored yet; base kv-archive-base-0"))
	g.Expect(fresh[len(fresh)-1]).To(Equal(Fact{"Archive verified", "not yet"}))
}
