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

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcd"
)

// fakeMembers fakes the etcd clusters of the roll tests at the boundary
// the controller calls (Members). A cluster's members are healthy while
// their pod runs (up), and run the version of their pod's image.
type fakeMembers struct {
	mu       sync.Mutex
	clusters map[string]*fakeCluster // by the members' DNS domain
}

type fakeCluster struct {
	c      *etcdv1alpha1.EtcdCluster
	up     map[string]bool   // member name → healthy
	ver    map[string]string // member name → version, "3.5.35"
	leader string
	term   uint64
	moves  []string // the members the leadership was moved to
	// The storage: the revision, each member's database size and the
	// part in use, the NOSPACE alarm; and the compactions, the
	// defragmentations (member names, in order) and the disarms made.
	rev          int64
	db, inUse    map[string]int64
	noSpace      bool
	compactions  []int64
	defrags      []string
	disarms      int
	defragFailed error
}

func (f *fakeMembers) add(c *etcdv1alpha1.EtcdCluster, leader string) *fakeCluster {
	f.mu.Lock()
	defer f.mu.Unlock()
	fc := &fakeCluster{c: c, up: map[string]bool{}, ver: map[string]string{}, leader: leader, term: 2,
		db: map[string]int64{}, inUse: map[string]int64{}}
	f.clusters[memberDomain(c)] = fc
	return fc
}

func (f *fakeMembers) connect(_ context.Context, cfg etcd.Config) (Members, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for domain, fc := range f.clusters {
		if len(cfg.Endpoints) > 0 && strings.Contains(cfg.Endpoints[0], "."+domain+":") {
			return &fakeClient{f: f, fc: fc}, nil
		}
	}
	return nil, errors.New("no etcd in envtest")
}

// set changes a member under the lock.
func (f *fakeMembers) set(fc *fakeCluster, change func(*fakeCluster)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(fc)
}

func (f *fakeMembers) get(fc *fakeCluster, read func(*fakeCluster)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	read(fc)
}

type fakeClient struct {
	f  *fakeMembers
	fc *fakeCluster
}

func id(name string) etcd.MemberID {
	i := strings.LastIndex(name, "-")
	var n int
	_, _ = fmt.Sscan(name[i+1:], &n)
	return etcd.MemberID(0x100 + n)
}

func (c *fakeClient) Status(context.Context) ([]etcd.MemberStatus, error) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	fc := c.fc
	var out []etcd.MemberStatus
	for i := range int(replicas(fc.c)) {
		name := memberName(fc.c, i)
		s := etcd.MemberStatus{Member: etcd.Member{ID: id(name), Name: name,
			PeerURLs: []string{peerURL(fc.c, name)}, ClientURLs: []string{memberClientURL(fc.c, name)}}, Endpoint: memberClientURL(fc.c, name)}
		if fc.up[name] {
			s.Answered, s.Healthy, s.Leader = true, true, id(fc.leader)
			s.RaftTerm, s.RaftIndex, s.RaftAppliedIndex, s.Version = fc.term, 100, 100, fc.ver[name]
			s.Revision, s.DBSize, s.DBSizeInUse = fc.rev, fc.db[name], fc.inUse[name]
			if fc.noSpace {
				s.Errors = []string{fmt.Sprintf("memberID:%d alarm:NOSPACE ", id(name))}
			}
		} else {
			s.Err = errors.New("connection refused")
		}
		out = append(out, s)
	}
	return out, nil
}

func (c *fakeClient) MoveLeader(_ context.Context, to etcd.MemberID) error {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	for name := range c.fc.up {
		if id(name) == to {
			c.fc.leader, c.fc.moves = name, append(c.fc.moves, name)
			c.fc.term++
			return nil
		}
	}
	return fmt.Errorf("no member %s", to)
}

func (c *fakeClient) Compact(_ context.Context, rev int64) error {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	if n := len(c.fc.compactions); n > 0 && rev <= c.fc.compactions[n-1] {
		return etcd.ErrCompacted
	}
	c.fc.compactions = append(c.fc.compactions, rev)
	return nil
}

// Defragment shrinks the member's database to what is in use, unless
// defragFailed is set.
func (c *fakeClient) Defragment(_ context.Context, endpoint string) (etcd.Defragmented, error) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	fc := c.fc
	for name := range fc.up {
		if memberClientURL(fc.c, name) != endpoint {
			continue
		}
		if fc.defragFailed != nil {
			return etcd.Defragmented{}, fc.defragFailed
		}
		d := etcd.Defragmented{Before: fc.db[name], InUse: fc.inUse[name], After: fc.inUse[name], Took: 1500 * time.Millisecond}
		fc.db[name] = fc.inUse[name]
		fc.defrags = append(fc.defrags, name)
		return d, nil
	}
	return etcd.Defragmented{}, fmt.Errorf("no member at %s", endpoint)
}

func (c *fakeClient) DisarmNoSpace(context.Context) (int, error) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	n := 0
	if c.fc.noSpace {
		c.fc.noSpace, n = false, len(c.fc.up)
	}
	c.fc.disarms++
	return n, nil
}

func (c *fakeClient) AddLearner(context.Context, string) (etcd.Member, error) {
	return etcd.Member{}, errors.New("the roll tests add no member")
}
func (c *fakeClient) Promote(context.Context, etcd.MemberID) error { return nil }
func (c *fakeClient) Remove(context.Context, etcd.MemberID) error {
	return errors.New("the roll tests remove no member")
}
func (c *fakeClient) EnableAuth(context.Context, string) error      { return nil }
func (c *fakeClient) SetRootPassword(context.Context, string) error { return nil }
func (c *fakeClient) DisableAuth(context.Context) error             { return nil }
func (c *fakeClient) Close() error                                  { return nil }

// statefulSetPlayer plays the StatefulSet controller and the kubelet for
// one cluster: it makes the missing member pods (and claims) from the
// StatefulSet's template, with an IP, and the fake member starts on the
// version of the pod's image, unless the image is bad.
type statefulSetPlayer struct {
	c  *etcdv1alpha1.EtcdCluster
	fc *fakeCluster
	// made counts the pods made per member.
	made map[string]int
}

const badImage = "gcr.io/etcd-development/etcd:v0.0.0-cannot-start"

// sync makes what is missing and reports each pod's revision.
func (p *statefulSetPlayer) sync(g Gomega) map[string]string {
	ctx := context.Background()
	sts := &appsv1.StatefulSet{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: statefulSetName(p.c)}, sts)).To(Succeed())
	revs := map[string]string{}
	for i := range int(ptr.Deref(sts.Spec.Replicas, 0)) {
		name := memberName(p.c, i)
		pod := &corev1.Pod{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: p.c.Namespace, Name: name}, pod)
		if err == nil {
			revs[name] = pod.Annotations[etcdv1alpha1.AnnotationMemberRevision]
			continue
		}
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		// The template as it is now, after the pod's deletion: Tend writes
		// a new template before it deletes a pod to restart it, so the one
		// read before the pod may be older than the deletion.
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sts), sts)).To(Succeed())
		// Its process stopped with its pod; the new one starts below.
		members.set(p.fc, func(fc *fakeCluster) { fc.up[name] = false })
		if p.made[name] == 0 {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: p.c.Namespace, Name: pvcName(p.c, i),
				Labels: sts.Spec.VolumeClaimTemplates[0].Labels}, Spec: sts.Spec.VolumeClaimTemplates[0].Spec}
			g.Expect(env.Client.Create(ctx, pvc)).To(Succeed())
		}
		t := sts.Spec.Template
		pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.c.Namespace, Name: name, Labels: t.Labels, Annotations: t.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}}, Spec: *t.Spec.DeepCopy()}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: dataVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvcName(p.c, i)}}})
		g.Expect(env.Client.Create(ctx, pod)).To(Succeed())
		pod.Status.PodIP = fmt.Sprintf("10.9.0.%d", 10+i)
		g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
		p.made[name]++
		image := t.Spec.Containers[0].Image
		members.set(p.fc, func(fc *fakeCluster) {
			fc.up[name] = image != badImage
			fc.ver[name] = strings.TrimPrefix(image[strings.LastIndex(image, ":")+1:], "v")
		})
		revs[name] = t.Annotations[etcdv1alpha1.AnnotationMemberRevision]
	}
	return revs
}

// runningImage is the etcd image of the StatefulSet's template.
func templateImage(g Gomega, c *etcdv1alpha1.EtcdCluster) string {
	sts := &appsv1.StatefulSet{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: statefulSetName(c)}, sts)).To(Succeed())
	return sts.Spec.Template.Spec.Containers[0].Image
}

// startRollCluster creates a 3-member cluster on version, and plays its
// members until the status shows them healthy with no roll.
func startRollCluster(t *testing.T, g Gomega, version string, mutate func(*etcdv1alpha1.EtcdClusterSpec)) (*etcdv1alpha1.EtcdCluster, *statefulSetPlayer) {
	return startRollClusterIn(g, env.Namespace(t), version, mutate)
}

// startRollClusterIn is startRollCluster in the namespace ns.
func startRollClusterIn(g Gomega, ns, version string, mutate func(*etcdv1alpha1.EtcdClusterSpec)) (*etcdv1alpha1.EtcdCluster, *statefulSetPlayer) {
	ctx := context.Background()
	c := newCluster(ns, "roll", func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Version = version
		if mutate != nil {
			mutate(s)
		}
	})
	fc := members.add(c, "roll-1")
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	p := &statefulSetPlayer{c: c, fc: fc, made: map[string]int{}}
	g.Eventually(func(g Gomega) {
		p.sync(g)
		job := &batchv1.Job{}
		if env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: initJobName(c)}, job) == nil && job.Status.CompletionTime == nil {
			completeJob(g, job)
		}
		got := getCluster(g, c)
		g.Expect(condition(got, etcdv1alpha1.ConditionAvailable).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(got.Status.ReadyMembers).To(BeEquivalentTo(3))
		g.Expect(got.Status.UpdatedGeneration).To(Equal(got.Generation))
		g.Expect(got.Status.Update).To(BeNil())
	}, wait).Should(Succeed())
	return getCluster(g, c), p
}

func patchSpec(g Gomega, c *etcdv1alpha1.EtcdCluster, mutate func(*etcdv1alpha1.EtcdClusterSpec)) {
	got := getCluster(g, c)
	patch := client.MergeFrom(got.DeepCopy())
	mutate(&got.Spec)
	g.Expect(env.Client.Patch(context.Background(), got, patch)).To(Succeed())
}

func TestMinorUpgradeBacksUpThenRollsLeaderLast(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, p := startRollCluster(t, g, "v3.5.35", nil)
	oldImage := templateImage(g, c)

	patchSpec(g, c, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Version = "v3.6.16" })
	backup := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: "roll-upgrade-3-6-16"}}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(backup), backup)).To(Succeed())
		got := getCluster(g, c)
		g.Expect(condition(got, etcdv1alpha1.ConditionProgressing).Reason).To(Equal(etcdv1alpha1.ReasonBackingUpBeforeUpgrade))
		g.Expect(got.Status.Update).NotTo(BeNil())
		g.Expect(got.Status.Update.Backup).To(Equal(backup.Name))
		g.Expect(got.Status.Update.Cause).To(Equal(etcdv1alpha1.UpdateCauseSpec))
	}, wait).Should(Succeed())
	ownedBy(g, backup, c)
	g.Expect(ptr.Deref(backup.Spec.Verify, false)).To(BeTrue())
	g.Expect(backup.Spec.Destination.Volume.ClaimName).To(Equal("roll-upgrade-backups"))
	// While the backup runs, the members' template keeps their version and
	// no member restarts.
	g.Consistently(func(g Gomega) {
		g.Expect(templateImage(g, c)).To(Equal(oldImage))
		g.Expect(p.made).To(HaveLen(3))
		for _, n := range p.made {
			g.Expect(n).To(Equal(1))
		}
	}, 3*time.Second).Should(Succeed())

	setBackupConditions(g, backup,
		metav1.Condition{Type: etcdv1alpha1.BackupComplete, Status: metav1.ConditionTrue},
		metav1.Condition{Type: etcdv1alpha1.BackupVerified, Status: metav1.ConditionTrue})

	var order []string
	g.Eventually(func(g Gomega) {
		before := copyCounts(p.made)
		p.sync(g)
		for name, n := range p.made {
			if n > before[name] {
				order = append(order, name)
			}
		}
		got := getCluster(g, c)
		if got.Status.Update != nil && got.Status.Update.CheckJob != "" {
			job := &batchv1.Job{}
			if env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: got.Status.Update.CheckJob}, job) == nil && job.Status.CompletionTime == nil {
				g.Expect(job.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--version=v3.6.16"))
				completeJob(g, job)
			}
		}
		g.Expect(got.Status.Update).To(BeNil())
		g.Expect(got.Status.CurrentVersion).To(Equal("v3.6.16"))
	}, 2*wait).Should(Succeed())

	// Followers by descending ordinal, the leader (roll-1) last, after one
	// leadership move to an updated member.
	g.Expect(order).To(Equal([]string{"roll-2", "roll-0", "roll-1"}), "%v", eventNotes(g, c))
	members.get(p.fc, func(fc *fakeCluster) {
		g.Expect(fc.moves).To(HaveLen(1))
		g.Expect(fc.moves[0]).To(BeElementOf("roll-0", "roll-2"))
	})
	got := getCluster(g, c)
	g.Expect(got.Status.UpdatedGeneration).To(Equal(got.Generation))
	g.Expect(condition(got, etcdv1alpha1.ConditionDegraded).Status).To(Equal(metav1.ConditionFalse))
	g.Expect(eventReasons(g, c)).To(ContainElements("UpdateStarted", "UpgradeBackup", "MemberRestarted", "LeaderMoved", "CheckingUpdate", "UpdateComplete"))
	backups := eventsOf(g, c, "UpgradeBackup")
	g.Expect(backups).To(HaveLen(1), "the backup is announced once, when it is made")
	g.Expect(backups[0].Message).To(ContainSubstring("the upgrade from v3.5.35 to v3.6.16 starts"))
}

func TestUpgradeFromTooOldAPatchIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, p := startRollCluster(t, g, "v3.5.20", nil)
	oldImage := templateImage(g, c)
	patchSpec(g, c, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Version = "v3.6.16" })
	g.Eventually(func(g Gomega) {
		got := getCluster(g, c)
		d := condition(got, etcdv1alpha1.ConditionDegraded)
		g.Expect(d.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(d.Reason).To(Equal(etcdv1alpha1.ReasonUpgradeBlocked))
		g.Expect(d.Message).To(ContainSubstring("upgrade to v3.5.32 or later first"))
	}, wait).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(templateImage(g, c)).To(Equal(oldImage))
		p.sync(g)
		g.Expect(p.made).To(Equal(map[string]int{"roll-0": 1, "roll-1": 1, "roll-2": 1}))
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "roll-upgrade-3-6-16"}, &etcdv1alpha1.EtcdBackup{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no backup for a refused upgrade")
	}, 3*time.Second).Should(Succeed())
}

func TestARollStallsOnAMemberThatDoesNotComeBackAndResumesOnAFix(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, p := startRollCluster(t, g, "", func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.UpdateStrategy.MemberTimeout = &metav1.Duration{Duration: time.Minute}
	})
	patchSpec(g, c, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Image = badImage })
	g.Eventually(func(g Gomega) {
		p.sync(g)
		g.Expect(p.made["roll-2"]).To(Equal(2))
		got := getCluster(g, c)
		g.Expect(got.Status.Update).NotTo(BeNil())
		g.Expect(got.Status.Update.Member).To(Equal("roll-2"))
	}, wait).Should(Succeed())
	// The member does not come back; the timeout runs on Tend's clock,
	// from the pod's creation.
	stepPastNow(2 * time.Minute)
	g.Eventually(func(g Gomega) {
		p.sync(g)
		got := getCluster(g, c)
		d := condition(got, etcdv1alpha1.ConditionDegraded)
		g.Expect(d.Reason).To(Equal(etcdv1alpha1.ReasonUpdateStalled))
		g.Expect(d.Message).To(ContainSubstring("roll-2"))
		g.Expect(condition(got, etcdv1alpha1.ConditionProgressing).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(condition(got, etcdv1alpha1.ConditionAvailable).Status).To(Equal(metav1.ConditionTrue), "%v", eventNotes(g, c))
	}, wait).Should(Succeed())
	g.Consistently(func(g Gomega) {
		p.sync(g)
		g.Expect(p.made).To(Equal(map[string]int{"roll-0": 1, "roll-1": 1, "roll-2": 2}), "no other member is touched: %v", eventNotes(g, c))
	}, 3*time.Second).Should(Succeed())
	g.Expect(eventReasons(g, c)).To(ContainElement("UpdateStalled"))

	// The fix: the default image again. The stalled member restarts first.
	patchSpec(g, c, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Image = "" })
	g.Eventually(func(g Gomega) {
		p.sync(g)
		got := getCluster(g, c)
		if got.Status.Update != nil && got.Status.Update.CheckJob != "" {
			job := &batchv1.Job{}
			if env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: got.Status.Update.CheckJob}, job) == nil && job.Status.CompletionTime == nil {
				completeJob(g, job)
			}
		}
		g.Expect(got.Status.Update).To(BeNil())
		g.Expect(condition(got, etcdv1alpha1.ConditionDegraded).Status).To(Equal(metav1.ConditionFalse))
	}, 2*wait).Should(Succeed())
	// Only roll-2 restarted again: the fix is the revision the others run.
	g.Expect(p.made).To(Equal(map[string]int{"roll-0": 1, "roll-1": 1, "roll-2": 3}))
}

func copyCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// eventReasons lists the reasons of c's Events.
func eventReasons(g Gomega, c *etcdv1alpha1.EtcdCluster) []string {
	var events corev1.EventList
	g.Expect(env.Client.List(context.Background(), &events, client.InNamespace(c.Namespace))).To(Succeed())
	var reasons []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == c.Name && !slices.Contains(reasons, e.Reason) {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

func eventNotes(g Gomega, c *etcdv1alpha1.EtcdCluster) []string {
	var events corev1.EventList
	g.Expect(env.Client.List(context.Background(), &events, client.InNamespace(c.Namespace))).To(Succeed())
	var notes []string
	for _, e := range events.Items {
		notes = append(notes, e.Reason+": "+e.Message)
	}
	return notes
}

// TestPodsOfAnOlderTendAreAdoptedNotRestarted: pods made before Tend knew
// revisions carry none; when they run what the spec asks, they are marked
// with the current revision and keep running.
func TestPodsOfAnOlderTendAreAdoptedNotRestarted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, p := startRollCluster(t, g, "", nil)
	rev := memberRevision(c)
	for i := range 3 {
		pod := &corev1.Pod{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: memberName(c, i)}, pod)).To(Succeed())
		patch := client.MergeFrom(pod.DeepCopy())
		delete(pod.Annotations, etcdv1alpha1.AnnotationMemberRevision)
		g.Expect(env.Client.Patch(ctx, pod, patch)).To(Succeed())
	}
	// Pods are not watched: a pass comes within 30s, or at once for a
	// change of the cluster's annotations.
	got := getCluster(g, c)
	patch := client.MergeFrom(got.DeepCopy())
	got.Annotations = map[string]string{"example.com/touched": "now"}
	g.Expect(env.Client.Patch(ctx, got, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		revs := p.sync(g)
		g.Expect(revs).To(Equal(map[string]string{"roll-0": rev, "roll-1": rev, "roll-2": rev}))
	}, wait).Should(Succeed())
	g.Consistently(func(g Gomega) {
		p.sync(g)
		g.Expect(p.made).To(Equal(map[string]int{"roll-0": 1, "roll-1": 1, "roll-2": 1}), "no pod restarted")
		g.Expect(getCluster(g, c).Status.Update).To(BeNil())
	}, 3*time.Second).Should(Succeed())
}

// TestAnAuthClusterFormsAndIsChecked: with auth on, the pass turns it on
// through etcd before the init Job, within the deadline every etcd call
// has, and the cluster becomes Available.
func TestAnAuthClusterFormsAndIsChecked(t *testing.T) {
	g := NewWithT(t)
	c, _ := startRollCluster(t, g, "", func(s *etcdv1alpha1.EtcdClusterSpec) { s.Auth.Enabled = true })
	g.Expect(condition(c, etcdv1alpha1.ConditionAvailable).Reason).To(Equal(etcdv1alpha1.ReasonQuorumHealthy))
}
