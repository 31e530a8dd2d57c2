package etcdbackup

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

func newSchedule(t *testing.T, ns, name string, mutate func(*etcdv1alpha1.EtcdBackupScheduleSpec)) *etcdv1alpha1.EtcdBackupSchedule {
	t.Helper()
	sc := &etcdv1alpha1.EtcdBackupSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{
			ClusterRef: etcdv1alpha1.ClusterReference{Name: "kv"},
			Schedule:   "0 * * * *",
			BackupTemplate: etcdv1alpha1.BackupOptions{
				Destination:    etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "backups", Prefix: "etcd/"}},
				Verify:         ptr.To(false),
				ArtifactPolicy: etcdv1alpha1.ArtifactRetain,
			},
			Retention: etcdv1alpha1.Retention{KeepLast: ptr.To[int32](2)},
		},
	}
	if mutate != nil {
		mutate(&sc.Spec)
	}
	NewWithT(t).Expect(env.Client.Create(context.Background(), sc)).To(Succeed())
	return sc
}

func getSchedule(g Gomega, sc *etcdv1alpha1.EtcdBackupSchedule) *etcdv1alpha1.EtcdBackupSchedule {
	got := &etcdv1alpha1.EtcdBackupSchedule{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(sc), got)).To(Succeed())
	return got
}

func healthOf(sc *etcdv1alpha1.EtcdBackupSchedule) metav1.Condition {
	if c := apimeta.FindStatusCondition(sc.Status.Conditions, etcdv1alpha1.ScheduleBackupsHealthy); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// tick sets the controllers' clock and starts a pass of sc, as the
// requeue at the run time would in real time.
func tick(t *testing.T, sc *etcdv1alpha1.EtcdBackupSchedule, now time.Time) {
	t.Helper()
	fakeClock.SetTime(now)
	g := NewWithT(t)
	got := getSchedule(g, sc)
	patch := client.MergeFrom(got.DeepCopy())
	if got.Annotations == nil {
		got.Annotations = map[string]string{}
	}
	got.Annotations["test.tend.dev/tick"] = strconv.FormatInt(now.UnixNano(), 10)
	g.Expect(env.Client.Patch(context.Background(), got, patch)).To(Succeed())
}

// scheduleBackups lists the names of sc's backups that are not being
// deleted.
func scheduleBackups(g Gomega, sc *etcdv1alpha1.EtcdBackupSchedule) []string {
	var list etcdv1alpha1.EtcdBackupList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(sc.Namespace), client.MatchingLabels{etcdv1alpha1.LabelSchedule: sc.Name})).To(Succeed())
	var out []string
	for _, b := range list.Items {
		if b.DeletionTimestamp.IsZero() {
			out = append(out, b.Name)
		}
	}
	return out
}

// runOf is the name of sc's backup of the run at t.
func runOf(sc *etcdv1alpha1.EtcdBackupSchedule, t time.Time) string {
	return fmt.Sprintf("%s-%d", sc.Name, t.Unix())
}

// completeRun plays the backup's pod to success, once the backup of the
// run at t exists.
func completeRun(t *testing.T, sc *etcdv1alpha1.EtcdBackupSchedule, run time.Time) {
	t.Helper()
	g := NewWithT(t)
	name := runOf(sc, run)
	runPod(t, getJob(t, sc.Namespace, name+"-backup"), name+"-a", corev1.PodSucceeded, nil, exited("backup", 0, &backupOK))
	g.Eventually(func(g Gomega) {
		b := &etcdv1alpha1.EtcdBackup{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: sc.Namespace, Name: name}, b)).To(Succeed())
		g.Expect(b.Status.Phase).To(Equal(etcdv1alpha1.BackupPhaseComplete))
	}, wait).Should(Succeed())
}

func TestScheduleTakesRunsAndPrunes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	defer fakeClock.SetTime(fakeClock.Now())
	newCluster(t, ns, "kv", true, false)
	sc := newSchedule(t, ns, "hourly", nil)
	first := getSchedule(g, sc).CreationTimestamp.Truncate(time.Hour).Add(time.Hour)
	hour := func(n int) time.Time { return first.Add(time.Duration(n) * time.Hour) }

	g.Eventually(func(g Gomega) {
		got := getSchedule(g, sc)
		g.Expect(got.Status.NextScheduleTime).NotTo(BeNil())
		g.Expect(got.Status.NextScheduleTime.Time).To(BeTemporally("==", first))
		g.Expect(healthOf(got).Status).To(Equal(metav1.ConditionUnknown))
		g.Expect(healthOf(got).Reason).To(Equal(etcdv1alpha1.ReasonNoBackupsYet))
	}, wait).Should(Succeed())
	g.Expect(scheduleBackups(g, sc)).To(BeEmpty(), "no backup before the first run")

	// The first run: a backup named for it, owned and labelled.
	tick(t, sc, hour(0).Add(10*time.Second))
	b := &etcdv1alpha1.EtcdBackup{}
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: runOf(sc, hour(0))}, b)
	}, wait).Should(Succeed())
	g.Expect(metav1.IsControlledBy(b, getSchedule(g, sc))).To(BeTrue())
	g.Expect(b.Labels).To(HaveKeyWithValue(etcdv1alpha1.LabelBackupCluster, "kv"))
	g.Expect(b.Annotations).To(HaveKeyWithValue(etcdv1alpha1.AnnotationScheduledTime, hour(0).UTC().Format(time.RFC3339)))
	g.Expect(b.Spec.ClusterRef.Name).To(Equal("kv"))
	g.Expect(b.Spec.ArtifactPolicy).To(Equal(etcdv1alpha1.ArtifactRetain))
	completeRun(t, sc, hour(0))
	for n := 1; n <= 2; n++ {
		tick(t, sc, hour(n).Add(10*time.Second))
		completeRun(t, sc, hour(n))
	}
	// keepLast 2: the first backup goes once the third is complete.
	g.Eventually(func(g Gomega) {
		g.Expect(scheduleBackups(g, sc)).To(ConsistOf(runOf(sc, hour(1)), runOf(sc, hour(2))))
		got := getSchedule(g, sc)
		g.Expect(got.Status.Backups).To(Equal(int32(2)))
		g.Expect(got.Status.LastScheduleTime.Time).To(BeTemporally("==", hour(2)))
		g.Expect(got.Status.LastSuccessfulBackup).To(Equal(runOf(sc, hour(2))))
		g.Expect(got.Status.Active).To(BeEmpty())
		g.Expect(healthOf(got).Status).To(Equal(metav1.ConditionTrue))
	}, wait).Should(Succeed())

	// The manager was "down" for hours: only the latest missed run is
	// taken, once.
	tick(t, sc, hour(6).Add(10*time.Second))
	g.Eventually(func(g Gomega) {
		g.Expect(scheduleBackups(g, sc)).To(ConsistOf(runOf(sc, hour(1)), runOf(sc, hour(2)), runOf(sc, hour(6))))
		g.Expect(getSchedule(g, sc).Status.Active).To(Equal(runOf(sc, hour(6))))
	}, wait).Should(Succeed())

	// While that backup is active, the next run waits; it is taken when
	// the backup finishes.
	tick(t, sc, hour(7).Add(10*time.Second))
	g.Consistently(func(g Gomega) {
		g.Expect(scheduleBackups(g, sc)).NotTo(ContainElement(runOf(sc, hour(7))))
	}, time.Second).Should(Succeed())
	completeRun(t, sc, hour(6))
	completeRun(t, sc, hour(7))
	g.Eventually(func(g Gomega) {
		g.Expect(scheduleBackups(g, sc)).To(ConsistOf(runOf(sc, hour(6)), runOf(sc, hour(7))))
	}, wait).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(eventReasons(g, sc)).To(ContainElements("BackupCreated", "BackupDeleted"))
	}, wait).Should(Succeed())

	// Suspended, nothing new is taken, and two periods later the
	// backups are stale.
	got := getSchedule(g, sc)
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Suspend = true
	g.Expect(env.Client.Patch(ctx, got, patch)).To(Succeed())
	tick(t, sc, hour(9).Add(10*time.Second))
	g.Eventually(func(g Gomega) {
		got := getSchedule(g, sc)
		h := healthOf(got)
		g.Expect(h.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(h.Reason).To(Equal(etcdv1alpha1.ReasonBackupsStale))
		g.Expect(h.Message).To(ContainSubstring("spec.suspend is true"))
		g.Expect(got.Status.NextScheduleTime).To(BeNil())
	}, wait).Should(Succeed())
	g.Expect(scheduleBackups(g, sc)).To(HaveLen(2))
}

func TestScheduleSkipsARunPastItsDeadline(t *testing.T) {
	g := NewWithT(t)
	ns := env.Namespace(t)
	defer fakeClock.SetTime(fakeClock.Now())
	newCluster(t, ns, "kv", true, false)
	sc := newSchedule(t, ns, "late", func(s *etcdv1alpha1.EtcdBackupScheduleSpec) { s.StartingDeadlineSeconds = ptr.To[int64](60) })
	first := getSchedule(g, sc).CreationTimestamp.Truncate(time.Hour).Add(time.Hour)

	tick(t, sc, first.Add(10*time.Minute))
	g.Eventually(func(g Gomega) { g.Expect(eventReasons(g, sc)).To(ContainElement("MissedSchedule")) }, wait).Should(Succeed())
	g.Expect(scheduleBackups(g, sc)).To(BeEmpty())

	tick(t, sc, first.Add(time.Hour+30*time.Second))
	g.Eventually(func(g Gomega) { g.Expect(scheduleBackups(g, sc)).To(ConsistOf(runOf(sc, first.Add(time.Hour)))) }, wait).Should(Succeed())
}

func TestScheduleReportsWhatItCannotUse(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	sc := newSchedule(t, ns, "mars", func(s *etcdv1alpha1.EtcdBackupScheduleSpec) { s.TimeZone = ptr.To("Mars/Olympus_Mons") })
	g.Eventually(func(g Gomega) {
		h := healthOf(getSchedule(g, sc))
		g.Expect(h.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(h.Reason).To(Equal(etcdv1alpha1.ReasonInvalidSchedule))
		g.Expect(h.Message).To(ContainSubstring(`spec.timeZone "Mars/Olympus_Mons" is not a time zone of the IANA database, such as Europe/Berlin`))
		got := getSchedule(g, sc)
		g.Expect(apimeta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionStalled)).To(
			HaveField("Reason", etcdv1alpha1.ReasonInvalidSchedule))
		g.Expect(kstatusOf(g, got)).To(Equal(kstatus.FailedStatus))
	}, wait).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(eventReasons(g, sc)).To(ContainElement(etcdv1alpha1.ReasonInvalidSchedule)) }, wait).Should(Succeed())

	// A line the apiserver accepts but that never comes due.
	got := getSchedule(g, sc)
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.TimeZone, got.Spec.Schedule = ptr.To("Europe/Berlin"), "0 0 30 2 *"
	g.Expect(env.Client.Patch(ctx, got, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		h := healthOf(getSchedule(g, sc))
		g.Expect(h.Reason).To(Equal(etcdv1alpha1.ReasonInvalidSchedule))
		g.Expect(h.Message).To(ContainSubstring("never comes due"))
	}, wait).Should(Succeed())

	// Fixed, it is judged as any new schedule.
	got = getSchedule(g, sc)
	patch = client.MergeFrom(got.DeepCopy())
	got.Spec.Schedule = "@daily"
	g.Expect(env.Client.Patch(ctx, got, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := getSchedule(g, sc)
		g.Expect(healthOf(got).Reason).To(Equal(etcdv1alpha1.ReasonNoBackupsYet))
		g.Expect(got.Status.NextScheduleTime).NotTo(BeNil())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(apimeta.IsStatusConditionTrue(got.Status.Conditions, etcdv1alpha1.ConditionReady)).To(BeTrue(),
			"in force, though no backup completed yet")
		g.Expect(apimeta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionStalled)).To(BeNil())
		g.Expect(kstatusOf(g, got)).To(Equal(kstatus.CurrentStatus))
	}, wait).Should(Succeed())
}

// TestRetentionDeletesOnlyTheBackupItListed: retention decides on the
// backups it listed; when one of their names holds another object by the
// time it deletes (deleted and made again, by hand or by another owner),
// that object is left alone, and no deletion is claimed for it.
func TestRetentionDeletesOnlyTheBackupItListed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	live := newBackup(t, ns, "kv-old", "kv", nil)
	now := time.Now()
	sc := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hourly"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{Retention: etcdv1alpha1.Retention{KeepLast: ptr.To[int32](1)}}}
	r := &ScheduleReconciler{Client: env.Client, Recorder: events.NewFakeRecorder(10)}
	scope := func(uid types.UID) *scheduleScope {
		return &scheduleScope{schedule: sc, now: now, cron: cronSchedule{loc: time.UTC}, backups: []scheduledBackup{
			{name: "kv-new", uid: "new-uid", at: now.Add(-time.Hour), state: backupGood},
			{name: "kv-old", uid: uid, at: now.Add(-2 * time.Hour), state: backupGood},
		}}
	}

	s := scope("an-earlier-kv-old")
	g.Expect(r.applyRetention(ctx, s)).To(Succeed())
	g.Expect(s.backups[1].deleting).To(BeFalse(), "no deletion is claimed for an object retention did not list")
	g.Consistently(func(g Gomega) {
		g.Expect(getBackup(g, live).DeletionTimestamp).To(BeNil())
	}, time.Second).Should(Succeed())

	s = scope(live.UID)
	g.Expect(r.applyRetention(ctx, s)).To(Succeed())
	g.Expect(s.backups[1].deleting).To(BeTrue())
	g.Eventually(func() bool {
		got := &etcdv1alpha1.EtcdBackup{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(live), got)
		return apierrors.IsNotFound(err) || (err == nil && !got.DeletionTimestamp.IsZero())
	}, wait).Should(BeTrue())
}
