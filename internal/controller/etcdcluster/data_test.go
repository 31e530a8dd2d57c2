package etcdcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// These tests cover the cluster's side of backups and restores: the
// connection ConfigMap, deletion policies with the final snapshot, stale
// volumes, and the restore of a new cluster. No backup controller runs in
// this suite and no kubelet runs Jobs: the tests write the EtcdBackups'
// and Jobs' status themselves, as those would.

// memberPVC makes the claim a member would have, as the StatefulSet
// controller (which envtest does not run) would.
func memberPVC(g Gomega, c *etcdv1alpha1.EtcdCluster, i int, uid string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: pvcName(c, i), Labels: map[string]string{LabelCluster: c.Name}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if uid != "" {
		pvc.Labels[labelClusterUID] = uid
	}
	g.Expect(env.Client.Create(context.Background(), pvc)).To(Succeed())
	return pvc
}

// formedPVC makes the claim of member i of a cluster that formed: a member
// was seen healthy on it, and it carries the member's ID.
func formedPVC(g Gomega, c *etcdv1alpha1.EtcdCluster, i int) *corev1.PersistentVolumeClaim {
	pvc := memberPVC(g, c, i, string(c.UID))
	patch := client.MergeFrom(pvc.DeepCopy())
	pvc.Annotations = map[string]string{annotationMemberID: "8e9e05c52164694d"}
	g.Expect(env.Client.Patch(context.Background(), pvc, patch)).To(Succeed())
	return pvc
}

// TestDeletingAClusterThatNeverFormedTakesNoSnapshot: a cluster whose
// members never started (here: envtest runs no pods) holds no data, and
// its deletion with deletionPolicy Snapshot does not wait for a final
// backup that could never be taken.
func TestDeletingAClusterThatNeverFormedTakesNoSnapshot(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := newCluster(ns, "never", nil)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "never"}, &appsv1.StatefulSet{})
	}, wait).Should(Succeed())
	memberPVC(g, c, 0, string(c.UID)) // made, never marked: no member ran on it
	g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) { gone(g, c) }, wait).Should(Succeed())
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: FinalBackupName(c)}, &etcdv1alpha1.EtcdBackup{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no final backup: %v", err)
	g.Expect(eventReasons(g, c)).To(ContainElement("FinalSnapshotSkipped"))
}

func gone(g Gomega, obj client.Object) {
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s still exists (%v)", obj, obj.GetName(), err)
}

// deleting returns a claim that is gone or only held by its protection
// finalizer (envtest runs no controller that lets it go).
func deleting(g Gomega, pvc *corev1.PersistentVolumeClaim) {
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(pvc), pvc)
	if apierrors.IsNotFound(err) {
		return
	}
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pvc.DeletionTimestamp).NotTo(BeNil(), "volume claim %s is not being deleted", pvc.Name)
}

func setBackupConditions(g Gomega, b *etcdv1alpha1.EtcdBackup, conds ...metav1.Condition) {
	ctx := context.Background()
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
	for _, cond := range conds {
		cond.Reason, cond.Message = "Test", cond.Type+" set by the test"
		apimeta.SetStatusCondition(&b.Status.Conditions, cond)
	}
	g.Expect(env.Client.Status().Update(ctx, b)).To(Succeed())
}

func TestConnectionConfigMapIsPublished(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := newCluster(ns, "conn", nil)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	cm := &corev1.ConfigMap{}
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "conn-connection"}, cm)
	}, wait).Should(Succeed())
	ownedBy(g, cm, c)
	ca := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "conn-ca"}, ca)).To(Succeed())
	g.Expect(cm.Data["ca.crt"]).To(Equal(string(ca.Data["tls.crt"])))
	g.Expect(strings.Split(cm.Data["endpoints"], ",")).To(HaveLen(3))
	g.Expect(cm.Data["clientSecret"]).To(Equal("conn-client-tls"))
}

func TestDeleteWithSnapshotTakesTheFinalBackupFirst(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := newCluster(ns, "snap", nil)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "snap"}}
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(sts), sts) }, wait).Should(Succeed())
	g.Expect(getCluster(g, c).Finalizers).To(ContainElement(finalizerData))
	pvc := formedPVC(g, c, 0)

	g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
	backup := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: FinalBackupName(getCluster(g, c))}}
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(backup), backup) }, wait).Should(Succeed())
	g.Expect(backup.Spec.Destination.Volume.ClaimName).To(Equal("snap-final-snapshot"))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "snap-final-snapshot"}, &corev1.PersistentVolumeClaim{})).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := getCluster(g, c)
		d := condition(got, etcdv1alpha1.ConditionDeleting)
		g.Expect(d.Reason).To(Equal(etcdv1alpha1.ReasonTakingFinalSnapshot))
		g.Expect(got.Status.Phase).To(Equal(etcdv1alpha1.PhaseDeleting))
	}, wait).Should(Succeed())
	// Nothing is deleted while the snapshot runs.
	g.Consistently(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(sts), &appsv1.StatefulSet{}) }, 2*time.Second).Should(Succeed())

	setBackupConditions(g, backup,
		metav1.Condition{Type: etcdv1alpha1.BackupComplete, Status: metav1.ConditionTrue},
		metav1.Condition{Type: etcdv1alpha1.BackupVerified, Status: metav1.ConditionTrue})
	g.Eventually(func(g Gomega) { gone(g, c) }, wait).Should(Succeed())
	gone(g, sts)
	deleting(g, pvc)
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(backup), backup)).To(Succeed(), "the final snapshot outlives its cluster")
}

func TestDeleteWaitsWhenTheFinalSnapshotFailsUntilTold(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := newCluster(ns, "stuck", nil)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "stuck"}, &appsv1.StatefulSet{})
	}, wait).Should(Succeed())
	formedPVC(g, c, 0)
	g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
	backup := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: FinalBackupName(getCluster(g, c))}}
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKeyFromObject(backup), backup) }, wait).Should(Succeed())
	setBackupConditions(g, backup, metav1.Condition{Type: etcdv1alpha1.BackupFailed, Status: metav1.ConditionTrue})
	g.Eventually(func(g Gomega) {
		d := condition(getCluster(g, c), etcdv1alpha1.ConditionDeleting)
		g.Expect(d.Reason).To(Equal(etcdv1alpha1.ReasonFinalSnapshotFailed))
		g.Expect(d.Message).To(ContainSubstring(etcdv1alpha1.AnnotationSkipFinalSnapshot + "=true"))
	}, wait).Should(Succeed())

	got := getCluster(g, c)
	patch := client.MergeFrom(got.DeepCopy())
	got.Annotations = map[string]string{etcdv1alpha1.AnnotationSkipFinalSnapshot: "true"}
	g.Expect(env.Client.Patch(ctx, got, patch)).To(Succeed())
	g.Eventually(func(g Gomega) { gone(g, c) }, wait).Should(Succeed())
}

func TestDeletePoliciesDeleteAndRetain(t *testing.T) {
	ctx := context.Background()
	for _, policy := range []etcdv1alpha1.DeletionPolicy{etcdv1alpha1.DeletionDelete, etcdv1alpha1.DeletionRetain} {
		t.Run(string(policy), func(t *testing.T) {
			g := NewWithT(t)
			ns := env.Namespace(t)
			c := newCluster(ns, "p", func(s *etcdv1alpha1.EtcdClusterSpec) { s.DeletionPolicy = policy })
			g.Expect(env.Client.Create(ctx, c)).To(Succeed())
			g.Eventually(func() error {
				return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "p"}, &appsv1.StatefulSet{})
			}, wait).Should(Succeed())
			pvc := memberPVC(g, c, 0, string(c.UID))
			if policy == etcdv1alpha1.DeletionDelete {
				g.Eventually(func(g Gomega) { g.Expect(getCluster(g, c).Finalizers).To(ContainElement(finalizerData)) }, wait).Should(Succeed())
			}
			g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
			g.Eventually(func(g Gomega) { gone(g, c) }, wait).Should(Succeed())
			var backups etcdv1alpha1.EtcdBackupList
			g.Expect(env.Client.List(ctx, &backups, client.InNamespace(ns))).To(Succeed())
			g.Expect(backups.Items).To(BeEmpty(), "no final snapshot with %s", policy)
			if policy == etcdv1alpha1.DeletionDelete {
				deleting(g, pvc)
				return
			}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc)).To(Succeed())
			g.Expect(pvc.DeletionTimestamp).To(BeNil(), "Retain keeps the volumes")
		})
	}
}

func TestANewClusterDoesNotStartOnAnOlderClustersVolumes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := newCluster(ns, "again", nil)
	memberPVC(g, c, 1, "an-older-cluster")
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		d := condition(getCluster(g, c), etcdv1alpha1.ConditionDegraded)
		g.Expect(d.Reason).To(Equal(etcdv1alpha1.ReasonStaleVolumes))
		g.Expect(d.Message).To(ContainSubstring("data-again-1"))
	}, wait).Should(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "again"}, &appsv1.StatefulSet{})).NotTo(Succeed())

	got := getCluster(g, c)
	patch := client.MergeFrom(got.DeepCopy())
	got.Annotations = map[string]string{etcdv1alpha1.AnnotationAdoptVolumes: "true"}
	g.Expect(env.Client.Patch(ctx, got, patch)).To(Succeed())
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "again"}, &appsv1.StatefulSet{})
	}, wait).Should(Succeed())
}

// TestDeletingANewClusterKeepsAnOlderClustersVolumes: a cluster deleted
// with Retain keeps its volumes; a new cluster of the same name refuses
// them (StaleVolumes); deleting the new one, with either policy that
// deletes volumes, must leave the older cluster's data alone.
func TestDeletingANewClusterKeepsAnOlderClustersVolumes(t *testing.T) {
	ctx := context.Background()
	for _, policy := range []etcdv1alpha1.DeletionPolicy{etcdv1alpha1.DeletionSnapshot, etcdv1alpha1.DeletionDelete} {
		t.Run(string(policy), func(t *testing.T) {
			g := NewWithT(t)
			ns := env.Namespace(t)
			c := newCluster(ns, "x", func(s *etcdv1alpha1.EtcdClusterSpec) { s.DeletionPolicy = policy })
			kept := memberPVC(g, c, 0, "the-older-clusters-uid")
			patch := client.MergeFrom(kept.DeepCopy())
			kept.Annotations = map[string]string{annotationMemberID: "8e9e05c52164694d"} // a member ran on it: it holds data
			g.Expect(env.Client.Patch(ctx, kept, patch)).To(Succeed())

			g.Expect(env.Client.Create(ctx, c)).To(Succeed())
			g.Eventually(func(g Gomega) {
				got := getCluster(g, c)
				g.Expect(got.Finalizers).To(ContainElement(finalizerData))
				g.Expect(condition(got, etcdv1alpha1.ConditionDegraded).Reason).To(Equal(etcdv1alpha1.ReasonStaleVolumes))
			}, wait).Should(Succeed())
			g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
			g.Eventually(func(g Gomega) { gone(g, c) }, wait).Should(Succeed())

			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(kept), kept)).To(Succeed())
			g.Expect(kept.DeletionTimestamp).To(BeNil(), "the older cluster's volume claim must stay")
			g.Expect(kept.Labels[labelClusterUID]).To(Equal("the-older-clusters-uid"))
		})
	}
}

// TestAdoptedVolumesBecomeTheClustersOwn: a cluster that adopts an older
// cluster's volumes labels them with its own UID, so that it marks and
// deletes them as its members' from then on.
func TestAdoptedVolumesBecomeTheClustersOwn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := newCluster(ns, "adopter", func(s *etcdv1alpha1.EtcdClusterSpec) { s.DeletionPolicy = etcdv1alpha1.DeletionDelete })
	c.Annotations = map[string]string{etcdv1alpha1.AnnotationAdoptVolumes: "true"}
	pvc := memberPVC(g, c, 0, "the-older-clusters-uid")
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc)).To(Succeed())
		g.Expect(pvc.Labels[labelClusterUID]).To(Equal(string(c.UID)))
	}, wait).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(eventReasons(g, c)).To(ContainElement("VolumeAdopted")) }, wait).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) { gone(g, c) }, wait).Should(Succeed())
	g.Eventually(func(g Gomega) { deleting(g, pvc) }, wait).Should(Succeed())
}

// TestARestoreTakesNoJobItDidNotMake: a Job that has the name of a
// member's restore Job, but that Tend did not make for this cluster, is
// neither taken as the restore's (its Complete says nothing of the
// member's volume) nor deleted; the status says why the restore waits.
func TestARestoreTakesNoJobItDidNotMake(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := newCluster(ns, "rs", func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Replicas = ptr.To[int32](1)
		s.Bootstrap = &etcdv1alpha1.Bootstrap{Restore: &etcdv1alpha1.BootstrapRestore{Source: &etcdv1alpha1.RestoreSource{
			S3: &etcdv1alpha1.S3Location{Bucket: "bkt", Key: "etcd/x.db"}}}}
	})
	foreign := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: restoreJobName(c, 0)},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
	}
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	completeJob(g, foreign)

	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		r := condition(getCluster(g, c), etcdv1alpha1.ConditionRestored)
		g.Expect(r.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(r.Message).To(ContainSubstring("Job " + foreign.Name + " exists but is not made by Tend for this cluster"))
	}, wait).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: statefulSetName(c)}, &appsv1.StatefulSet{})).NotTo(Succeed(),
			"the members must not start on a volume no restore filled")
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), foreign)).To(Succeed())
		g.Expect(foreign.DeletionTimestamp).To(BeNil())
	}, 3*time.Second).Should(Succeed())
}

// completeJob plays the Job controller's part for a finished Job.
func completeJob(g Gomega, job *batchv1.Job) {
	now := metav1.Now()
	job.Status.StartTime = &now
	job.Status.CompletionTime = &now
	job.Status.Succeeded = 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	g.Expect(env.Client.Status().Update(context.Background(), job)).To(Succeed())
}

func TestRestoreFromABackupFillsTheVolumesBeforeTheMembersStart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	backup := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterRef: etcdv1alpha1.ClusterReference{Name: "old"}, BackupOptions: etcdv1alpha1.BackupOptions{
			Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "bkt", Prefix: "etcd/"}},
			Compression: etcdv1alpha1.CompressionGzip,
		}},
	}
	g.Expect(env.Client.Create(ctx, backup)).To(Succeed())
	c := newCluster(ns, "new", func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Bootstrap = &etcdv1alpha1.Bootstrap{Restore: &etcdv1alpha1.BootstrapRestore{BackupRef: &corev1.LocalObjectReference{Name: "nightly"}}}
	})
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		r := condition(getCluster(g, c), etcdv1alpha1.ConditionRestored)
		g.Expect(r.Reason).To(Equal(etcdv1alpha1.ReasonWaitingForBackup))
		g.Expect(r.Message).To(ContainSubstring("nightly"))
	}, wait).Should(Succeed())

	// The backup completes: its event starts the restore.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(backup), backup)).To(Succeed())
	backup.Status.Artifact = &etcdv1alpha1.Artifact{URI: "s3://bkt/etcd/" + ns + "/nightly.db.gz", SizeBytes: 10, SHA256: strings.Repeat("b", 64), Compression: etcdv1alpha1.CompressionGzip}
	backup.Status.Snapshot = &etcdv1alpha1.SnapshotInfo{Member: "old-0", Revision: 42, DBSizeBytes: 20}
	apimeta.SetStatusCondition(&backup.Status.Conditions, metav1.Condition{Type: etcdv1alpha1.BackupComplete, Status: metav1.ConditionTrue, Reason: "Test"})
	g.Expect(env.Client.Status().Update(ctx, backup)).To(Succeed())

	jobs := make([]*batchv1.Job, 3)
	for i := range jobs {
		jobs[i] = &batchv1.Job{}
		g.Eventually(func() error {
			return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: restoreJobName(c, i)}, jobs[i])
		}, wait).Should(Succeed())
		ownedBy(g, jobs[i], c)
		fetch := jobs[i].Spec.Template.Spec.InitContainers[1]
		g.Expect(fetch.Command).To(ContainElements("--from=s3://bkt/etcd/"+ns+"/nightly.db.gz", "--sha256="+strings.Repeat("b", 64), "--compression=Gzip"))
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pvcName(c, i)}, pvc)).To(Succeed())
		g.Expect(pvc.Labels).To(HaveKeyWithValue(labelClusterUID, string(getCluster(g, c).UID)))
	}
	g.Eventually(func(g Gomega) {
		got := getCluster(g, c)
		g.Expect(condition(got, etcdv1alpha1.ConditionProgressing).Reason).To(Equal(etcdv1alpha1.ReasonRestoring))
		g.Expect(got.Status.Phase).To(Equal(etcdv1alpha1.PhaseRestoring))
	}, wait).Should(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "new"}, &appsv1.StatefulSet{})).NotTo(Succeed(),
		"no member starts before every volume is restored")

	for _, job := range jobs {
		completeJob(g, job)
	}
	sts := &appsv1.StatefulSet{}
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "new"}, sts) }, wait).Should(Succeed())
	g.Expect(envOf(sts)).To(HaveKeyWithValue("ETCD_INITIAL_CLUSTER_STATE", "new"))
	for _, job := range jobs {
		// Its pod mounts the member's claim, and would keep Tend from
		// deleting the claim later (pvc-protection counts completed pods).
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}))
		}, wait).Should(BeTrue(), "the finished restore Job %s is deleted", job.Name)
	}
	g.Eventually(func(g Gomega) {
		got := getCluster(g, c)
		r := condition(got, etcdv1alpha1.ConditionRestored)
		g.Expect(r.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(r.Message).To(ContainSubstring("EtcdBackup nightly"))
		g.Expect(r.Message).To(ContainSubstring("revision 42"))
		g.Expect(got.Status.RestoredFrom).To(HaveField("Revision", int64(42)))
		g.Expect(condition(got, etcdv1alpha1.ConditionDegraded).Reason).To(Equal(etcdv1alpha1.ReasonAsExpected),
			"the restored volumes are the cluster's own, not stale")
	}, wait).Should(Succeed())
}

// A StatefulSet of the cluster's name that another owner holds (an older
// cluster of the same name on its way out) is not taken for this
// cluster's: its pods hold the older cluster's data.
func TestAStatefulSetOfAnotherOwnerIsNotTaken(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	older := newCluster(ns, "older", nil)
	older.UID = "older-uid"
	foreign := statefulSet(older, 1, Bootstrap{State: "new"})
	foreign.Name = "twin"
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	c := newCluster(ns, "twin", nil)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		a := condition(getCluster(g, c), etcdv1alpha1.ConditionAvailable)
		g.Expect(a.Message).To(ContainSubstring("belongs to another owner"))
	}, wait).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, foreign)).To(Succeed())
	g.Eventually(func(g Gomega) {
		sts := &appsv1.StatefulSet{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "twin"}, sts)).To(Succeed())
		g.Expect(metav1.IsControlledBy(sts, getCluster(g, c))).To(BeTrue())
	}, wait).Should(Succeed())
}
