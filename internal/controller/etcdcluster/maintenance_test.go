package etcdcluster

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// The maintenance tests run the controller against the apiserver, with
// the members faked at the Members boundary (roll_test.go): they prove
// the order of the calls and what status and Events say. The calls
// themselves are proven against real etcd in internal/etcd.

const mib = 1 << 20

// sizes sets each member's database size and the part in use.
func sizes(fc *fakeCluster, db, inUse int64) {
	members.set(fc, func(fc *fakeCluster) {
		for name := range fc.up {
			fc.db[name], fc.inUse[name] = db, inUse
		}
	})
}

// annotate sets annotation key on c.
func annotate(g Gomega, c *etcdv1alpha1.EtcdCluster, key, value string) {
	got := getCluster(g, c)
	patch := client.MergeFrom(got.DeepCopy())
	if got.Annotations == nil {
		got.Annotations = map[string]string{}
	}
	got.Annotations[key] = value
	g.Expect(env.Client.Patch(context.Background(), got, patch)).To(Succeed())
}

// TestDefragmentationOnRequest: asked by the annotation, Tend defragments
// the followers, hands the leadership to one of them, then defragments the
// old leader; each step is in status and an Event; the same request does
// not start a second round.
func TestDefragmentationOnRequest(t *testing.T) {
	g := NewWithT(t)
	c, _ := startRollCluster(t, g, "v3.6.16", nil)
	fc := members.clusters[memberDomain(c)]
	sizes(fc, 80*mib, 20*mib) // below the default minimum size: nothing by threshold

	annotate(g, c, etcdv1alpha1.AnnotationDefragment, "2026-11-27T12:00:00Z")
	var round *etcdv1alpha1.DefragmentationStatus
	g.Eventually(func(g Gomega) {
		got := getCluster(g, c)
		g.Expect(got.Status.Maintenance).NotTo(BeNil())
		round = got.Status.Maintenance.Defragmentation
		g.Expect(round).NotTo(BeNil())
		g.Expect(round.Phase).To(Equal(etcdv1alpha1.DefragmentationCompleted))
	}, wait).Should(Succeed())
	g.Expect(round.Cause).To(Equal(etcdv1alpha1.DefragmentationRequested))
	g.Expect(round.Request).To(Equal("2026-11-27T12:00:00Z"))
	g.Expect(round.Members).To(Equal([]string{"roll-0", "roll-2", "roll-1"}), "followers first, the leader last")
	g.Expect(round.Results).To(HaveLen(3))
	for _, res := range round.Results {
		g.Expect(res.Before.Value()).To(BeEquivalentTo(80 * mib))
		g.Expect(res.After.Value()).To(BeEquivalentTo(20 * mib))
		g.Expect(res.Duration.Duration).To(Equal(1500 * time.Millisecond))
	}
	members.get(fc, func(fc *fakeCluster) {
		g.Expect(fc.defrags).To(Equal([]string{"roll-0", "roll-2", "roll-1"}))
		g.Expect(fc.moves).To(Equal([]string{"roll-2"}), "one move, to the member done last")
	})
	g.Expect(eventsOf(g, c, "Defragmented")).To(HaveLen(3))
	g.Expect(eventsOf(g, c, "DefragmentationCompleted")).To(HaveLen(1))

	g.Consistently(func(g Gomega) {
		members.get(fc, func(fc *fakeCluster) { g.Expect(fc.defrags).To(HaveLen(3), "a request is answered once") })
	}, 3*time.Second).Should(Succeed())
}

// TestDefragmentationByThresholdStallsOnFailure: members past the
// threshold start a round by themselves; a member whose defragmentation
// fails stalls it, Degraded says so, and no round starts again until
// someone asks.
func TestDefragmentationByThresholdStallsOnFailure(t *testing.T) {
	g := NewWithT(t)
	c, _ := startRollCluster(t, g, "v3.6.16", func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Maintenance.Defragmentation = &etcdv1alpha1.Defragmentation{MinimumSize: resource.NewQuantity(10*mib, resource.BinarySI), FragmentationPercent: ptr.To[int32](50)}
	})
	fc := members.clusters[memberDomain(c)]
	members.set(fc, func(fc *fakeCluster) { fc.defragFailed = errors.New("context deadline exceeded") })
	sizes(fc, 40*mib, 10*mib)
	poke(g, c)

	g.Eventually(func(g Gomega) {
		got := getCluster(g, c)
		g.Expect(got.Status.Maintenance).NotTo(BeNil())
		round := got.Status.Maintenance.Defragmentation
		g.Expect(round).NotTo(BeNil())
		g.Expect(round.Cause).To(Equal(etcdv1alpha1.DefragmentationThreshold))
		g.Expect(round.Phase).To(Equal(etcdv1alpha1.DefragmentationStalled))
		g.Expect(round.Message).To(ContainSubstring("roll-0"))
		g.Expect(round.Message).To(ContainSubstring("roll-0 is healthy again"), "the member was looked at")
		d := condition(got, etcdv1alpha1.ConditionDegraded)
		g.Expect(d.Reason).To(Equal(etcdv1alpha1.ReasonDefragmentationStalled))
		g.Expect(condition(got, etcdv1alpha1.ConditionStalled).Status).To(Equal(metav1.ConditionTrue))
	}, wait).Should(Succeed())

	members.set(fc, func(fc *fakeCluster) { fc.defragFailed = nil })
	g.Consistently(func(g Gomega) {
		members.get(fc, func(fc *fakeCluster) { g.Expect(fc.defrags).To(BeEmpty(), "a stalled round waits for a person") })
	}, 3*time.Second).Should(Succeed())

	annotate(g, c, etcdv1alpha1.AnnotationDefragment, "again")
	g.Eventually(func(g Gomega) {
		got := getCluster(g, c)
		g.Expect(got.Status.Maintenance.Defragmentation.Phase).To(Equal(etcdv1alpha1.DefragmentationCompleted))
		g.Expect(condition(got, etcdv1alpha1.ConditionDegraded).Status).To(Equal(metav1.ConditionFalse))
	}, wait).Should(Succeed())
}

// TestNoSpaceRecovers: a NOSPACE alarm (Auto) is compacted away,
// every member defragmented and the alarm disarmed; with data that fills
// the quota alone, Tend does not disarm and says what to raise.
func TestNoSpaceRecovers(t *testing.T) {
	g := NewWithT(t)
	c, _ := startRollCluster(t, g, "v3.6.16", func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Options.QuotaBackendBytes = resource.NewQuantity(64*mib, resource.BinarySI)
	})
	fc := members.clusters[memberDomain(c)]
	members.set(fc, func(fc *fakeCluster) { fc.noSpace, fc.rev = true, 5000 })
	sizes(fc, 64*mib, 20*mib)
	poke(g, c)

	g.Eventually(func(g Gomega) {
		got := getCluster(g, c)
		members.get(fc, func(fc *fakeCluster) {
			g.Expect(fc.noSpace).To(BeFalse(), "disarmed")
			g.Expect(fc.defrags).To(ConsistOf("roll-0", "roll-1", "roll-2"))
		})
		g.Expect(got.Status.Maintenance.NoSpace).To(BeNil(), "the recovery ended")
		g.Expect(condition(got, etcdv1alpha1.ConditionDegraded).Status).To(Equal(metav1.ConditionFalse), "%+v", condition(got, etcdv1alpha1.ConditionDegraded))
	}, wait).Should(Succeed())
	g.Expect(eventsOf(g, c, etcdv1alpha1.ReasonNoSpace)).To(HaveLen(1))
	g.Expect(eventsOf(g, c, "NoSpaceCleared")).To(HaveLen(1))
	members.get(fc, func(fc *fakeCluster) {
		g.Expect(fc.compactions).To(BeEmpty(), "no revision was an hour old yet, and the retention's round freed enough")
	})

	// Now the data alone fills the quota, a while later.
	stepPastNow(time.Minute)
	members.set(fc, func(fc *fakeCluster) { fc.noSpace, fc.rev = true, 6000 })
	sizes(fc, 64*mib, 62*mib)
	poke(g, c)
	g.Eventually(func(g Gomega) {
		got := getCluster(g, c)
		g.Expect(got.Status.Maintenance.NoSpace).NotTo(BeNil())
		g.Expect(got.Status.Maintenance.NoSpace.Stage).To(Equal(etcdv1alpha1.NoSpaceTooLarge))
		d := condition(got, etcdv1alpha1.ConditionDegraded)
		g.Expect(d.Reason).To(Equal(etcdv1alpha1.ReasonNoSpaceTooLarge))
		g.Expect(d.Message).To(ContainSubstring("spec.options.quotaBackendBytes"))
		g.Expect(d.Message).To(ContainSubstring("62Mi"))
	}, wait).Should(Succeed())
	members.get(fc, func(fc *fakeCluster) {
		g.Expect(fc.noSpace).To(BeTrue(), "not disarmed: it would come back at once")
		g.Expect(fc.compactions).To(Equal([]int64{6000}), "compacted to the current revision before giving up")
	})
}

// TestCompactionByRevisions: Tend compacts to the current revision less
// the count, records it, and does not compact again until the revision has
// moved by a tenth of the count.
func TestCompactionByRevisions(t *testing.T) {
	g := NewWithT(t)
	c, _ := startRollCluster(t, g, "v3.6.16", func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Maintenance.Compaction = &etcdv1alpha1.Compaction{Revisions: ptr.To[int64](1000)}
	})
	fc := members.clusters[memberDomain(c)]
	members.set(fc, func(fc *fakeCluster) { fc.rev = 5000 })
	poke(g, c)
	g.Eventually(func(g Gomega) {
		got := getCluster(g, c)
		g.Expect(got.Status.Maintenance).NotTo(BeNil())
		g.Expect(got.Status.Maintenance.Compaction).NotTo(BeNil())
		g.Expect(got.Status.Maintenance.Compaction.Revision).To(BeEquivalentTo(4000))
		g.Expect(got.Status.Maintenance.Compaction.By).To(Equal(compactedByTend))
		g.Expect(got.Status.Maintenance.Compaction.Retention).To(Equal("1000 revisions"))
	}, wait).Should(Succeed())
	members.set(fc, func(fc *fakeCluster) { fc.rev = 5050 })
	poke(g, c)
	g.Consistently(func(g Gomega) {
		members.get(fc, func(fc *fakeCluster) { g.Expect(fc.compactions).To(Equal([]int64{4000})) })
	}, 3*time.Second).Should(Succeed())
}

// poke starts a pass now rather than at the next steady look: a changed
// annotation does.
func poke(g Gomega, c *etcdv1alpha1.EtcdCluster) {
	annotate(g, c, "test.tend.dev/poke", time.Now().Format(time.RFC3339Nano))
}

// eventsOf lists the Events about c with reason.
func eventsOf(g Gomega, c *etcdv1alpha1.EtcdCluster, reason string) []corev1.Event {
	var list corev1.EventList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(c.Namespace))).To(Succeed())
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Reason == reason && e.InvolvedObject.Name == c.Name {
			out = append(out, e)
		}
	}
	return out
}

// TestVolumesGrow: a larger spec.storage.size asks every member claim for
// it where the StorageClass allows expansion, reports the resize until
// the volumes have it, and restarts no member; where the class does not,
// Degraded says so and nothing is asked.
func TestVolumesGrow(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	classes := map[bool]string{}
	for _, expand := range []bool{true, false} {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{GenerateName: "tend-test-"}, Provisioner: "example.com/tend-test", AllowVolumeExpansion: ptr.To(expand)}
		g.Expect(env.Client.Create(ctx, sc)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sc) })
		classes[expand] = sc.Name
	}
	// A quota of its own: a size that sets the quota would roll the members.
	c, p := startRollCluster(t, g, "v3.6.16", func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Storage.StorageClassName = ptr.To(classes[true])
		s.Options.QuotaBackendBytes = resource.NewQuantity(512*mib, resource.BinarySI)
	})
	bindClaims(g, c, "1Gi")

	patchSpec(g, c, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.Size = ptr.To(resource.MustParse("2Gi")) })
	g.Eventually(func(g Gomega) {
		for i := range 3 {
			pvc := &corev1.PersistentVolumeClaim{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: pvcName(c, i)}, pvc)).To(Succeed())
			g.Expect(pvc.Spec.Resources.Requests.Storage().String()).To(Equal("2Gi"))
		}
		got := getCluster(g, c)
		prog := condition(got, etcdv1alpha1.ConditionProgressing)
		g.Expect(prog.Reason).To(Equal(etcdv1alpha1.ReasonExpandingVolumes))
		g.Expect(prog.Message).To(ContainSubstring("data-roll-0: 1Gi of 2Gi"))
	}, wait).Should(Succeed())
	g.Expect(eventsOf(g, c, "ExpandingVolumes")).To(HaveLen(1))

	bindClaims(g, c, "2Gi") // the volumes grew
	g.Eventually(func(g Gomega) {
		got := getCluster(g, c)
		g.Expect(condition(got, etcdv1alpha1.ConditionProgressing).Reason).To(Equal(etcdv1alpha1.ReasonStable))
		g.Expect(condition(got, etcdv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
	}, wait).Should(Succeed())
	for _, n := range p.made {
		g.Expect(n).To(Equal(1), "no member restarted")
	}

	// A class that cannot grow: the members are to move onto new claims,
	// and nothing moves before the migration's backup is verified. No
	// claim is asked to grow, and the StatefulSet is left as it is.
	fixed, _ := startRollCluster(t, g, "v3.6.16", func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Storage.StorageClassName = ptr.To(classes[false])
		s.Options.QuotaBackendBytes = resource.NewQuantity(512*mib, resource.BinarySI)
	})
	bindClaims(g, fixed, "1Gi")
	sts := &appsv1.StatefulSet{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: fixed.Namespace, Name: statefulSetName(fixed)}, sts)).To(Succeed())
	patchSpec(g, fixed, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.Size = ptr.To(resource.MustParse("2Gi")) })
	g.Eventually(func(g Gomega) {
		got := getCluster(g, fixed)
		prog := condition(got, etcdv1alpha1.ConditionProgressing)
		g.Expect(prog.Reason).To(Equal(etcdv1alpha1.ReasonMigratingVolumes))
		mig := got.Status.Maintenance.VolumeMigration
		g.Expect(mig).NotTo(BeNil())
		g.Expect(mig.Phase).To(Equal(etcdv1alpha1.MigrationBackingUp))
		g.Expect(mig.Remaining).To(ConsistOf("roll-0", "roll-1", "roll-2"))
		g.Expect(mig.Size.String()).To(Equal("2Gi"))
		g.Expect(prog.Message).To(ContainSubstring("Waiting for EtcdBackup %s", mig.Backup))
		b := &etcdv1alpha1.EtcdBackup{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: fixed.Namespace, Name: mig.Backup}, b)).To(Succeed())
		g.Expect(metav1.IsControlledBy(b, got)).To(BeTrue())
		g.Expect(ptr.Deref(b.Spec.Verify, true)).To(BeTrue(), "the backup is verified")
	}, wait).Should(Succeed())
	g.Expect(eventsOf(g, fixed, "MigrationBackup")).To(HaveLen(1))
	pvc := &corev1.PersistentVolumeClaim{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: fixed.Namespace, Name: pvcName(fixed, 0)}, pvc)).To(Succeed())
	g.Expect(pvc.Spec.Resources.Requests.Storage().String()).To(Equal("1Gi"))
	after := &appsv1.StatefulSet{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: fixed.Namespace, Name: statefulSetName(fixed)}, after)).To(Succeed())
	g.Expect(after.UID).To(Equal(sts.UID))
	g.Expect(after.DeletionTimestamp).To(BeNil(), "the StatefulSet is remade only after the backup")
}

// bindClaims gives the cluster's member claims the phase and capacity of
// a bound volume of size, as the volume controllers would.
func bindClaims(g Gomega, c *etcdv1alpha1.EtcdCluster, size string) {
	for i := range 3 {
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: pvcName(c, i)}, pvc)).To(Succeed())
		pvc.Status.Phase = corev1.ClaimBound
		pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}
		g.Expect(env.Client.Status().Update(context.Background(), pvc)).To(Succeed())
	}
}
