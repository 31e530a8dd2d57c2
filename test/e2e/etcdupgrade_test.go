//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// The roll of an EtcdCluster's members, on the real node: a minor upgrade
// behind a verified backup, a change of resources, a roll that stalls on an
// image that cannot start and resumes once the spec is corrected, and a
// manager restart that must not roll anything. As in etcdcluster_test.go,
// the names and annotations that the contract promises are spelled out here.
const (
	// memberRevisionAnnotation is on every member pod: the hash of what
	// it runs.
	memberRevisionAnnotation = "etcd.tend.dev/member-revision"
	// rollTimeout bounds a whole roll of three members (each restart,
	// catch-up and the check Job) on this node: a bound on a failure, not
	// an expectation of speed.
	rollTimeout = 12 * time.Minute
	// stallTimeout bounds the wait for a roll to report its stall, with
	// spec.updateStrategy.memberTimeout at its 30s minimum.
	stallTimeout = 3 * time.Minute
	// managerDeployment is the Tend manager's Deployment, in
	// framework.OperatorNamespace (hack/cluster/deploy.sh).
	managerDeployment = "tend-manager"
)

// managerLabels select the Tend manager's pods (config/manager).
var managerLabels = client.MatchingLabels{"app.kubernetes.io/name": "tend", "app.kubernetes.io/component": "manager"}

// rollReasons are Progressing's reasons while a roll is on.
var rollReasons = []string{
	etcdv1alpha1.ReasonUpdating, etcdv1alpha1.ReasonBackingUpBeforeUpgrade,
	etcdv1alpha1.ReasonCheckingUpdate, etcdv1alpha1.ReasonUpdateQueued,
}

// A 3-member v3.5 cluster, under a writer, is upgraded to v3.6 by a change
// of spec.version: a verified EtcdBackup is taken before any member
// restarts, and the members keep v3.5 meanwhile; then each member restarts
// exactly once, followers by descending ordinal and the leader last after
// one planned leadership move (the raft term rises by exactly one); the
// check Job confirms the cluster; status.currentVersion moves only at the
// end; no acknowledged write is lost and every member holds the same data.
func TestEtcdClusterUpgrade(t *testing.T) {
	t.Parallel()
	from, to := cluster.Settings.EtcdUpgradeFromVersion, cluster.Settings.EtcdVersion
	if from == "" || to == "" || from == to {
		t.Fatalf("hack/cluster/settings.sh gives upgrade versions %q to %q; want two different versions", from, to)
	}
	e := newRollTest(t, "kv", from, nil)
	before := e.waitReady(t, 3)
	for _, m := range before.Status.Members {
		if m.Version != from {
			t.Fatalf("member %s runs %q before the upgrade, want %s", m.Name, m.Version, from)
		}
	}
	orig, origRev := e.podUIDs(t)
	leader := before.Status.Leader
	termBefore := e.raftTerm(t)
	pods := e.recordPods(t)
	st := e.recordStatus(t)
	w := e.startLiveWriter(t)

	e.patchSpec(t, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Version = to })
	start := time.Now()

	// The backup comes first, and no member restarts before it is
	// Complete and Verified.
	backupName := fmt.Sprintf("%s-upgrade-%s", e.Name, strings.ReplaceAll(strings.TrimPrefix(to, "v"), ".", "-"))
	backup := e.waitUpgradeBackup(t, backupName, orig, pods, from)
	verifiedAt := backupVerifiedAt(backup)
	t.Logf("EtcdBackup %s was Complete and Verified %s after the patch, before any member restarted", backupName, time.Since(start).Round(time.Second))

	final := e.waitRollEnd(t, "the upgrade to "+to, func(ec *etcdv1alpha1.EtcdCluster, now []corev1.Pod) error {
		if rev := now[0].Annotations[memberRevisionAnnotation]; rev == origRev {
			return fmt.Errorf("the pods still carry the revision %s they had before the upgrade", rev)
		}
		if ec.Status.CurrentVersion != to {
			return fmt.Errorf("status.currentVersion is %q, want %s", ec.Status.CurrentVersion, to)
		}
		for _, m := range ec.Status.Members {
			if m.Version != to {
				return fmt.Errorf("member %s runs %q, want %s", m.Name, m.Version, to)
			}
		}
		return nil
	})
	t.Logf("The upgrade from %s to %s took %s", from, to, time.Since(start).Round(time.Second))
	ready := e.waitReady(t, 3)
	for _, m := range ready.Status.Members {
		if m.Version != to {
			t.Errorf("member %s runs %q after the upgrade, want %s", m.Name, m.Version, to)
		}
	}
	if ready.Status.UpdatedGeneration != ready.Generation {
		t.Errorf("status.updatedGeneration is %d after the roll, want the generation %d", ready.Status.UpdatedGeneration, ready.Generation)
	}
	finalRev := final.revision

	// Each member restarted once, after the backup was verified; the
	// leader last.
	lives := pods.snapshot()
	order := checkRestartedOnce(t, lives, orig, finalRev)
	checkRestartOrder(t, order, leader)
	for name, l := range lives {
		if len(l) > 1 && verifiedAt != nil && l[1].Created.Before(verifiedAt.Time) {
			t.Errorf("pod %s was re-created at %s, before the backup was verified at %s", name, l[1].Created.UTC().Format(time.RFC3339), verifiedAt.UTC().Format(time.RFC3339))
		}
	}

	// One planned leadership move, and no other election.
	termAfter := e.raftTerm(t)
	rec := st.stop()
	t.Logf("Raft term %d before the upgrade and %d after (delta %d); status.leader went %v; status.update.leaderMoves reached %d",
		termBefore, termAfter, termAfter-termBefore, rec.leaders, rec.maxLeaderMoves)
	if termAfter-termBefore != 1 {
		t.Errorf("the raft term rose by %d during the roll, want exactly 1: the one MoveLeader, and no election", termAfter-termBefore)
	}
	if rec.maxLeaderMoves != 1 {
		t.Errorf("status.update.leaderMoves reached %d, want 1", rec.maxLeaderMoves)
	}
	e.waitEvent(t, "UpdateComplete", corev1.EventTypeNormal, " 1 leader move(s)")
	e.waitEvents(t, "UpgradeBackup", "UpdateStarted", "MemberRestarted", "LeaderMoved", "CheckingUpdate", "UpdateComplete")

	// status said what was happening, and kept the old version until the
	// end.
	for _, r := range []string{etcdv1alpha1.ReasonBackingUpBeforeUpgrade, etcdv1alpha1.ReasonUpdating} {
		if !slices.Contains(rec.progressing, r) {
			t.Errorf("Progressing never showed reason %s during the upgrade; it showed %v", r, rec.progressing)
		}
	}
	if len(rec.earlyVersion) > 0 {
		t.Errorf("status.currentVersion moved before the roll ended: %v", rec.earlyVersion)
	}
	if !slices.Equal(rec.backups, []string{backupName}) {
		t.Errorf("status.update.backup named %v during the upgrade, want %s alone", rec.backups, backupName)
	}
	e.checkJobSucceeded(t, finalRev)

	acked := e.stopWriter(t, w)
	e.checkAcked(t, acked)
	e.checkSameData(t)
}

// A 3-member cluster with memberTimeout 30s gets an image that cannot be
// pulled: one member restarts onto it and never becomes ready, the roll
// stops there (Degraded and Progressing False with reason UpdateStalled,
// naming the member, and a Warning Event), the other two members are not
// touched and the cluster stays Available. With the image corrected, the
// roll goes on: the stuck member comes back on the old revision, and the
// data is intact.
func TestEtcdClusterRollStallsAndResumes(t *testing.T) {
	t.Parallel()
	e := newRollTest(t, "kv", cluster.Settings.EtcdVersion, func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.UpdateStrategy.MemberTimeout = &metav1.Duration{Duration: 30 * time.Second}
	})
	e.waitReady(t, 3)
	data := map[string]string{}
	for i := range 5 {
		key := fmt.Sprintf("stall/k%d", i)
		data[key] = e.put(t, key)
	}
	orig, origRev := e.podUIDs(t)
	pods := e.recordPods(t)
	st := e.recordStatus(t)

	badImage := cluster.Settings.EtcdImage + "-does-not-exist"
	e.patchSpec(t, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Image = badImage })
	patched := time.Now()

	// One member, and one only, leaves the old revision; the roll stalls
	// on it.
	var victim string
	var stalled *etcdv1alpha1.EtcdCluster
	cluster.WaitFor(t, stallTimeout, "the roll to stall on the member with the bad image", func(ctx context.Context) (bool, error) {
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		moved := movedOff(pods.snapshot(), orig, origRev)
		switch {
		case len(moved) > 1:
			return false, framework.Stop(fmt.Errorf("members %v left revision %s, want one at a time: the roll must wait for the first to be healthy", moved, origRev))
		case len(moved) == 0:
			return false, fmt.Errorf("no member restarted yet; %s", conditionsOf(ec))
		}
		victim = moved[0].name
		if moved[0].life.EverReady {
			return false, framework.Stop(fmt.Errorf("pod %s became Ready with image %s, which cannot be pulled", victim, badImage))
		}
		if ok, err := hasCondition(ec, etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, etcdv1alpha1.ReasonUpdateStalled); !ok {
			return false, fmt.Errorf("member %s restarted; %w", victim, err)
		}
		stalled = ec
		return true, nil
	})
	degraded := meta.FindStatusCondition(stalled.Status.Conditions, etcdv1alpha1.ConditionDegraded)
	if !strings.Contains(degraded.Message, victim) {
		t.Errorf("Degraded/UpdateStalled says %q, which does not name the stuck member %s", degraded.Message, victim)
	}
	if ok, err := hasCondition(stalled, etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, etcdv1alpha1.ReasonUpdateStalled); !ok {
		t.Errorf("while stalled: %v", err)
	}
	victimLife := pods.snapshot()[victim]
	t.Logf("The roll stalled on %s %s after the patch; Degraded went True %s after its pod was made (memberTimeout 30s): %q",
		victim, time.Since(patched).Round(time.Second), degraded.LastTransitionTime.Sub(victimLife[len(victimLife)-1].Created).Round(time.Second), degraded.Message)
	e.waitEvent(t, "UpdateStalled", corev1.EventTypeWarning, victim)

	// Stalled, the roll touches nothing else: for another memberTimeout,
	// the others keep their pods and the cluster its quorum.
	cluster.Consistently(t, 30*time.Second, "the stalled roll", func(ctx context.Context) error {
		ec, err := e.get(ctx)
		if err != nil {
			return err
		}
		if ok, err := hasCondition(ec, etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, etcdv1alpha1.ReasonUpdateStalled); !ok {
			return err
		}
		if ok, err := hasCondition(ec, etcdv1alpha1.ConditionAvailable, metav1.ConditionTrue, etcdv1alpha1.ReasonQuorumHealthy); !ok {
			return err
		}
		lives := pods.snapshot()
		if l := lives[victim]; len(l) != 2 || l[1].Revision == origRev || l[1].EverReady {
			return fmt.Errorf("member %s, on which the roll stalled, had pods %s; want its original and one on the bad image, never Ready", victim, describeLives(l))
		}
		return checkOthersUntouched(lives, orig, victim, origRev)
	})

	// Corrected, the roll goes on: the stuck member comes back on the
	// revision the others run.
	e.patchSpec(t, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Image = "" })
	corrected := time.Now()
	e.waitRollEnd(t, "the roll to resume and end", func(_ *etcdv1alpha1.EtcdCluster, now []corev1.Pod) error {
		if rev := now[0].Annotations[memberRevisionAnnotation]; rev != origRev {
			return fmt.Errorf("the pods carry revision %s, want %s, the one of the default image", rev, origRev)
		}
		return nil
	})
	t.Logf("With the image corrected, the roll ended %s later", time.Since(corrected).Round(time.Second))
	e.waitReady(t, 3)

	lives := pods.snapshot()
	if err := checkOthersUntouched(lives, orig, victim, origRev); err != nil {
		t.Error(err)
	}
	l := lives[victim]
	if len(l) != 3 || l[0].UID != orig[victim] || l[1].Revision == origRev || l[1].EverReady || l[2].Revision != origRev || !l[2].EverReady {
		t.Errorf("member %s had pods %s; want three: the original, one on the bad image that was never Ready, and one back on revision %s that is Ready",
			victim, describeLives(l), origRev)
	}
	rec := st.stop()
	if len(rec.notAvailable) > 0 {
		t.Errorf("the cluster was not Available %d time(s) during the stall and its correction, such as %v", rec.notAvailableCount, rec.notAvailable)
	}
	t.Logf("Progressing went through %v; Degraded through %v", rec.progressing, rec.degraded)
	e.checkKeys(t, data)
	e.checkSameData(t)
}

// A change of spec.resources rolls every member once, under a writer: the
// pods end with the new requests, no acknowledged write is lost, and the
// raft term rises by at most one (the planned leadership move).
func TestEtcdClusterResourcesRoll(t *testing.T) {
	t.Parallel()
	e := newRollTest(t, "kv", cluster.Settings.EtcdVersion, nil)
	before := e.waitReady(t, 3)
	orig, origRev := e.podUIDs(t)
	leader := before.Status.Leader
	termBefore := e.raftTerm(t)
	pods := e.recordPods(t)
	st := e.recordStatus(t)
	w := e.startLiveWriter(t)

	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	e.patchSpec(t, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Resources = corev1.ResourceRequirements{Requests: want} })
	start := time.Now()
	final := e.waitRollEnd(t, "the roll to the new resources", func(_ *etcdv1alpha1.EtcdCluster, now []corev1.Pod) error {
		if rev := now[0].Annotations[memberRevisionAnnotation]; rev == origRev {
			return fmt.Errorf("the pods still carry revision %s", rev)
		}
		for _, p := range now {
			if err := checkRequests(&p, want); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("The roll took %s", time.Since(start).Round(time.Second))
	ready := e.waitReady(t, 3)
	if ready.Status.UpdatedGeneration != ready.Generation {
		t.Errorf("status.updatedGeneration is %d after the roll, want the generation %d", ready.Status.UpdatedGeneration, ready.Generation)
	}

	order := checkRestartedOnce(t, pods.snapshot(), orig, final.revision)
	checkRestartOrder(t, order, leader)
	termAfter := e.raftTerm(t)
	rec := st.stop()
	t.Logf("Raft term %d before the roll and %d after (delta %d); status.leader went %v; status.update.leaderMoves reached %d",
		termBefore, termAfter, termAfter-termBefore, rec.leaders, rec.maxLeaderMoves)
	if termAfter-termBefore > 1 {
		t.Errorf("the raft term rose by %d during the roll, want at most 1: the planned leadership move, and no election", termAfter-termBefore)
	}
	e.checkJobSucceeded(t, final.revision)
	acked := e.stopWriter(t, w)
	e.checkAcked(t, acked)
	e.checkSameData(t)
}

// A restart of the Tend manager leaves a settled cluster alone: the new
// manager computes the same revision as the pods carry, so no member
// restarts and no roll starts.
//
// The test is not parallel, because it restarts the one manager that every
// test's clusters depend on. Go runs a package's non-parallel top-level
// tests first, one at a time, and releases the parallel ones (which pause
// at t.Parallel) only once all of them have returned, so no other test of
// this package runs while the manager is down. It is kept short: one
// cluster and one minute of watching.
func TestEtcdClusterManagerRestartKeepsMembers(t *testing.T) {
	e := newRollTest(t, "kv", cluster.Settings.EtcdVersion, nil)
	e.waitReady(t, 3)
	orig, _ := e.podUIDs(t)
	pods := e.recordPods(t)
	st := e.recordStatus(t)

	ctx := t.Context()
	var managers corev1.PodList
	if err := cluster.Client.List(ctx, &managers, client.InNamespace(framework.OperatorNamespace), managerLabels); err != nil {
		t.Fatal(err)
	}
	if len(managers.Items) == 0 {
		t.Fatalf("no manager pod in %s with labels %v", framework.OperatorNamespace, managerLabels)
	}
	old := map[types.UID]bool{}
	for i := range managers.Items {
		p := &managers.Items[i]
		old[p.UID] = true
		if err := cluster.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
			t.Fatalf("deleting the manager pod %s: %v", p.Name, err)
		}
	}
	restarted := time.Now()
	var ready []string
	cluster.WaitFor(t, framework.DefaultTimeout, "a new manager pod, Ready, and the old ones gone", func(ctx context.Context) (bool, error) {
		var list corev1.PodList
		if err := cluster.Client.List(ctx, &list, client.InNamespace(framework.OperatorNamespace), managerLabels); err != nil {
			return false, err
		}
		ready = ready[:0]
		for _, p := range list.Items {
			if old[p.UID] {
				return false, fmt.Errorf("the old manager pod %s is still there", p.Name)
			}
			if podReady(&p) {
				ready = append(ready, p.Name)
			}
		}
		if len(ready) == 0 {
			return false, fmt.Errorf("%d new manager pod(s), none Ready", len(list.Items))
		}
		return true, nil
	})
	cluster.WaitForDeploymentAvailable(t, framework.OperatorNamespace, managerDeployment)
	// Ready is not leading: the watch below means something only once
	// the new manager holds the leader election's Lease (its identity
	// starts with its pod's name) and so reconciles the cluster.
	cluster.WaitFor(t, time.Minute, "a new manager pod to lead", func(ctx context.Context) (bool, error) {
		leases, err := cluster.Clientset.CoordinationV1().Leases(framework.OperatorNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var holders []string
		for _, l := range leases.Items {
			holder := ptr.Deref(l.Spec.HolderIdentity, "")
			for _, name := range ready {
				if strings.HasPrefix(holder, name+"_") || holder == name {
					return true, nil
				}
			}
			holders = append(holders, l.Name+": "+holder)
		}
		return false, fmt.Errorf("the Leases of %s are held by %v, not by the new pods %v", framework.OperatorNamespace, holders, ready)
	})
	t.Logf("The new manager was Ready and leading %s after the old one was deleted", time.Since(restarted).Round(time.Second))

	cluster.Consistently(t, time.Minute, "the members after the manager's restart", func(ctx context.Context) error {
		ec, err := e.get(ctx)
		if err != nil {
			return err
		}
		if u := ec.Status.Update; u != nil {
			return fmt.Errorf("a roll started after the manager's restart: status.update is %+v", *u)
		}
		now, err := e.pods(ctx)
		if err != nil {
			return err
		}
		if len(now) != len(orig) {
			return fmt.Errorf("%d member pods, want the %d there were", len(now), len(orig))
		}
		for _, p := range now {
			if p.UID != orig[p.Name] || p.DeletionTimestamp != nil {
				return fmt.Errorf("member pod %s was deleted or replaced (uid %s, was %s)", p.Name, p.UID, orig[p.Name])
			}
		}
		return nil
	})
	for name, l := range pods.snapshot() {
		if len(l) != 1 {
			t.Errorf("member %s had pods %s, want only its original %s", name, describeLives(l), orig[name])
		}
	}
	rec := st.stop()
	if rec.lastUpdate != nil || rec.updatePolls > 0 {
		t.Errorf("status.update was set in %d poll(s), such as %+v; want no roll", rec.updatePolls, rec.lastUpdate)
	}
	e.waitReady(t, 3)
}

// newRollTest creates a 3-member EtcdCluster in a namespace of the test's
// own, with the default (persistent) storage, and on failure logs its
// conditions and last Events besides the artifacts the framework saves.
func newRollTest(t *testing.T, name, version string, mutate func(*etcdv1alpha1.EtcdClusterSpec)) *etcdTest {
	t.Helper()
	e := &etcdTest{EtcdCluster: &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace(t), Name: name},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3), Version: version},
	}}
	if mutate != nil {
		mutate(&e.Spec)
	}
	// Registered after the namespace's cleanup, so it runs before it.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("At the failure:\n%s", e.explain())
		}
	})
	mustCreate(t, e.EtcdCluster)
	return e
}

// explain says where the cluster stands: its conditions, status.update and
// members, and its namespace's last Events.
func (e *etcdTest) explain() string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	if ec, err := e.get(ctx); err != nil {
		fmt.Fprintf(&b, "EtcdCluster %s: %v\n", e.Name, err)
	} else {
		fmt.Fprintf(&b, "EtcdCluster %s: generation %d, observed %d, %s\n", e.Name, ec.Generation, ec.Status.ObservedGeneration, conditionsOf(ec))
		if u := ec.Status.Update; u != nil {
			fmt.Fprintf(&b, "status.update: %+v\n", *u)
		}
		fmt.Fprintf(&b, "status.members: %+v\n", ec.Status.Members)
	}
	if pods, err := e.pods(ctx); err == nil {
		for i := range pods {
			p := &pods[i]
			fmt.Fprintf(&b, "pod %s: uid %s, revision %s, %s, ready %t\n", p.Name, p.UID, p.Annotations[memberRevisionAnnotation], p.Status.Phase, podReady(p))
		}
	}
	var list corev1.EventList
	if err := cluster.Client.List(ctx, &list, client.InNamespace(e.Namespace)); err != nil {
		fmt.Fprintf(&b, "events: %v\n", err)
		return b.String()
	}
	evs := list.Items
	slices.SortFunc(evs, func(a, b corev1.Event) int { return eventTime(&a).Compare(eventTime(&b)) })
	fmt.Fprintf(&b, "the last Events of %s:\n", e.Namespace)
	for _, ev := range evs[max(0, len(evs)-25):] {
		fmt.Fprintf(&b, "  %s %s %s/%s %s: %s\n", eventTime(&ev).UTC().Format(time.RFC3339), ev.Type, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
	}
	return b.String()
}

// conditionsOf is ec's conditions in one line, for a failure message.
func conditionsOf(ec *etcdv1alpha1.EtcdCluster) string {
	var parts []string
	for _, c := range ec.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s/%s (%q)", c.Type, c.Status, c.Reason, c.Message))
	}
	return "conditions: " + strings.Join(parts, "; ")
}

func eventTime(ev *corev1.Event) time.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.CreationTimestamp.Time
}

// waitEvent waits for an Event of the cluster with reason and type whose
// message contains text, and returns it.
func (e *etcdTest) waitEvent(t *testing.T, reason, typ, text string) corev1.Event {
	t.Helper()
	var found corev1.Event
	cluster.WaitFor(t, time.Minute, fmt.Sprintf("a %s Event %s saying %q", typ, reason, text), func(ctx context.Context) (bool, error) {
		var list corev1.EventList
		if err := cluster.Client.List(ctx, &list, client.InNamespace(e.Namespace)); err != nil {
			return false, err
		}
		var seen []string
		for _, ev := range list.Items {
			if ev.InvolvedObject.Kind != "EtcdCluster" || ev.InvolvedObject.Name != e.Name || ev.Reason != reason {
				continue
			}
			if ev.Type == typ && strings.Contains(ev.Message, text) {
				found = ev
				return true, nil
			}
			seen = append(seen, fmt.Sprintf("%s: %q", ev.Type, ev.Message))
		}
		return false, fmt.Errorf("the %s Events are %v", reason, seen)
	})
	return found
}

// podUIDs returns the member pods' UIDs by name, and the revision they all
// carry; the test fails when they carry none or different ones.
func (e *etcdTest) podUIDs(t *testing.T) (map[string]types.UID, string) {
	t.Helper()
	pods, err := e.pods(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]types.UID{}
	revs := map[string]bool{}
	for _, p := range pods {
		uids[p.Name] = p.UID
		revs[p.Annotations[memberRevisionAnnotation]] = true
	}
	if len(revs) != 1 || revs[""] {
		t.Fatalf("the member pods carry revisions %v in annotation %s, want one and the same", slices.Collect(maps.Keys(revs)), memberRevisionAnnotation)
	}
	return uids, slices.Collect(maps.Keys(revs))[0]
}

// rollEnd is how a roll ended.
type rollEnd struct {
	cluster  *etcdv1alpha1.EtcdCluster
	revision string
}

// waitRollEnd waits until a roll has ended: the spec observed,
// status.update cleared, Progressing off the roll's reasons, and every
// member pod Ready on one revision; accept checks the rest. A roll that
// stalls, is blocked or whose check fails ends the wait at once: it goes
// on only once someone acts.
func (e *etcdTest) waitRollEnd(t *testing.T, what string, accept func(*etcdv1alpha1.EtcdCluster, []corev1.Pod) error) rollEnd {
	t.Helper()
	var end rollEnd
	cluster.WaitFor(t, rollTimeout, what, func(ctx context.Context) (bool, error) {
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		// A condition of an older generation (a stall that the spec
		// just corrected) says nothing of this roll.
		if d := meta.FindStatusCondition(ec.Status.Conditions, etcdv1alpha1.ConditionDegraded); d != nil && d.Status == metav1.ConditionTrue && d.ObservedGeneration == ec.Generation &&
			slices.Contains([]string{etcdv1alpha1.ReasonUpdateStalled, etcdv1alpha1.ReasonUpgradeBlocked, etcdv1alpha1.ReasonUpdateCheckFailed}, d.Reason) {
			return false, framework.Stop(fmt.Errorf("the roll stopped: %s", conditionsOf(ec)))
		}
		if ec.Status.ObservedGeneration != ec.Generation {
			return false, fmt.Errorf("status.observedGeneration is %d, the generation %d", ec.Status.ObservedGeneration, ec.Generation)
		}
		if u := ec.Status.Update; u != nil {
			return false, fmt.Errorf("status.update is %+v; %s", *u, conditionsOf(ec))
		}
		if p := meta.FindStatusCondition(ec.Status.Conditions, etcdv1alpha1.ConditionProgressing); p == nil || slices.Contains(rollReasons, p.Reason) {
			return false, fmt.Errorf("still rolling: %s", conditionsOf(ec))
		}
		pods, err := e.pods(ctx)
		if err != nil {
			return false, err
		}
		if len(pods) != 3 {
			return false, fmt.Errorf("%d member pods, want 3", len(pods))
		}
		revs := map[string]bool{}
		for i := range pods {
			p := &pods[i]
			if p.DeletionTimestamp != nil || !podReady(p) {
				return false, fmt.Errorf("pod %s is not Ready (%s, deleting %t)", p.Name, p.Status.Phase, p.DeletionTimestamp != nil)
			}
			revs[p.Annotations[memberRevisionAnnotation]] = true
		}
		if len(revs) != 1 {
			return false, fmt.Errorf("the pods carry revisions %v", slices.Collect(maps.Keys(revs)))
		}
		if err := accept(ec, pods); err != nil {
			return false, fmt.Errorf("%w; %s", err, conditionsOf(ec))
		}
		end = rollEnd{cluster: ec, revision: pods[0].Annotations[memberRevisionAnnotation]}
		return true, nil
	})
	return end
}

// waitUpgradeBackup waits until the pre-upgrade EtcdBackup is Complete and
// Verified, and fails at once if a member pod restarts, a member reports
// the new version, or the members' template leaves the old version before
// that.
func (e *etcdTest) waitUpgradeBackup(t *testing.T, name string, orig map[string]types.UID, pods *podRecorder, from string) *etcdv1alpha1.EtcdBackup {
	t.Helper()
	b := &etcdv1alpha1.EtcdBackup{}
	cluster.WaitFor(t, 6*time.Minute, "EtcdBackup "+name+" Complete and Verified, with no member restarted", func(ctx context.Context) (bool, error) {
		// The backup is read before the pods: a pod that restarted
		// since was restarted while the backup was not yet done.
		err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, b)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		created := err == nil
		conds := b.Status.Conditions
		if f := meta.FindStatusCondition(conds, etcdv1alpha1.BackupFailed); created && f != nil && f.Status == metav1.ConditionTrue {
			return false, framework.Stop(fmt.Errorf("the backup failed: %s: %s", f.Reason, f.Message))
		}
		done := created && meta.IsStatusConditionTrue(conds, etcdv1alpha1.BackupComplete) && meta.IsStatusConditionTrue(conds, etcdv1alpha1.BackupVerified)
		if done {
			return true, nil
		}
		for pod, l := range pods.snapshot() {
			if len(l) > 1 || l[0].UID != orig[pod] {
				return false, framework.Stop(fmt.Errorf("member pod %s was replaced (%s) before the backup was Complete and Verified (its conditions: %v)", pod, describeLives(l), conds))
			}
		}
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		for _, m := range ec.Status.Members {
			if m.Version != from {
				return false, framework.Stop(fmt.Errorf("member %s runs %q before the backup is done, want %s", m.Name, m.Version, from))
			}
		}
		if image, err := e.templateImage(ctx); err != nil {
			return false, err
		} else if !strings.HasSuffix(image, ":"+from) {
			return false, framework.Stop(fmt.Errorf("the StatefulSet's etcd image is %s before the backup is done, want the running %s", image, from))
		}
		if !created {
			return false, fmt.Errorf("no EtcdBackup %s yet; %s", name, conditionsOf(ec))
		}
		return false, fmt.Errorf("the backup's phase is %q, conditions %v", b.Status.Phase, conds)
	})

	ec, err := e.get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(b); ref == nil || ref.UID != ec.UID {
		t.Errorf("EtcdBackup %s has controller %v, want the EtcdCluster %s (uid %s)", name, ref, ec.Name, ec.UID)
	}
	if v := b.Status.Verification; v == nil || !v.HashMatches {
		t.Errorf("EtcdBackup %s is Verified, but its verification is %+v", name, v)
	}
	claim := e.Name + "-upgrade-backups"
	if d := b.Spec.Destination.Volume; d == nil || d.ClaimName != claim {
		t.Errorf("EtcdBackup %s goes to %+v, want the volume claim %s (the cluster has no spec.backup)", name, b.Spec.Destination, claim)
	} else if err := cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: e.Namespace, Name: claim}, &corev1.PersistentVolumeClaim{}); err != nil {
		t.Errorf("the pre-upgrade backup's claim: %v", err)
	}
	return b
}

// backupVerifiedAt is when b became both Complete and Verified.
func backupVerifiedAt(b *etcdv1alpha1.EtcdBackup) *metav1.Time {
	var at *metav1.Time
	for _, typ := range []string{etcdv1alpha1.BackupComplete, etcdv1alpha1.BackupVerified} {
		if c := meta.FindStatusCondition(b.Status.Conditions, typ); c != nil && (at == nil || at.Before(&c.LastTransitionTime)) {
			at = c.LastTransitionTime.DeepCopy()
		}
	}
	return at
}

// templateImage is the etcd container's image in the StatefulSet's template.
func (e *etcdTest) templateImage(ctx context.Context) (string, error) {
	sts := &appsv1.StatefulSet{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: e.Name}, sts); err != nil {
		return "", err
	}
	for _, c := range sts.Spec.Template.Spec.Containers {
		if c.Name == "etcd" {
			return c.Image, nil
		}
	}
	return "", fmt.Errorf("the StatefulSet's template has no etcd container")
}

// checkRequests says how pod's etcd container's requests differ from want.
func checkRequests(pod *corev1.Pod, want corev1.ResourceList) error {
	for _, c := range pod.Spec.Containers {
		if c.Name != "etcd" {
			continue
		}
		for name, q := range want {
			if got, ok := c.Resources.Requests[name]; !ok || got.Cmp(q) != 0 {
				return fmt.Errorf("pod %s requests %s %v, want %s", pod.Name, name, c.Resources.Requests, q.String())
			}
		}
		return nil
	}
	return fmt.Errorf("pod %s has no etcd container", pod.Name)
}

// checkJobSucceeded checks that the roll to rev was checked by its Job,
// <name>-check-<rev[:8]>, which belongs to the cluster and succeeded.
func (e *etcdTest) checkJobSucceeded(t *testing.T, rev string) {
	t.Helper()
	name := fmt.Sprintf("%s-check-%s", e.Name, rev[:min(8, len(rev))])
	job := &batchv1.Job{}
	if err := cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: e.Namespace, Name: name}, job); err != nil {
		t.Errorf("the check Job: %v", err)
		return
	}
	if !jobComplete(job) {
		t.Errorf("the check Job %s has not completed: %+v", name, job.Status)
	}
	if ref := metav1.GetControllerOf(job); ref == nil || ref.Kind != "EtcdCluster" || ref.Name != e.Name {
		t.Errorf("the check Job %s has controller %v, want the EtcdCluster %s", name, ref, e.Name)
	}
}

// raftTerm returns the raft term that every member reports, once they
// agree.
func (e *etcdTest) raftTerm(t *testing.T) uint64 {
	t.Helper()
	tlsConfig := e.clientTLS(t)
	var term uint64
	cluster.WaitFor(t, time.Minute, "every member to report the same raft term", func(ctx context.Context) (bool, error) {
		terms, err := e.raftTerms(ctx, tlsConfig)
		if err != nil {
			return false, err
		}
		distinct := map[uint64]bool{}
		for _, v := range terms {
			distinct[v] = true
			term = v
		}
		if len(terms) != 3 || len(distinct) != 1 {
			return false, fmt.Errorf("the members report terms %v", terms)
		}
		return true, nil
	})
	return term
}

func (e *etcdTest) raftTerms(ctx context.Context, tlsConfig *tls.Config) (map[string]uint64, error) {
	hosts, members, err := e.hostsNow(ctx)
	if err != nil {
		return nil, err
	}
	cli, err := framework.NewEtcdClient(tlsConfig, hosts, e.serviceEndpoint())
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	terms := map[string]uint64{}
	for _, m := range members {
		callCtx, cancel := context.WithTimeout(ctx, etcdCallTimeout)
		resp, err := cli.Status(callCtx, e.memberEndpoint(m))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("the status of member %s: %w", m, err)
		}
		terms[m] = resp.RaftTerm
	}
	return terms, nil
}

// startLiveWriter starts a writer through the client Service and waits for
// its first acknowledged writes.
func (e *etcdTest) startLiveWriter(t *testing.T) *framework.Writer {
	t.Helper()
	w := startWriter(t, cluster.EtcdClient(t, e.clientTLS(t), e.hosts(t), e.serviceEndpoint()))
	cluster.WaitFor(t, time.Minute, "the writer's first writes", func(context.Context) (bool, error) {
		if n := w.Acked(); n < 10 {
			return false, fmt.Errorf("%d acknowledged writes", n)
		}
		return true, nil
	})
	return w
}

// stopWriter stops w and returns its acknowledged writes; it fails the test
// when there are none.
func (e *etcdTest) stopWriter(t *testing.T, w *framework.Writer) map[string]string {
	t.Helper()
	acked, failed, lastErr := w.Stop()
	t.Logf("The writer wrote %d keys that etcd acknowledged; %d writes failed (the last with %v)", len(acked), failed, lastErr)
	if len(acked) == 0 {
		t.Fatalf("etcd acknowledged no write (%d failed, the last with %v)", failed, lastErr)
	}
	return acked
}

// checkAcked checks that every acknowledged write reads back, through the
// client Service.
func (e *etcdTest) checkAcked(t *testing.T, acked map[string]string) {
	t.Helper()
	lost := framework.Lost(acked, e.readPrefix(t, writerPrefix))
	if len(lost) > 0 {
		t.Errorf("%d of %d acknowledged writes are lost, such as %v", len(lost), len(acked), lost[:min(len(lost), 10)])
	}
}

// checkKeys checks that the cluster holds want.
func (e *etcdTest) checkKeys(t *testing.T, want map[string]string) {
	t.Helper()
	prefix := ""
	for k := range want {
		prefix, _, _ = strings.Cut(k, "/")
		break
	}
	stored := e.readPrefix(t, prefix+"/")
	for k, v := range want {
		if stored[k] != v {
			t.Errorf("key %s holds %q, want %q", k, stored[k], v)
		}
	}
}

// readPrefix reads every key under prefix through the client Service, with
// a client made now (the members' addresses change as they restart).
func (e *etcdTest) readPrefix(t *testing.T, prefix string) map[string]string {
	t.Helper()
	cli := cluster.EtcdClient(t, e.clientTLS(t), e.hosts(t), e.serviceEndpoint())
	var stored map[string]string
	cluster.WaitFor(t, time.Minute, "a read of the keys under "+prefix, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, etcdCallTimeout)
		defer cancel()
		var err error
		stored, err = framework.ReadPrefix(ctx, cli, prefix)
		return err == nil, err
	})
	return stored
}

// checkRestartedOnce checks that each member pod was replaced exactly once,
// by a pod on rev, and returns the members in the order they restarted.
func checkRestartedOnce(t *testing.T, lives map[string][]podLife, orig map[string]types.UID, rev string) []string {
	t.Helper()
	if got := slices.Sorted(maps.Keys(lives)); !slices.Equal(got, slices.Sorted(maps.Keys(orig))) {
		t.Errorf("the member pods seen are %v, want %v", got, slices.Sorted(maps.Keys(orig)))
	}
	var order []string
	restarts := 0
	for name, l := range lives {
		restarts += len(l) - 1
		if len(l) != 2 || l[0].UID != orig[name] || l[1].Revision != rev {
			t.Errorf("member %s had pods %s; want its original %s and one new pod on revision %s", name, describeLives(l), orig[name], rev)
			continue
		}
		order = append(order, name)
	}
	slices.SortFunc(order, func(a, b string) int { return lives[a][1].Seen - lives[b][1].Seen })
	t.Logf("%d pod restarts, in the order %v", restarts, order)
	return order
}

// checkRestartOrder checks the roll's order: followers by descending
// ordinal, then the leader.
func checkRestartOrder(t *testing.T, order []string, leader string) {
	t.Helper()
	var want []string
	for _, name := range order {
		if name != leader {
			want = append(want, name)
		}
	}
	slices.SortFunc(want, func(a, b string) int { return ordinal(b) - ordinal(a) })
	want = append(want, leader)
	if !slices.Equal(order, want) {
		t.Errorf("the members restarted in the order %v, want %v: followers by descending ordinal, then the leader %s", order, want, leader)
	}
}

func ordinal(pod string) int {
	i := strings.LastIndexByte(pod, '-')
	n, _ := strconv.Atoi(pod[i+1:])
	return n
}

// movedOff lists the members whose latest pod is new and carries another
// revision than rev.
func movedOff(lives map[string][]podLife, orig map[string]types.UID, rev string) []namedLife {
	var out []namedLife
	for _, name := range slices.Sorted(maps.Keys(lives)) {
		l := lives[name]
		last := l[len(l)-1]
		if last.UID != orig[name] && last.Revision != rev {
			out = append(out, namedLife{name, last})
		}
	}
	return out
}

type namedLife struct {
	name string
	life podLife
}

// checkOthersUntouched says how members other than victim differ from
// having kept their original pods on rev.
func checkOthersUntouched(lives map[string][]podLife, orig map[string]types.UID, victim, rev string) error {
	for name, l := range lives {
		if name == victim {
			continue
		}
		if len(l) != 1 || l[0].UID != orig[name] || l[0].Revision != rev {
			return fmt.Errorf("member %s, which the stalled roll must not touch, had pods %s", name, describeLives(l))
		}
	}
	return nil
}

func describeLives(l []podLife) string {
	var parts []string
	for _, p := range l {
		parts = append(parts, fmt.Sprintf("{uid %s, revision %s, made %s, ever ready %t}", p.UID, p.Revision, p.Created.UTC().Format(time.RFC3339), p.EverReady))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// podLife is one pod of a member's name, as a podRecorder saw it.
type podLife struct {
	UID types.UID
	// Seen orders the pods of all names as the recorder first saw them.
	Seen      int
	Created   time.Time
	Revision  string
	EverReady bool
}

// podRecorder watches the member pods of a cluster and keeps every pod
// that each name had, in order: a pod that lived for less than a poll
// would be missed by polling, and a double restart is what it must catch.
type podRecorder struct {
	e      *etcdTest
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu    sync.Mutex
	lives map[string][]podLife
	seen  int
}

// recordPods starts recording the member pods; the pods of now are known
// when it returns. It stops when the test ends.
func (e *etcdTest) recordPods(t *testing.T) *podRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &podRecorder{e: e, cancel: cancel, done: make(chan struct{}), lives: map[string][]podLife{}}
	rv, err := r.list(ctx)
	if err != nil {
		cancel()
		t.Fatalf("listing the member pods: %v", err)
	}
	go r.run(ctx, rv)
	t.Cleanup(r.stop)
	return r
}

func (r *podRecorder) stop() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
}

func (r *podRecorder) listOptions(rv string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: etcdClusterLabel + "=" + r.e.Name, ResourceVersion: rv, AllowWatchBookmarks: rv != ""}
}

func (r *podRecorder) list(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	list, err := cluster.Clientset.CoreV1().Pods(r.e.Namespace).List(ctx, r.listOptions(""))
	if err != nil {
		return "", err
	}
	for i := range list.Items {
		r.observe(&list.Items[i])
	}
	return list.ResourceVersion, nil
}

// run watches from rv, and lists again whenever the watch cannot go on.
func (r *podRecorder) run(ctx context.Context, rv string) {
	defer close(r.done)
	for ctx.Err() == nil {
		if rv == "" {
			var err error
			if rv, err = r.list(ctx); err != nil {
				sleepCtx(ctx, time.Second)
				continue
			}
		}
		w, err := cluster.Clientset.CoreV1().Pods(r.e.Namespace).Watch(ctx, r.listOptions(rv))
		if err != nil {
			rv = ""
			sleepCtx(ctx, time.Second)
			continue
		}
		rv = r.drain(w, rv)
		w.Stop()
	}
}

// drain records w's pods until it ends, and returns the resource version
// to go on from, or "" to list again.
func (r *podRecorder) drain(w watch.Interface, rv string) string {
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			return ""
		case watch.Bookmark:
			if obj, err := meta.Accessor(ev.Object); err == nil {
				rv = obj.GetResourceVersion()
			}
		default:
			if pod, ok := ev.Object.(*corev1.Pod); ok {
				r.observe(pod)
				rv = pod.ResourceVersion
			}
		}
	}
	return rv
}

// observe records pod if the cluster's StatefulSet controls it.
func (r *podRecorder) observe(pod *corev1.Pod) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "StatefulSet" || ref.Name != r.e.Name {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lives[pod.Name]
	i := slices.IndexFunc(l, func(p podLife) bool { return p.UID == pod.UID })
	if i < 0 {
		r.seen++
		l = append(l, podLife{UID: pod.UID, Seen: r.seen, Created: pod.CreationTimestamp.Time, Revision: pod.Annotations[memberRevisionAnnotation]})
		i = len(l) - 1
	}
	l[i].EverReady = l[i].EverReady || podReady(pod)
	r.lives[pod.Name] = l
}

// snapshot is every member's pods so far, in the order they came.
func (r *podRecorder) snapshot() map[string][]podLife {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]podLife, len(r.lives))
	for k, v := range r.lives {
		out[k] = slices.Clone(v)
	}
	return out
}

// statusRecord is what a statusRecorder saw of a cluster's status.
type statusRecord struct {
	// leaders are the successive leaders that status.leader named.
	leaders []string
	// notAvailable samples the polls where Available was not True, of
	// notAvailableCount.
	notAvailable      []string
	notAvailableCount int
	// progressing and degraded are the reasons the conditions had (True,
	// for Degraded), in the order they first came.
	progressing, degraded []string
	maxLeaderMoves        int32
	// backups are the pre-upgrade backups that status.update named.
	backups []string
	// updatePolls counts the polls with status.update set; lastUpdate is
	// the last one seen.
	updatePolls int
	lastUpdate  *etcdv1alpha1.UpdateStatus
	// earlyVersion lists polls where status.currentVersion already showed
	// a version upgrade's target while the roll was on.
	earlyVersion []string
}

// statusRecorder polls a cluster's status every second.
type statusRecorder struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu  sync.Mutex
	rec statusRecord
}

// recordStatus starts polling the cluster's status; it stops when the test
// ends, if not before.
func (e *etcdTest) recordStatus(t *testing.T) *statusRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	s := &statusRecorder{cancel: cancel, done: make(chan struct{})}
	go s.run(ctx, e)
	t.Cleanup(func() { s.stop() })
	return s
}

func (s *statusRecorder) run(ctx context.Context, e *etcdTest) {
	defer close(s.done)
	for ctx.Err() == nil {
		getCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ec, err := e.get(getCtx)
		cancel()
		if err == nil {
			s.observe(ec)
		}
		sleepCtx(ctx, time.Second)
	}
}

func (s *statusRecorder) observe(ec *etcdv1alpha1.EtcdCluster) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &s.rec
	st := ec.Status
	if st.Leader != "" && (len(r.leaders) == 0 || r.leaders[len(r.leaders)-1] != st.Leader) {
		r.leaders = append(r.leaders, st.Leader)
	}
	if c := meta.FindStatusCondition(st.Conditions, etcdv1alpha1.ConditionAvailable); c == nil || c.Status != metav1.ConditionTrue {
		r.notAvailableCount++
		if len(r.notAvailable) < 10 {
			r.notAvailable = append(r.notAvailable, fmt.Sprintf("at %s: %s", time.Now().UTC().Format(time.RFC3339), conditionsOf(ec)))
		}
	}
	if c := meta.FindStatusCondition(st.Conditions, etcdv1alpha1.ConditionProgressing); c != nil && !slices.Contains(r.progressing, c.Reason) {
		r.progressing = append(r.progressing, c.Reason)
	}
	if c := meta.FindStatusCondition(st.Conditions, etcdv1alpha1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue && !slices.Contains(r.degraded, c.Reason) {
		r.degraded = append(r.degraded, c.Reason)
	}
	if u := st.Update; u != nil {
		r.updatePolls++
		r.lastUpdate = u.DeepCopy()
		r.maxLeaderMoves = max(r.maxLeaderMoves, u.LeaderMoves)
		if u.Backup != "" && !slices.Contains(r.backups, u.Backup) {
			r.backups = append(r.backups, u.Backup)
		}
		if u.From != u.To && st.CurrentVersion == u.To {
			r.earlyVersion = append(r.earlyVersion, fmt.Sprintf("currentVersion %s with update %+v", st.CurrentVersion, *u))
		}
	}
}

// stop stops polling and returns what was seen.
func (s *statusRecorder) stop() statusRecord {
	s.once.Do(func() {
		s.cancel()
		<-s.done
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
