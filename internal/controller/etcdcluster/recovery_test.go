package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tend-dev/tend/internal/etcdnames"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcd"
	"github.com/tend-dev/tend/internal/scheme"
	"github.com/tend-dev/tend/internal/testenv"
)

// The recovery tests drive Reconcile pass by pass on the fake client: a
// recovery is a sequence of steps whose state lives on the objects, and
// each test plays the parts of the StatefulSet controller, the Job
// controller and etcd between the passes, then checks the world the pass
// left. envtest would add nothing here but waiting: no kubelet runs the
// Jobs, and etcd is faked at the Members boundary either way.

// scriptedEtcd is the members of one cluster as the recovery tests script
// them: Status answers statuses (nil: the members do not answer), and the
// authentication calls change the store's auth state.
type scriptedEtcd struct {
	mu       sync.Mutex
	statuses []etcd.MemberStatus
	// auth is the restored store's authentication: on, and root's
	// password.
	authOn       bool
	rootPassword string
	// learners counts the members added.
	learners int
}

func (e *scriptedEtcd) connect(context.Context, etcd.Config) (Members, error) {
	return &scriptedClient{e: e}, nil
}

// answer scripts what Status says from now on.
func (e *scriptedEtcd) answer(statuses []etcd.MemberStatus) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.statuses = statuses
}

// auth reads the store's authentication.
func (e *scriptedEtcd) auth() (bool, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.authOn, e.rootPassword
}

type scriptedClient struct{ e *scriptedEtcd }

func (c *scriptedClient) Status(context.Context) ([]etcd.MemberStatus, error) {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	if c.e.statuses == nil {
		return nil, fmt.Errorf("connection refused")
	}
	return slices.Clone(c.e.statuses), nil
}

func (c *scriptedClient) AddLearner(_ context.Context, peer string) (etcd.Member, error) {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	c.e.learners++
	m := etcd.Member{ID: etcd.MemberID(0xf00 + c.e.learners), PeerURLs: []string{peer}}
	c.e.statuses = append(c.e.statuses, etcd.MemberStatus{Member: m, Err: fmt.Errorf("not started")})
	return m, nil
}

func (c *scriptedClient) Promote(context.Context, etcd.MemberID) error    { return nil }
func (c *scriptedClient) Remove(context.Context, etcd.MemberID) error     { return nil }
func (c *scriptedClient) MoveLeader(context.Context, etcd.MemberID) error { return nil }

func (c *scriptedClient) EnableAuth(_ context.Context, password string) error {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	if !c.e.authOn {
		// etcd keeps the password root has, if the user exists.
		c.e.authOn = true
		if c.e.rootPassword == "" {
			c.e.rootPassword = password
		}
	}
	return nil
}

func (c *scriptedClient) SetRootPassword(_ context.Context, password string) error {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	c.e.rootPassword = password
	return nil
}

func (c *scriptedClient) Compact(context.Context, int64) error {
	return errors.New("the recovery tests compact nothing")
}
func (c *scriptedClient) Defragment(context.Context, string) (etcd.Defragmented, error) {
	return etcd.Defragmented{}, errors.New("the recovery tests defragment nothing")
}
func (c *scriptedClient) DisarmNoSpace(context.Context) (int, error) { return 0, nil }
func (c *scriptedClient) DisableAuth(context.Context) error {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	c.e.authOn = false
	return nil
}

func (c *scriptedClient) Close() error { return nil }

// voters are healthy voting members of c at the ordinals, with the IDs
// base+ordinal, the first one leading.
func voters(c *etcdv1alpha1.EtcdCluster, base etcd.MemberID, ordinals ...int) []etcd.MemberStatus {
	var out []etcd.MemberStatus
	for _, i := range ordinals {
		name := memberName(c, i)
		out = append(out, etcd.MemberStatus{
			Member: etcd.Member{ID: base + etcd.MemberID(i), Name: name,
				PeerURLs: []string{peerURL(c, name)}, ClientURLs: []string{memberClientURL(c, name)}},
			Answered: true, Healthy: true, Leader: base + etcd.MemberID(ordinals[0]),
			RaftTerm: 2, RaftIndex: 60, RaftAppliedIndex: 60, Revision: 42, Version: "3.6.16",
		})
	}
	return out
}

// oldID is the ID of the i-th member before a recovery.
func oldID(i int) etcd.MemberID { return etcd.MemberID(0xa0 + i) }

// recoveryWorld is one formed cluster in the fake client, and the parts a
// test plays.
type recoveryWorld struct {
	t     *testing.T
	g     *WithT
	ctx   context.Context
	c     *etcdv1alpha1.EtcdCluster
	cl    client.Client
	r     *Reconciler
	etcd  *scriptedEtcd
	clock *clocktesting.FakeClock
}

// newRecoveryWorld makes an Available 3-member cluster "kv" in namespace
// "db", with auth on: its StatefulSet of 3, the members' pods (running,
// with IPs) and their volume claims (marked with the members' IDs), and its
// completed init Job. mutate changes the cluster before it is stored;
// extra objects are stored too.
func newRecoveryWorld(t *testing.T, mutate func(*etcdv1alpha1.EtcdCluster), extra ...client.Object) *recoveryWorld {
	g := NewWithT(t)
	formed := metav1.NewTime(t0.Add(-time.Hour))
	c := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "kv", UID: "kv-uid", Generation: 1, CreationTimestamp: formed},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3), Version: "v3.6.16",
			Auth: etcdv1alpha1.Auth{Enabled: true}},
	}
	c.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue,
		Reason: etcdv1alpha1.ReasonQuorumHealthy, Message: "3 of 3 voting members are healthy", LastTransitionTime: formed}}
	for i := range 3 {
		c.Status.Members = append(c.Status.Members, etcdv1alpha1.Member{Name: memberName(c, i), ID: oldID(i).String(), Healthy: true})
	}
	c.Status.Replicas, c.Status.ReadyMembers = 3, 3
	if mutate != nil {
		mutate(c)
	}

	owned := func(obj client.Object) client.Object {
		g.Expect(controllerutil.SetControllerReference(c, obj, scheme.Scheme)).To(Succeed())
		return obj
	}
	sts := statefulSet(c, 3, Bootstrap{Members: allMembers(c), State: "new"})
	sts.UID = "kv-sts-uid"
	stampTemplate(sts)
	objs := []client.Object{c, owned(sts)}
	for i := range 3 {
		pvc := memberClaim(c, i)
		pvc.CreationTimestamp = formed
		pvc.Annotations = map[string]string{annotationMemberID: oldID(i).String()}
		objs = append(objs, pvc, memberPod(c, sts, i))
	}
	init := initJob(c)
	init.CreationTimestamp = metav1.NewTime(formed.Add(time.Minute))
	init.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	objs = append(objs, owned(init))
	objs = append(objs, extra...)

	cl := fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithObjects(objs...).
		WithStatusSubresource(&etcdv1alpha1.EtcdCluster{}, &etcdv1alpha1.EtcdRestore{}, &etcdv1alpha1.EtcdBackup{}).
		WithIndex(&etcdv1alpha1.EtcdRestore{}, indexRestoreCluster, restoreClusterName).
		Build()
	e := &scriptedEtcd{}
	clock := clocktesting.NewFakeClock(t0)
	r := &Reconciler{Client: cl, APIReader: cl, Pods: cl, Recorder: events.NewFakeRecorder(1000), Clock: clock,
		Connect: needDeadline(e.connect), AgentImage: "tend:test", MaxOperatorRolls: 1}
	return &recoveryWorld{t: t, g: g, ctx: context.Background(), c: c, cl: cl, r: r, etcd: e, clock: clock}
}

// memberPod is the i-th member's pod as the StatefulSet controller makes
// it from sts, running, with an IP.
func memberPod(c *etcdv1alpha1.EtcdCluster, sts *appsv1.StatefulSet, i int) *corev1.Pod {
	t := sts.Spec.Template
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: memberName(c, i), Labels: t.Labels, Annotations: t.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}},
		Spec: *t.Spec.DeepCopy(),
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: dataVolume, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvcName(c, i)}}})
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.9.0.%d", 10+i),
		ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	return pod
}

// pass runs one Reconcile, a few seconds after the last.
func (w *recoveryWorld) pass() {
	w.t.Helper()
	w.clock.Step(2 * time.Second)
	_, err := w.r.Reconcile(w.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(w.c)})
	w.g.Expect(err).NotTo(HaveOccurred())
}

func (w *recoveryWorld) get(name string, obj client.Object) {
	w.t.Helper()
	w.g.Expect(w.cl.Get(w.ctx, client.ObjectKey{Namespace: w.c.Namespace, Name: name}, obj)).To(Succeed())
}

func (w *recoveryWorld) cluster() *etcdv1alpha1.EtcdCluster {
	w.t.Helper()
	got := &etcdv1alpha1.EtcdCluster{}
	w.get(w.c.Name, got)
	return got
}

func (w *recoveryWorld) restore(name string) *etcdv1alpha1.EtcdRestore {
	w.t.Helper()
	got := &etcdv1alpha1.EtcdRestore{}
	w.get(name, got)
	return got
}

// replicas is the StatefulSet's size.
func (w *recoveryWorld) replicas() int32 {
	w.t.Helper()
	sts := &appsv1.StatefulSet{}
	w.get(statefulSetName(w.c), sts)
	return ptr.Deref(sts.Spec.Replicas, -1)
}

// marks are the member IDs on the members' volume claims, by ordinal;
// absent for a claim that does not exist.
func (w *recoveryWorld) marks() map[int]string {
	w.t.Helper()
	out := map[int]string{}
	for i := range 3 {
		pvc := &corev1.PersistentVolumeClaim{}
		err := w.cl.Get(w.ctx, client.ObjectKey{Namespace: w.c.Namespace, Name: pvcName(w.c, i)}, pvc)
		if apierrors.IsNotFound(err) {
			continue
		}
		w.g.Expect(err).NotTo(HaveOccurred())
		out[i] = pvc.Annotations[annotationMemberID]
	}
	return out
}

// job reads a Job, nil when it does not exist.
func (w *recoveryWorld) job(name string) *batchv1.Job {
	w.t.Helper()
	job := &batchv1.Job{}
	err := w.cl.Get(w.ctx, client.ObjectKey{Namespace: w.c.Namespace, Name: name}, job)
	if apierrors.IsNotFound(err) {
		return nil
	}
	w.g.Expect(err).NotTo(HaveOccurred())
	return job
}

// finishJob plays the Job controller for a Job that succeeded.
func (w *recoveryWorld) finishJob(name string) {
	w.t.Helper()
	job := w.job(name)
	w.g.Expect(job).NotTo(BeNil(), "Job %s", name)
	now := metav1.NewTime(w.clock.Now())
	job.Status.StartTime, job.Status.CompletionTime, job.Status.Succeeded = &now, &now, 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	w.g.Expect(w.cl.Status().Update(w.ctx, job)).To(Succeed())
}

// createPod plays the kubelet too: the pod is made, then its status
// written, as the apiserver takes them.
func (w *recoveryWorld) createPod(pod *corev1.Pod) {
	w.t.Helper()
	status := pod.Status
	w.g.Expect(w.cl.Create(w.ctx, pod)).To(Succeed())
	pod.Status = status
	w.g.Expect(w.cl.Status().Update(w.ctx, pod)).To(Succeed())
}

// stopPods plays the StatefulSet controller for a StatefulSet scaled to
// nothing: the member pods go.
func (w *recoveryWorld) stopPods() {
	w.t.Helper()
	var pods corev1.PodList
	w.g.Expect(w.cl.List(w.ctx, &pods, client.InNamespace(w.c.Namespace), client.MatchingLabels(selector(w.c)))).To(Succeed())
	for i := range pods.Items {
		w.g.Expect(w.cl.Delete(w.ctx, &pods.Items[i])).To(Succeed())
	}
}

// startPods plays the StatefulSet controller and the kubelet: the pods
// the StatefulSet asks for run, with IPs, on their claims (made empty when
// missing).
func (w *recoveryWorld) startPods() {
	w.t.Helper()
	sts := &appsv1.StatefulSet{}
	w.get(statefulSetName(w.c), sts)
	for i := range int(ptr.Deref(sts.Spec.Replicas, 0)) {
		err := w.cl.Get(w.ctx, client.ObjectKey{Namespace: w.c.Namespace, Name: memberName(w.c, i)}, &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			w.createPod(memberPod(w.c, sts, i))
		} else {
			w.g.Expect(err).NotTo(HaveOccurred())
		}
		if _, ok := w.marks()[i]; !ok {
			w.g.Expect(w.cl.Create(w.ctx, memberClaim(w.c, i))).To(Succeed())
		}
	}
}

func containerNamed(ctrs []corev1.Container, name string) corev1.Container {
	for _, ctr := range ctrs {
		if ctr.Name == name {
			return ctr
		}
	}
	return corev1.Container{}
}

func conditionOf(conds []metav1.Condition, t string) metav1.Condition {
	for _, c := range conds {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}

// nightly is a Complete EtcdBackup of the cluster "kv", at revision 77.
func nightly() *etcdv1alpha1.EtcdBackup {
	return &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "nightly", CreationTimestamp: metav1.NewTime(t0.Add(-30 * time.Minute))},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterRef: etcdv1alpha1.ClusterReference{Name: "kv"}, BackupOptions: etcdv1alpha1.BackupOptions{
			Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "bkt", Prefix: "etcd/"}},
			Compression: etcdv1alpha1.CompressionGzip,
		}},
		Status: etcdv1alpha1.EtcdBackupStatus{
			CompletionTime: ptr.To(metav1.NewTime(t0.Add(-29 * time.Minute))),
			Conditions: []metav1.Condition{
				{Type: etcdv1alpha1.BackupComplete, Status: metav1.ConditionTrue, Reason: "Succeeded", LastTransitionTime: metav1.NewTime(t0.Add(-29 * time.Minute))},
			},
			Artifact: &etcdv1alpha1.Artifact{URI: "s3://bkt/etcd/db/nightly.db.gz", SizeBytes: 1024, SHA256: strings.Repeat("ab", 32), Compression: etcdv1alpha1.CompressionGzip},
			Snapshot: &etcdv1alpha1.SnapshotInfo{Member: "kv-0", Revision: 77, DBSizeBytes: 4096},
		},
	}
}

// inPlaceRestore is an EtcdRestore of "kv" from the backup nightly.
func inPlaceRestore(name string, created time.Time, confirm bool) *etcdv1alpha1.EtcdRestore {
	return &etcdv1alpha1.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name, UID: k8stypes.UID("uid-" + name), Generation: 1, CreationTimestamp: metav1.NewTime(created)},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterRef: etcdv1alpha1.ClusterReference{Name: "kv"},
			BackupRef: &corev1.LocalObjectReference{Name: "nightly"}, ConfirmOverwrite: confirm},
	}
}

func TestInPlaceRestoreSteps(t *testing.T) {
	w := newRecoveryWorld(t, nil, nightly(), inPlaceRestore("back", t0.Add(-time.Minute), true))
	g := w.g
	var rs *etcdv1alpha1.EtcdRestore

	// Pass 1: the members stop.
	w.pass()
	c := w.cluster()
	g.Expect(c.Status.Recovery).NotTo(BeNil())
	g.Expect(c.Status.Recovery.Kind).To(Equal(etcdv1alpha1.RecoveryFromBackup))
	g.Expect(c.Status.Recovery.Restore).To(Equal("back"))
	g.Expect(c.Status.Recovery.Phase).To(Equal(etcdv1alpha1.RecoveryStopping))
	g.Expect(c.Status.Recovery.Revision).To(BeEquivalentTo(77))
	g.Expect(conditionOf(c.Status.Conditions, etcdv1alpha1.ConditionAvailable).Reason).To(Equal(etcdv1alpha1.ReasonRecovering))
	g.Expect(w.replicas()).To(BeEquivalentTo(0))
	rs = w.restore("back")
	g.Expect(rs.Status.Phase).To(Equal(etcdv1alpha1.RecoveryStopping))
	g.Expect(rs.Status.MembersStopped).To(BeTrue())
	g.Expect(rs.Status.StartTime).NotTo(BeNil())
	g.Expect(rs.Status.RestoredFrom).To(Equal(&etcdv1alpha1.RestoredFrom{Backup: "nightly", URI: "s3://bkt/etcd/db/nightly.db.gz", Revision: 77}))

	// The restore holds its backup: deleted now (retention, or a person),
	// it and its file stay until the restore is done.
	backup := &etcdv1alpha1.EtcdBackup{}
	w.get("nightly", backup)
	g.Expect(backup.Finalizers).To(ContainElement(etcdv1alpha1.RestoreFinalizer(w.c.UID)))
	g.Expect(w.cl.Delete(w.ctx, backup)).To(Succeed())

	// The pods still run: the pass waits for them, and starts no Job.
	w.pass()
	g.Expect(w.cluster().Status.Recovery.Phase).To(Equal(etcdv1alpha1.RecoveryStopping))
	g.Expect(w.job("back-0")).To(BeNil())

	// Pass 2: the pods are gone; every member's data is restored, one Job
	// each, and the volumes lose their old members' marks.
	w.stopPods()
	w.pass()
	g.Expect(w.cluster().Status.Recovery.Phase).To(Equal(etcdv1alpha1.RecoveryRestoring))
	g.Expect(w.restore("back").Status.Phase).To(Equal(etcdv1alpha1.RecoveryRestoring))
	for i := range 3 {
		name := fmt.Sprintf("back-%d", i)
		job := w.job(name)
		g.Expect(job).NotTo(BeNil(), "Job %s", name)
		ownedByCluster(g, job, w.c)
		pod := job.Spec.Template.Spec
		prepare := containerNamed(pod.InitContainers, "prepare")
		g.Expect(prepare.Command).To(ContainElements("--replace", "--id="+string(rs.UID)), "Job %s", name)
		restore := containerNamed(pod.InitContainers, "restore")
		g.Expect(restore.Command).To(ContainElements("--initial-cluster-token="+string(rs.UID), "--name="+memberName(w.c, i)), "Job %s", name)
		g.Expect(pod.Volumes[0].PersistentVolumeClaim.ClaimName).To(Equal(pvcName(w.c, i)))
	}
	g.Expect(w.marks()).To(Equal(map[int]string{0: "", 1: "", 2: ""}))
	g.Expect(w.replicas()).To(BeEquivalentTo(0))

	// Two of three done: the members stay stopped.
	w.finishJob("back-0")
	w.finishJob("back-1")
	w.pass()
	g.Expect(w.cluster().Status.Recovery.Phase).To(Equal(etcdv1alpha1.RecoveryRestoring))
	g.Expect(w.replicas()).To(BeEquivalentTo(0))

	// Pass 3: every Job done; the members start.
	w.finishJob("back-2")
	w.pass()
	g.Expect(w.cluster().Status.Recovery.Phase).To(Equal(etcdv1alpha1.RecoveryStarting))
	g.Expect(w.restore("back").Status.Phase).To(Equal(etcdv1alpha1.RecoveryStarting))
	g.Expect(w.replicas()).To(BeEquivalentTo(3))

	// Pass 4: the members run the restored data, under new IDs. They get
	// the spec's authentication and the root Secret's password (the backup
	// brought the old cluster's), and their volumes the new IDs.
	w.startPods()
	w.etcd.answer(voters(w.c, 0xb0, 0, 1, 2))
	w.etcd.mu.Lock()
	w.etcd.authOn, w.etcd.rootPassword = true, "the-old-clusters-password"
	w.etcd.mu.Unlock()
	w.pass()
	c = w.cluster()
	g.Expect(c.Status.Recovery.Phase).To(Equal(etcdv1alpha1.RecoveryChecking))
	g.Expect(c.Status.Recovery.Job).To(Equal("back-check"))
	root := &corev1.Secret{}
	w.get(etcdnames.RootSecretName(w.c), root)
	on, password := w.etcd.auth()
	g.Expect(on).To(BeTrue())
	g.Expect(password).To(Equal(string(root.Data[rootPasswordKey])))
	g.Expect(w.marks()).To(Equal(map[int]string{0: "b0", 1: "b1", 2: "b2"}))
	check := w.job("back-check")
	g.Expect(check).NotTo(BeNil())
	ownedByCluster(g, check, w.c)
	g.Expect(w.restore("back").Status.Phase).To(Equal(etcdv1alpha1.RecoveryChecking))

	// Pass 5: the check passed; the restore is done.
	w.finishJob("back-check")
	w.pass()
	c = w.cluster()
	g.Expect(c.Status.Recovery.Phase).To(Equal(etcdv1alpha1.RecoveryComplete))
	g.Expect(c.Status.Recovery.CompletedAt).NotTo(BeNil())
	restored := expectRestoredFromNightly(g, c)
	g.Expect(restored.Reason).To(Equal(etcdv1alpha1.ReasonRestoredFromBackup))
	g.Expect(restored.Message).To(ContainSubstring("EtcdRestore back"))
	rs = w.restore("back")
	g.Expect(rs.Status.Phase).To(Equal(etcdv1alpha1.RecoveryComplete))
	g.Expect(rs.Status.CompletionTime).NotTo(BeNil())
	complete := conditionOf(rs.Status.Conditions, etcdv1alpha1.RestoreComplete)
	g.Expect(complete.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(complete.Reason).To(Equal(etcdv1alpha1.ReasonRestoreSucceeded))
	g.Expect(conditionOf(rs.Status.Conditions, etcdv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(kstatusOfObject(g, rs)).To(Equal(kstatus.CurrentStatus))
	g.Expect(w.replicas()).To(BeEquivalentTo(3))
	for i := range 3 {
		// Their pods mount the members' claims, which no pod may mount
		// when Tend deletes a claim (pvc-protection counts completed pods).
		g.Expect(w.job(fmt.Sprintf("back-%d", i))).To(BeNil(), "the finished restore Job %d is deleted", i)
	}
	err := w.cl.Get(w.ctx, client.ObjectKey{Namespace: "db", Name: "nightly"}, &etcdv1alpha1.EtcdBackup{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the restore is done: the backup deleted during it goes (%v)", err)

	// The next pass runs the cluster as any other: nothing more to restore,
	// the members and their volumes as they are.
	w.pass()
	c = w.cluster()
	g.Expect(c.Status.Recovery.Phase).To(Equal(etcdv1alpha1.RecoveryComplete))
	g.Expect(conditionOf(c.Status.Conditions, etcdv1alpha1.ConditionAvailable).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(conditionOf(c.Status.Conditions, etcdv1alpha1.ConditionRestored).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(conditionOf(c.Status.Conditions, etcdv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue), "%+v", c.Status.Conditions)
	g.Expect(kstatusOfObject(g, c)).To(Equal(kstatus.CurrentStatus))
	g.Expect(w.marks()).To(Equal(map[int]string{0: "b0", 1: "b1", 2: "b2"}))
	g.Expect(w.replicas()).To(BeEquivalentTo(3))
}

// kstatusOfObject is what kstatus (the wait of Helm and Flux) says of obj
// as it is.
func kstatusOfObject(g Gomega, obj client.Object) kstatus.Status {
	st, _, err := testenv.KStatusOf(obj, scheme.Scheme)
	g.Expect(err).NotTo(HaveOccurred())
	return st
}

// ownedByCluster checks that obj is controlled by c.
func ownedByCluster(g Gomega, obj client.Object, c *etcdv1alpha1.EtcdCluster) {
	ref := metav1.GetControllerOf(obj)
	g.Expect(ref).NotTo(BeNil(), "%T %s has no controller", obj, obj.GetName())
	g.Expect(ref.UID).To(Equal(c.UID))
}

// TestARestoreToAPointHoldsTheBaseItChose: a restore to a point that
// names no backup holds the base Tend chose for it, as one that names its
// backup does: retention cannot take it while the restore reads it.
func TestARestoreToAPointHoldsTheBaseItChose(t *testing.T) {
	rs := inPlaceRestore("back", t0.Add(-time.Minute), true)
	rs.Spec.BackupRef, rs.Spec.Target = nil, &etcdv1alpha1.RestoreTarget{Revision: 100}
	w := newRecoveryWorld(t, func(c *etcdv1alpha1.EtcdCluster) {
		dest := etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "bkt", Prefix: "etcd/"}}
		c.Spec.Backup = &etcdv1alpha1.ClusterBackup{Destination: dest}
		c.Spec.Archive = &etcdv1alpha1.ClusterArchive{Destination: dest}
		c.Status.Archive = &etcdv1alpha1.ArchiveStatus{BaseRevision: 50, FirstRevision: 51, LastRevision: 500}
	}, nightly(), rs)
	g := w.g
	w.pass()
	c := w.cluster()
	g.Expect(c.Status.Recovery).NotTo(BeNil())
	g.Expect(w.restore("back").Status.RestoredFrom).To(HaveField("Backup", "nightly"))
	backup := &etcdv1alpha1.EtcdBackup{}
	w.get("nightly", backup)
	g.Expect(backup.Finalizers).To(ContainElement(etcdv1alpha1.RestoreFinalizer(w.c.UID)))
}

func TestRestoreOfAnAvailableClusterNeedsConfirmation(t *testing.T) {
	w := newRecoveryWorld(t, nil, nightly(), inPlaceRestore("back", t0.Add(-time.Minute), false))
	g := w.g
	w.etcd.answer(voters(w.c, 0xa0, 0, 1, 2))
	w.pass()

	rs := w.restore("back")
	failed := conditionOf(rs.Status.Conditions, etcdv1alpha1.RestoreFailed)
	g.Expect(failed.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(failed.Reason).To(Equal(etcdv1alpha1.ReasonClusterAvailable))
	g.Expect(failed.Message).To(ContainSubstring("confirmOverwrite"))
	g.Expect(rs.Status.Phase).To(Equal(etcdv1alpha1.RecoveryFailed))
	g.Expect(rs.Status.MembersStopped).To(BeFalse())
	g.Expect(conditionOf(rs.Status.Conditions, etcdv1alpha1.ConditionStalled).Reason).To(Equal(etcdv1alpha1.ReasonClusterAvailable))
	g.Expect(kstatusOfObject(g, rs)).To(Equal(kstatus.FailedStatus))
	g.Expect(w.cluster().Status.Recovery).To(BeNil())
	g.Expect(w.replicas()).To(BeEquivalentTo(3))
	var jobs batchv1.JobList
	g.Expect(w.cl.List(w.ctx, &jobs, client.InNamespace("db"))).To(Succeed())
	g.Expect(jobs.Items).To(HaveLen(1), "only the init Job")
	g.Expect(w.marks()).To(Equal(map[int]string{0: "a0", 1: "a1", 2: "a2"}))

	// A refused restore stays refused.
	w.pass()
	g.Expect(w.cluster().Status.Recovery).To(BeNil())
	g.Expect(w.replicas()).To(BeEquivalentTo(3))
}

// TestARestoreDoesNotStartFromABackupBeingDeleted: its file goes with it.
func TestARestoreDoesNotStartFromABackupBeingDeleted(t *testing.T) {
	going := nightly()
	going.Finalizers = []string{etcdv1alpha1.BackupFinalizer}
	going.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	w := newRecoveryWorld(t, nil, going, inPlaceRestore("back", t0.Add(-time.Minute), true))
	g := w.g
	w.pass()
	rs := w.restore("back")
	failed := conditionOf(rs.Status.Conditions, etcdv1alpha1.RestoreFailed)
	g.Expect(failed.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(failed.Message).To(ContainSubstring("EtcdBackup nightly is being deleted"))
	g.Expect(rs.Status.MembersStopped).To(BeFalse())
	g.Expect(w.replicas()).To(BeEquivalentTo(3))
}

// TestTheOverwriteGuardAsksTheMembers: without confirmOverwrite, a
// restore of a cluster whose last status says Unknown (a passing
// Unreachable) is refused when a member answers with data; when no member
// answers, it goes ahead.
func TestTheOverwriteGuardAsksTheMembers(t *testing.T) {
	unknown := func(c *etcdv1alpha1.EtcdCluster) {
		c.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionAvailable, Status: metav1.ConditionUnknown,
			Reason: etcdv1alpha1.ReasonUnreachable, Message: "No member answered", LastTransitionTime: metav1.NewTime(t0)}}
	}
	t.Run("a member answers with data", func(t *testing.T) {
		w := newRecoveryWorld(t, unknown, nightly(), inPlaceRestore("back", t0.Add(-time.Minute), false))
		g := w.g
		w.etcd.answer(voters(w.c, 0xa0, 0, 1, 2))
		w.pass()
		rs := w.restore("back")
		failed := conditionOf(rs.Status.Conditions, etcdv1alpha1.RestoreFailed)
		g.Expect(failed.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(failed.Reason).To(Equal(etcdv1alpha1.ReasonClusterAvailable))
		g.Expect(failed.Message).To(ContainSubstring("kv-0 at revision 42"))
		g.Expect(rs.Status.MembersStopped).To(BeFalse())
		g.Expect(w.cluster().Status.Recovery).To(BeNil())
		g.Expect(w.replicas()).To(BeEquivalentTo(3))
	})
	t.Run("no member answers", func(t *testing.T) {
		w := newRecoveryWorld(t, unknown, nightly(), inPlaceRestore("back", t0.Add(-time.Minute), false))
		w.pass()
		w.g.Expect(w.restore("back").Status.Phase).To(Equal(etcdv1alpha1.RecoveryStopping))
		w.g.Expect(w.replicas()).To(BeEquivalentTo(0))
	})
}

func TestASecondRestoreWaits(t *testing.T) {
	// The newer is named so that it sorts first by name: the order is the
	// creation's.
	w := newRecoveryWorld(t, nil, nightly(),
		inPlaceRestore("older", t0.Add(-2*time.Minute), true),
		inPlaceRestore("a-newer", t0.Add(-time.Minute), true))
	g := w.g
	w.pass()
	g.Expect(w.cluster().Status.Recovery.Restore).To(Equal("older"))
	g.Expect(w.restore("older").Status.Phase).To(Equal(etcdv1alpha1.RecoveryStopping))

	w.pass()
	g.Expect(w.cluster().Status.Recovery.Restore).To(Equal("older"))
	newer := w.restore("a-newer")
	g.Expect(newer.Status.Phase).To(Equal(etcdv1alpha1.RecoveryPending))
	g.Expect(newer.Status.MembersStopped).To(BeFalse())
	pending := conditionOf(newer.Status.Conditions, etcdv1alpha1.RestoreComplete)
	g.Expect(pending.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(pending.Reason).To(Equal(etcdv1alpha1.ReasonRestorePending))
	g.Expect(pending.Message).To(ContainSubstring("EtcdRestore older"))
	g.Expect(w.job("a-newer-0")).To(BeNil())
}

// TestAnInPlaceRestoreLeavesAJobItDidNotMake: a Job with the name of a
// restore's Job that Tend did not make for this cluster (a person's, say)
// is neither deleted nor taken as the restore's: the restore waits, and
// the status says what is in the way.
func TestAnInPlaceRestoreLeavesAJobItDidNotMake(t *testing.T) {
	foreign := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "back-0", UID: "someone-elses"}}
	foreign.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	w := newRecoveryWorld(t, nil, nightly(), inPlaceRestore("back", t0.Add(-time.Minute), true), foreign)
	g := w.g
	w.pass()
	w.stopPods()
	for range 2 {
		w.clock.Step(2 * time.Second)
		_, err := w.r.Reconcile(w.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(w.c)})
		g.Expect(err).To(MatchError(errNotOurs))
	}
	job := w.job("back-0")
	g.Expect(job).NotTo(BeNil(), "the person's Job must stay")
	g.Expect(job.UID).To(BeEquivalentTo("someone-elses"))
	g.Expect(job.DeletionTimestamp).To(BeNil())
	c := w.cluster()
	g.Expect(c.Status.Recovery.Phase).To(Equal(etcdv1alpha1.RecoveryRestoring), "nothing moves on from a Job that is not the restore's")
	d := conditionOf(c.Status.Conditions, etcdv1alpha1.ConditionDegraded)
	g.Expect(d.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(d.Reason).To(Equal(etcdv1alpha1.ReasonObjectNotOurs))
	g.Expect(d.Message).To(ContainSubstring("Job back-0 exists but is not made by Tend for this cluster"))
	g.Expect(w.replicas()).To(BeEquivalentTo(0))
}

// survivorWorld is a cluster that lost its quorum and whose recovery from
// kv-1 began: status.recovery in phase StoppingMembers.
func survivorWorld(t *testing.T, phase string, mutate func(*etcdv1alpha1.EtcdCluster)) *recoveryWorld {
	return newRecoveryWorld(t, func(c *etcdv1alpha1.EtcdCluster) {
		c.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionAvailable, Status: metav1.ConditionFalse,
			Reason: etcdv1alpha1.ReasonQuorumLost, Message: "1 of 3 voting members are healthy", LastTransitionTime: metav1.NewTime(t0.Add(-10 * time.Minute))}}
		c.Status.Recovery = &etcdv1alpha1.RecoveryStatus{
			Kind: etcdv1alpha1.RecoveryFromSurvivor, Survivor: "kv-1", Cause: "quorum loss, spec.quorumLoss.policy Auto",
			Phase: phase, Job: "kv-recover-x", Revision: 40, StartedAt: metav1.NewTime(t0.Add(-time.Minute)),
		}
		if mutate != nil {
			mutate(c)
		}
	})
}

// recoverPod is the succeeded pod of the recovery Job, which controls it,
// with the agent's result.
func recoverPod(job *batchv1.Job, message string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name + "-abcde", Labels: map[string]string{batchv1.JobNameLabel: job.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "recover", Image: "tend:test"}}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "recover", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: message}},
		}}},
	}
}

func TestSurvivorRecoverySteps(t *testing.T) {
	w := survivorWorld(t, etcdv1alpha1.RecoveryStopping, nil)
	g := w.g

	// The pods still run: the StatefulSet is scaled to nothing first.
	w.pass()
	g.Expect(w.cluster().Status.Recovery.Phase).To(Equal(etcdv1alpha1.RecoveryStopping))
	g.Expect(w.replicas()).To(BeEquivalentTo(0))
	g.Expect(w.marks()).To(HaveLen(3))

	// The pods are gone: the lost members' volumes go, the survivor's stays.
	w.stopPods()
	w.pass()
	g.Expect(w.cluster().Status.Recovery.Phase).To(Equal(etcdv1alpha1.RecoveryRestoring))
	g.Expect(w.marks()).To(Equal(map[int]string{1: "a1"}))
	g.Expect(w.job("kv-recover-x")).To(BeNil(), "not before the volumes are gone")

	// The next pass: the Job that makes kv-1's data a one-member cluster.
	w.pass()
	g.Expect(w.cluster().Status.Recovery.Phase).To(Equal(etcdv1alpha1.RecoveryRestoring))
	job := w.job("kv-recover-x")
	g.Expect(job).NotTo(BeNil())
	ownedByCluster(g, job, w.c)
	pod := job.Spec.Template.Spec
	g.Expect(pod.InitContainers).To(HaveLen(1))
	etcdCtr := pod.InitContainers[0]
	g.Expect(etcdCtr.Name).To(Equal("etcd"))
	g.Expect(etcdCtr.RestartPolicy).To(Equal(ptr.To(corev1.ContainerRestartPolicyAlways)))
	g.Expect(etcdCtr.Command).To(ContainElements("--force-new-cluster", "--name=kv-1"))
	g.Expect(etcdCtr.Image).To(Equal(etcdnames.Image(w.c)))
	recover := containerNamed(pod.Containers, "recover")
	g.Expect(recover.Command).To(ContainElement("--member=kv-1"))
	g.Expect(recover.Env).To(ContainElement(rootPasswordEnv(w.c)))
	g.Expect(pod.Volumes[0].PersistentVolumeClaim.ClaimName).To(Equal(pvcName(w.c, 1)))

	// The Job is done, and its pod says what the survivor kept.
	w.finishJob("kv-recover-x")
	w.createPod(recoverPod(w.job("kv-recover-x"),
		`{"op":"recover","recovered":{"memberID":"1","clusterID":"2","revision":41,"raftIndex":51,"raftTerm":3}}`))
	w.pass()
	c := w.cluster()
	g.Expect(c.Status.Recovery.Phase).To(Equal(etcdv1alpha1.RecoveryStarting))
	g.Expect(c.Status.Recovery.Revision).To(BeEquivalentTo(41))
	g.Expect(w.job("kv-recover-x")).To(BeNil(), "the finished Job, which mounts the survivor's claim, is deleted")
	g.Expect(w.replicas()).To(BeEquivalentTo(2), "up to the survivor's ordinal")
	sts := &appsv1.StatefulSet{}
	w.get("kv", sts)
	g.Expect(envOf(sts)).To(HaveKeyWithValue("ETCD_INITIAL_CLUSTER", initialCluster(w.c, []string{"kv-1"})))

	// The survivor serves alone: the recovery is complete.
	w.startPods()
	w.etcd.answer(voters(w.c, 0xa0, 1))
	w.pass()
	c = w.cluster()
	g.Expect(c.Status.Recovery.Phase).To(Equal(etcdv1alpha1.RecoveryComplete))
	g.Expect(c.Status.Recovery.CompletedAt).NotTo(BeNil())
	g.Expect(c.Status.Recovery.Message).To(ContainSubstring("revision 41"))
}

func TestAFailedSurvivorJobIsRetriedWhenDeleted(t *testing.T) {
	w := survivorWorld(t, etcdv1alpha1.RecoveryFailed, func(c *etcdv1alpha1.EtcdCluster) {
		c.Status.Recovery.Message = "Job kv-recover-x failed"
		c.Status.Recovery.CompletedAt = ptr.To(metav1.NewTime(t0.Add(-time.Second)))
	})
	g := w.g
	// The state a failed recovery left: the members stopped, the lost
	// members' volumes gone.
	g.Expect(w.cl.Delete(w.ctx, memberClaim(w.c, 0))).To(Succeed())
	g.Expect(w.cl.Delete(w.ctx, memberClaim(w.c, 2))).To(Succeed())
	w.stopPods()
	sts := &appsv1.StatefulSet{}
	w.get("kv", sts)
	sts.Spec.Replicas = ptr.To[int32](0)
	g.Expect(w.cl.Update(w.ctx, sts)).To(Succeed())

	w.pass()
	c := w.cluster()
	g.Expect(c.Status.Recovery.Phase).To(Equal(etcdv1alpha1.RecoveryRestoring))
	g.Expect(c.Status.Recovery.CompletedAt).To(BeNil())
	g.Expect(c.Status.Recovery.Message).To(ContainSubstring("was deleted"))
	job := w.job("kv-recover-x")
	g.Expect(job).NotTo(BeNil())
	g.Expect(containerNamed(job.Spec.Template.Spec.Containers, "recover").Command).To(ContainElement("--member=kv-1"))
	g.Expect(w.replicas()).To(BeEquivalentTo(0))
	g.Expect(w.marks()).To(Equal(map[int]string{1: "a1"}))
}

// TestARestoreOfAReusedNameRestoresAgain: an EtcdRestore cannot change,
// so a person who restores again creates another, and may give it the
// name of an earlier one that is deleted (kubectl delete, then apply).
// The earlier restore's Jobs, which the cluster owns, are still there and
// Complete; the new restore must run its own, with its own id, from its
// own backup, not take the earlier ones' for its work.
func TestARestoreOfAReusedNameRestoresAgain(t *testing.T) {
	weekly := nightly()
	weekly.Name = "weekly"
	weekly.Status.Artifact.URI = "s3://bkt/etcd/db/weekly.db.gz"
	weekly.Status.Snapshot.Revision = 99
	w := newRecoveryWorld(t, nil, nightly(), weekly)
	g := w.g
	// What the earlier EtcdRestore "back" left: its Jobs, done.
	src, progress, err := w.r.resolveSource(w.ctx, w.c, &corev1.LocalObjectReference{Name: "nightly"}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(progress).To(BeNil())
	for i := range 3 {
		job := memberRestoreJob(w.c, i, src, "tend:test", restoreRun{job: fmt.Sprintf("back-%d", i), id: "uid-back-earlier", replace: true})
		g.Expect(controllerutil.SetControllerReference(w.c, job, scheme.Scheme)).To(Succeed())
		g.Expect(w.cl.Create(w.ctx, job)).To(Succeed())
		w.finishJob(job.Name)
	}
	rs := inPlaceRestore("back", t0.Add(-time.Minute), true)
	rs.Spec.BackupRef.Name = "weekly"
	g.Expect(w.cl.Create(w.ctx, rs)).To(Succeed())
	rs = w.restore("back")

	w.pass()
	g.Expect(w.cluster().Status.Recovery.Phase).To(Equal(etcdv1alpha1.RecoveryStopping))
	w.stopPods()
	w.pass()
	c := w.cluster()
	g.Expect(c.Status.Recovery.Phase).To(Equal(etcdv1alpha1.RecoveryRestoring),
		"the members must not start before this restore's Jobs put weekly's data in place: %s", c.Status.Recovery.Message)
	for i := range 3 {
		job := w.job(fmt.Sprintf("back-%d", i))
		g.Expect(job).NotTo(BeNil())
		g.Expect(containerNamed(job.Spec.Template.Spec.InitContainers, "prepare").Command).To(ContainElement("--id="+string(rs.UID)), "Job %s", job.Name)
		g.Expect(containerNamed(job.Spec.Template.Spec.InitContainers, "fetch").Command).To(ContainElement(ContainSubstring("weekly")), "Job %s", job.Name)
	}
}

// TestALostStatusWriteStillRecordsTheRestore: a new cluster restored from
// a backup whose status write was lost in the pass that finished the
// restore (a conflict; seen on the node) has its StatefulSet already and
// its restore Jobs deleted. The next pass still records what was restored,
// rather than report for ever that the restore has not started.
func TestALostStatusWriteStillRecordsTheRestore(t *testing.T) {
	w := newRecoveryWorld(t, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Bootstrap = &etcdv1alpha1.Bootstrap{Restore: &etcdv1alpha1.BootstrapRestore{BackupRef: &corev1.LocalObjectReference{Name: "nightly"}}}
	}, nightly())
	g := w.g
	w.pass()
	c := w.cluster()
	restored := expectRestoredFromNightly(g, c)
	g.Expect(restored.Message).To(ContainSubstring("EtcdBackup nightly"))
}

// TestARecoveryStepWaitsForAFreshCache: a recovery step acts (stops
// members, deletes claims) on the recovery as the apiserver has it. A pass
// whose cached cluster is older does nothing: here a stale RestoringData
// would delete the claims of members that came back since.
func TestARecoveryStepWaitsForAFreshCache(t *testing.T) {
	w := survivorWorld(t, etcdv1alpha1.RecoveryRestoring, nil)
	g := w.g
	w.stopPods()
	newer := w.cluster()
	newer.ResourceVersion = "999999"
	w.r.APIReader = fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(newer).Build()

	w.clock.Step(2 * time.Second)
	_, err := w.r.Reconcile(w.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(w.c)})
	g.Expect(err).To(MatchError(errStaleCluster))
	g.Expect(w.marks()).To(HaveLen(3), "no claim deleted")
	g.Expect(w.job("kv-recover-x")).To(BeNil())
}

// expectRestoredFromNightly checks that c's status records the restore of
// the EtcdBackup nightly (revision 77) and says Restored, and returns that
// condition.
func expectRestoredFromNightly(g Gomega, c *etcdv1alpha1.EtcdCluster) metav1.Condition {
	g.Expect(c.Status.RestoredFrom).NotTo(BeNil())
	g.Expect(c.Status.RestoredFrom.Backup).To(Equal("nightly"))
	g.Expect(c.Status.RestoredFrom.Revision).To(BeEquivalentTo(77))
	g.Expect(c.Status.RestoredFrom.Time).NotTo(BeNil())
	restored := conditionOf(c.Status.Conditions, etcdv1alpha1.ConditionRestored)
	g.Expect(restored.Status).To(Equal(metav1.ConditionTrue))
	return restored
}
