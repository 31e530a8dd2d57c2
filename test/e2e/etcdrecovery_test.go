//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// Disaster recovery of an EtcdCluster on the real node: an in-place
// EtcdRestore, and the recovery from a lost quorum, by itself (Auto), once
// a person approves it (Manual), and not at all while the members that
// it would give up merely do not answer. As elsewhere, the annotation and
// the names that the contract promises are spelled out here.
const (
	// recoverFromAnnotation approves a Manual recovery:
	// member/<pod name> or backup/<EtcdBackup name>.
	recoverFromAnnotation = "etcd.tend.dev/recover-from"
	// restoreBump is what an in-place restore adds to the backup's
	// revision: a watcher of the old store never sees a revision again.
	restoreBump = 1_000_000_000
	// recoveryTimeout bounds a whole restore or recovery of three members
	// on this node, growth back to three included: a bound on a failure,
	// not an expectation of speed.
	recoveryTimeout = 10 * time.Minute
	// clientPodName is the application pod that outlives a restore.
	clientPodName = "app"
	// clientTLSDir is where it mounts the client certificate.
	clientTLSDir = "/etc/etcd/client-tls"
)

// restorePhases are the phases of an EtcdRestore, in order.
var restorePhases = []string{
	etcdv1alpha1.RecoveryPending, etcdv1alpha1.RecoveryStopping, etcdv1alpha1.RecoveryRestoring,
	etcdv1alpha1.RecoveryStarting, etcdv1alpha1.RecoveryChecking, etcdv1alpha1.RecoveryComplete,
}

// A 3-member cluster holds keys a-*, is backed up to a volume (verified),
// then gets keys b-*. An application pod, started before any restore,
// reaches it through the client Service with the client certificate. An
// EtcdRestore without confirmOverwrite fails at once with ClusterAvailable
// and touches nothing. One with it goes through its phases to Complete:
// the cluster holds a-* and not b-*, at a revision at least the backup's
// plus 1e9, every member the same data; the same application pod, with
// the same Service and certificate Secret (neither changed), reads and
// writes; the EtcdCluster is Available with 3 members and says what it
// was restored from; both objects have Events.
func TestEtcdRestoreInPlace(t *testing.T) {
	t.Parallel()
	e := newRollTest(t, "kv", cluster.Settings.EtcdVersion, nil)
	before := e.waitReady(t, 3)
	ns := e.Namespace
	a := e.putKeys(t, "a-", 50)
	backup := e.volumeBackup(t, "before-b")
	backupRev := backup.Status.Snapshot.Revision
	b := e.putKeys(t, "b-", 50)

	app := e.startClientPod(t)
	if got, err := e.clientGet(t, "b-000"); err != nil || got != b["b-000"] {
		t.Fatalf("the application pod read %q (%v) under b-000 before any restore, want %q", got, err, b["b-000"])
	}
	kept := e.connectionObjects(t)
	orig, _ := e.podUIDs(t)
	pods := e.recordPods(t)

	// Without confirmOverwrite, an Available cluster is not touched.
	refused := newRestore(ns, "unconfirmed", e.Name, backup.Name, false)
	mustCreate(t, refused)
	got := waitRestore(t, refused, time.Minute, "Failed=True with reason ClusterAvailable", func(r *etcdv1alpha1.EtcdRestore) (bool, error) {
		if c := meta.FindStatusCondition(r.Status.Conditions, etcdv1alpha1.RestoreComplete); c != nil && c.Status == metav1.ConditionTrue {
			return false, framework.Stop(fmt.Errorf("it completed: %s", restoreSummary(r)))
		}
		return restoreHasCondition(r, etcdv1alpha1.RestoreFailed, metav1.ConditionTrue, etcdv1alpha1.ReasonClusterAvailable)
	})
	t.Logf("The restore without confirmOverwrite: %s", restoreSummary(got))
	cluster.Consistently(t, 15*time.Second, "the cluster after the unconfirmed restore", func(ctx context.Context) error {
		r := &etcdv1alpha1.EtcdRestore{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(refused), r); err != nil {
			return err
		}
		if ok, err := restoreHasCondition(r, etcdv1alpha1.RestoreFailed, metav1.ConditionTrue, etcdv1alpha1.ReasonClusterAvailable); !ok {
			return err
		}
		if r.Status.MembersStopped {
			return fmt.Errorf("the unconfirmed restore stopped the members: %s", restoreSummary(r))
		}
		ec, err := e.get(ctx)
		if err != nil {
			return err
		}
		if rec := ec.Status.Recovery; rec != nil {
			return fmt.Errorf("the unconfirmed restore started a recovery: status.recovery is %+v", *rec)
		}
		if ok, err := hasCondition(ec, etcdv1alpha1.ConditionAvailable, metav1.ConditionTrue, etcdv1alpha1.ReasonQuorumHealthy); !ok {
			return err
		}
		for name, l := range pods.snapshot() {
			if len(l) != 1 || l[0].UID != orig[name] {
				return fmt.Errorf("member pod %s was replaced after the unconfirmed restore: %s", name, describeLives(l))
			}
		}
		return nil
	})
	if stored := e.readPrefix(t, "b-"); !maps.Equal(stored, b) {
		t.Errorf("after the unconfirmed restore the cluster holds %d keys under b-, want the %d written (lost: %v)", len(stored), len(b), framework.Lost(b, stored))
	}

	// With it, the data is replaced in place.
	rec := e.recordRecovery(t, "restore")
	restore := newRestore(ns, "restore", e.Name, backup.Name, true)
	created := time.Now()
	mustCreate(t, restore)
	done := waitRestore(t, restore, recoveryTimeout, "Complete=True with reason Restored", func(r *etcdv1alpha1.EtcdRestore) (bool, error) {
		if c := meta.FindStatusCondition(r.Status.Conditions, etcdv1alpha1.RestoreFailed); c != nil && c.Status == metav1.ConditionTrue {
			return false, framework.Stop(fmt.Errorf("it failed: %s", restoreSummary(r)))
		}
		return restoreHasCondition(r, etcdv1alpha1.RestoreComplete, metav1.ConditionTrue, etcdv1alpha1.ReasonRestoreSucceeded)
	})
	t.Logf("The EtcdRestore was Complete %s after its create: %s", time.Since(created).Round(time.Second), restoreSummary(done))
	cluster.WaitReady(t, time.Minute, ns, "etcdrestore/"+restore.Name)
	e.waitRecovered(t, recoveryTimeout)
	t.Logf("The EtcdCluster was Available with 3 members %s after the EtcdRestore's create", time.Since(created).Round(time.Second))
	ready := e.waitReady(t, 3)

	// The EtcdRestore says what it restored, and when.
	if done.Status.Phase != etcdv1alpha1.RecoveryComplete {
		t.Errorf("the EtcdRestore's phase is %q, want %s", done.Status.Phase, etcdv1alpha1.RecoveryComplete)
	}
	if rf := done.Status.RestoredFrom; rf == nil || rf.Backup != backup.Name || rf.URI != backup.Status.Artifact.URI || rf.Revision != backupRev {
		t.Errorf("the EtcdRestore's status.restoredFrom is %+v, want backup %s, URI %s, revision %d", rf, backup.Name, backup.Status.Artifact.URI, backupRev)
	}
	if st, ct := done.Status.StartTime, done.Status.CompletionTime; st == nil || ct == nil || ct.Before(st) || st.Time.Before(created.Add(-time.Second).Truncate(time.Second)) {
		t.Errorf("the EtcdRestore's startTime is %v and completionTime %v; want both, in order, after its create at %s", st, ct, created.UTC().Format(time.RFC3339))
	}
	seen := rec.stop()
	// The last poll may have come before the phase that waitRestore saw.
	seen.restorePhases = appendNew(seen.restorePhases, done.Status.Phase)
	if err := inOrder(seen.restorePhases, restorePhases); err != nil {
		t.Errorf("the EtcdRestore's phases: %v", err)
	}
	t.Logf("The EtcdRestore went through %v; the EtcdCluster through phases %v, Progressing %v, status.recovery %v",
		seen.restorePhases, seen.phases, seen.progressing, seen.recoveries)
	if !slices.Contains(seen.progressing, etcdv1alpha1.ReasonRecovering) || !slices.Contains(seen.phases, etcdv1alpha1.PhaseRecovering) {
		t.Errorf("the EtcdCluster never showed Progressing reason %s and phase %s during the restore; it showed %v and %v",
			etcdv1alpha1.ReasonRecovering, etcdv1alpha1.PhaseRecovering, seen.progressing, seen.phases)
	}
	wantRecovery := fmt.Sprintf("%s restore %s", etcdv1alpha1.RecoveryFromBackup, restore.Name)
	for _, r := range seen.recoveries {
		if !strings.HasPrefix(r, wantRecovery+" ") {
			t.Errorf("status.recovery was %q during the restore, want kind %s naming %s", r, etcdv1alpha1.RecoveryFromBackup, restore.Name)
		}
	}

	// The EtcdCluster is whole and says where its data comes from.
	if rf := ready.Status.RestoredFrom; rf == nil || rf.Backup != backup.Name || rf.Revision != backupRev {
		t.Errorf("the EtcdCluster's status.restoredFrom is %+v, want backup %s at revision %d", rf, backup.Name, backupRev)
	}
	if r := ready.Status.Recovery; r == nil || r.Kind != etcdv1alpha1.RecoveryFromBackup || r.Restore != restore.Name || r.Phase != etcdv1alpha1.RecoveryComplete || r.CompletedAt == nil {
		t.Errorf("the EtcdCluster's status.recovery is %+v, want kind %s, restore %s, phase %s, completedAt set", r, etcdv1alpha1.RecoveryFromBackup, restore.Name, etcdv1alpha1.RecoveryComplete)
	}
	if ready.Status.ClientEndpoint != before.Status.ClientEndpoint {
		t.Errorf("status.clientEndpoint is %q after the restore, was %q", ready.Status.ClientEndpoint, before.Status.ClientEndpoint)
	}

	// The data is the backup's, at bumped revisions, on every member.
	if stored := e.readPrefix(t, "a-"); !maps.Equal(stored, a) {
		t.Errorf("after the restore the cluster holds %d keys under a-, want the %d of the backup (lost: %v)", len(stored), len(a), framework.Lost(a, stored))
	}
	if stored := e.readPrefix(t, "b-"); len(stored) != 0 {
		t.Errorf("after the restore the cluster still holds %d keys under b-, written after the backup", len(stored))
	}
	if rev := e.revision(t); rev < backupRev+restoreBump {
		t.Errorf("the cluster is at revision %d after the restore, want at least the backup's %d + %d", rev, backupRev, restoreBump)
	} else {
		t.Logf("The cluster is at revision %d; the backup held %d", rev, backupRev)
	}
	e.checkSameData(t)

	// The application pod, untouched, goes on with the same Service and
	// certificate.
	e.checkConnectionKept(t, kept)
	now := &corev1.Pod{}
	if err := cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(app), now); err != nil {
		t.Fatal(err)
	}
	if now.UID != app.UID || !podReady(now) {
		t.Errorf("the application pod is %s (uid %s, ready %t), want the one started before the restore, %s, Ready", now.Name, now.UID, podReady(now), app.UID)
	}
	if got, err := e.clientGet(t, "a-000"); err != nil || got != a["a-000"] {
		t.Errorf("the application pod read %q (%v) under a-000 after the restore, want %q", got, err, a["a-000"])
	}
	if got, err := e.clientGet(t, "b-000"); err != nil || got != "" {
		t.Errorf("the application pod read %q (%v) under b-000 after the restore, want nothing", got, err)
	}
	if _, err := e.clientExec(t, "put", "app/after-restore", "written-by-the-app"); err != nil {
		t.Errorf("the application pod could not write after the restore: %v", err)
	}
	e.checkKeys(t, map[string]string{"app/after-restore": "written-by-the-app"})

	// Events say what happened, on both objects.
	e.waitEventsOf(t, "EtcdRestore", restore.Name, "")
	e.waitEventsOf(t, "EtcdCluster", e.Name, restore.Name)
}

// A 3-member cluster with spec.quorumLoss Auto, after 20s, loses two
// members with their data (volume claims and pods deleted): Tend recovers
// it by itself from the third, the survivor, whose data it keeps
// (status.recovery kind Survivor naming it, through its phases), and the
// cluster grows back to 3 members through learners; every write that was
// acknowledged before the loss is there, on every member.
func TestEtcdQuorumLossAuto(t *testing.T) {
	t.Parallel()
	e := newRollTest(t, "kv", cluster.Settings.EtcdVersion, func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.QuorumLoss = etcdv1alpha1.QuorumLoss{Policy: etcdv1alpha1.QuorumLossAuto, After: &metav1.Duration{Duration: 20 * time.Second}}
	})
	e.quorumLossRecovers(t, nil)
}

// The same with policy Manual, after 10s: Tend plans the recovery from the
// survivor (Degraded RecoveryPlanned, naming it and how to approve) and
// does nothing for 40 s; approved with the annotation
// etcd.tend.dev/recover-from=member/<survivor>, it recovers as with Auto.
func TestEtcdQuorumLossManual(t *testing.T) {
	t.Parallel()
	e := newRollTest(t, "kv", cluster.Settings.EtcdVersion, func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.QuorumLoss = etcdv1alpha1.QuorumLoss{Policy: etcdv1alpha1.QuorumLossManual, After: &metav1.Duration{Duration: 10 * time.Second}}
	})
	e.quorumLossRecovers(t, func(survivor string) {
		var planned *metav1.Condition
		cluster.WaitFor(t, 4*time.Minute, "Degraded=True with reason RecoveryPlanned", func(ctx context.Context) (bool, error) {
			ec, err := e.get(ctx)
			if err != nil {
				return false, err
			}
			if r := ec.Status.Recovery; r != nil {
				return false, framework.Stop(fmt.Errorf("a recovery started unapproved: status.recovery is %+v", *r))
			}
			if ok, err := hasCondition(ec, etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, etcdv1alpha1.ReasonRecoveryPlanned); !ok {
				return false, err
			}
			planned = meta.FindStatusCondition(ec.Status.Conditions, etcdv1alpha1.ConditionDegraded)
			return true, nil
		})
		t.Logf("Degraded/RecoveryPlanned: %q", planned.Message)
		for _, want := range []string{survivor, recoverFromAnnotation, "member/" + survivor} {
			if !strings.Contains(planned.Message, want) {
				t.Errorf("Degraded/RecoveryPlanned says %q, which does not name %q: a person cannot tell what to approve", planned.Message, want)
			}
		}
		cluster.Consistently(t, 40*time.Second, "the unapproved recovery", func(ctx context.Context) error {
			ec, err := e.get(ctx)
			if err != nil {
				return err
			}
			if r := ec.Status.Recovery; r != nil {
				return fmt.Errorf("a recovery started unapproved: status.recovery is %+v", *r)
			}
			if ok, err := hasCondition(ec, etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, etcdv1alpha1.ReasonRecoveryPlanned); !ok {
				return err
			}
			if c := meta.FindStatusCondition(ec.Status.Conditions, etcdv1alpha1.ConditionAvailable); c == nil || c.Status == metav1.ConditionTrue {
				return fmt.Errorf("the cluster is Available without its quorum: %s", conditionsOf(ec))
			}
			return nil
		})
		cluster.Kubectl(t, "-n", e.Namespace, "annotate", "etcdcluster/"+e.Name, recoverFromAnnotation+"=member/"+survivor)
	})
}

// quorumLossRecovers runs the quorum loss of TestEtcdQuorumLossAuto on e:
// a writer, stopped once every member holds its writes; the loss of two
// members with their data, the leader among them; approve, when not nil,
// before the recovery is awaited; the recovery from the survivor; the
// growth back to 3 members; and the checks.
func (e *etcdTest) quorumLossRecovers(t *testing.T, approve func(survivor string)) {
	t.Helper()
	before := e.waitReady(t, 3)
	w := e.startLiveWriter(t)
	cluster.WaitFor(t, time.Minute, "200 acknowledged writes", func(context.Context) (bool, error) {
		if n := w.Acked(); n < 200 {
			return false, fmt.Errorf("%d acknowledged writes", n)
		}
		return true, nil
	})
	acked := e.stopWriter(t, w)
	// Every member holds every acknowledged write, so what the survivor
	// keeps is all of them: a member that lagged would lose the last ones
	// by raft's rules, not Tend's.
	e.checkSameData(t)

	survivor, lost := framework.SurvivorAndLost(before)
	oldIDs := map[string]uint64{}
	for _, m := range before.Status.Members {
		oldIDs[m.Name] = memberID(t, before, m.Name)
	}
	_, survivorClaim := e.podAndClaim(t, survivor)
	rec := e.recordRecovery(t, "")
	e.loseMembers(t, lost)
	lostAt := time.Now()
	t.Logf("Members %v lost their pods and volume claims; %s survives", lost, survivor)

	if approve != nil {
		approve(survivor)
	}
	cluster.WaitFor(t, 5*time.Minute, "status.recovery of kind Survivor naming "+survivor, func(ctx context.Context) (bool, error) {
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		r := ec.Status.Recovery
		switch {
		case r == nil:
			return false, fmt.Errorf("no status.recovery; %s", conditionsOf(ec))
		case r.Kind != etcdv1alpha1.RecoveryFromSurvivor || r.Survivor != survivor:
			return false, framework.Stop(fmt.Errorf("status.recovery is %+v, want kind %s from %s, the one surviving member", *r, etcdv1alpha1.RecoveryFromSurvivor, survivor))
		}
		return true, nil
	})
	t.Logf("Tend began the recovery from %s %s after the loss", survivor, time.Since(lostAt).Round(time.Second))
	e.waitRecovered(t, recoveryTimeout)
	t.Logf("The cluster was Available with 3 members %s after the loss", time.Since(lostAt).Round(time.Second))
	ready := e.waitReady(t, 3)

	seen := rec.stop()
	if r := ready.Status.Recovery; r != nil {
		seen.recoveryPhases = appendNew(seen.recoveryPhases, r.Phase)
	}
	t.Logf("The EtcdCluster went through phases %v; Available %v; Degraded %v; Progressing %v; status.recovery %v; in detail:\n  %s",
		seen.phases, seen.available, seen.degraded, seen.progressing, seen.recoveries, strings.Join(seen.timeline, "\n  "))
	if seen.quorumLost == "" {
		t.Errorf("Available never showed reason %s after the loss; it showed %v", etcdv1alpha1.ReasonQuorumLost, seen.available)
	} else if !strings.Contains(seen.quorumLost, survivor) {
		t.Errorf("Available/QuorumLost says %q, which does not name the surviving member %s", seen.quorumLost, survivor)
	}
	if !slices.Contains(seen.degraded, etcdv1alpha1.ReasonRecoveryPlanned) {
		t.Errorf("Degraded never showed reason %s before the recovery; it showed %v", etcdv1alpha1.ReasonRecoveryPlanned, seen.degraded)
	}
	if !slices.Contains(seen.progressing, etcdv1alpha1.ReasonRecovering) {
		t.Errorf("Progressing showed %v, want %s (the recovery)", seen.progressing, etcdv1alpha1.ReasonRecovering)
	}
	if err := inOrder(seen.recoveryPhases, []string{etcdv1alpha1.RecoveryStopping, etcdv1alpha1.RecoveryRestoring, etcdv1alpha1.RecoveryStarting, etcdv1alpha1.RecoveryComplete}); err != nil {
		t.Errorf("status.recovery's phases: %v", err)
	}
	for _, r := range seen.recoveries {
		if !strings.HasPrefix(r, fmt.Sprintf("%s survivor %s ", etcdv1alpha1.RecoveryFromSurvivor, survivor)) {
			t.Errorf("status.recovery was %q, want kind %s from %s throughout", r, etcdv1alpha1.RecoveryFromSurvivor, survivor)
		}
	}
	if r := ready.Status.Recovery; r == nil || r.Kind != etcdv1alpha1.RecoveryFromSurvivor || r.Survivor != survivor || r.Phase != etcdv1alpha1.RecoveryComplete || r.CompletedAt == nil {
		t.Errorf("status.recovery is %+v at the end, want kind %s from %s, phase %s, completedAt set", r, etcdv1alpha1.RecoveryFromSurvivor, survivor, etcdv1alpha1.RecoveryComplete)
	}

	// The survivor kept its volume; the lost members are new members.
	if _, claim := e.podAndClaim(t, survivor); claim.UID != survivorClaim.UID {
		t.Errorf("the survivor %s has the volume claim %s (uid %s), not the one that held its data (uid %s)", survivor, claim.Name, claim.UID, survivorClaim.UID)
	}
	// The growth back to 3 members went through learners. Progressing's
	// ScalingOut lasts one pass, often too short to be seen, and a pass
	// whose status write meets a conflict leaves it unwritten; the Events
	// are the record of each step.
	var steps []string
	for _, m := range lost {
		id := memberID(t, ready, m)
		if id == oldIDs[m] {
			t.Errorf("member %s has its old ID %x after losing its data: it was not added anew", m, id)
		}
		steps = append(steps, fmt.Sprintf("Added member %s (%x) as a learner", m, id), fmt.Sprintf("Promoted learner %s (%x) to a voting member", m, id))
	}
	e.waitEventsOf(t, "EtcdCluster", e.Name, steps...)

	e.checkAcked(t, acked)
	e.checkSameData(t)
	e.put(t, "after/recovery")
}

// A 3-member cluster with spec.quorumLoss Auto, after 10s, whose two
// members are frozen (their etcd processes stopped with SIGSTOP): they run
// but do not answer, so Tend reports the lost quorum (Available=False
// QuorumLost) and that it will not recover (Degraded RecoveryBlocked), and
// starts no recovery; thawed (SIGCONT), the cluster is Available again with
// the same members, nothing replaced.
func TestEtcdQuorumLossNotOnPartition(t *testing.T) {
	t.Parallel()
	e := newRollTest(t, "kv", cluster.Settings.EtcdVersion, func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.QuorumLoss = etcdv1alpha1.QuorumLoss{Policy: etcdv1alpha1.QuorumLossAuto, After: &metav1.Duration{Duration: 10 * time.Second}}
	})
	before := e.waitReady(t, 3)
	value := e.put(t, "before/freeze")
	survivor, frozen := framework.SurvivorAndLost(before)
	oldIDs := map[string]uint64{}
	for _, m := range before.Status.Members {
		oldIDs[m.Name] = memberID(t, before, m.Name)
	}
	orig, _ := e.podUIDs(t)
	claims := map[string]types.UID{}
	restarts := map[string]int32{}
	for name := range orig {
		pod, claim := e.podAndClaim(t, name)
		claims[name] = claim.UID
		restarts[name] = etcdRestarts(pod)
	}
	pods := e.recordPods(t)

	signal := func(sig syscall.Signal) error {
		for _, name := range frozen {
			pod := &corev1.Pod{}
			if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: e.Namespace, Name: name}, pod); err != nil {
				return err
			}
			if _, err := framework.SignalContainer(pod, "etcd", sig); err != nil {
				return err
			}
		}
		return nil
	}
	// Registered after the namespace's cleanup, so it runs first: a
	// failure leaves no stopped process behind.
	t.Cleanup(func() { _ = signal(syscall.SIGCONT) })
	if err := signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("freezing %v: %v", frozen, err)
	}
	frozenAt := time.Now()
	t.Logf("Froze the etcd processes of %v; %s runs on", frozen, survivor)

	var blocked *metav1.Condition
	cluster.WaitFor(t, 3*time.Minute, "Available=False QuorumLost and Degraded=True RecoveryBlocked", func(ctx context.Context) (bool, error) {
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		if r := ec.Status.Recovery; r != nil {
			return false, framework.Stop(fmt.Errorf("a recovery started while the members it gives up run: status.recovery is %+v", *r))
		}
		if ok, err := hasCondition(ec, etcdv1alpha1.ConditionAvailable, metav1.ConditionFalse, etcdv1alpha1.ReasonQuorumLost); !ok {
			return false, err
		}
		if ok, err := hasCondition(ec, etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, etcdv1alpha1.ReasonRecoveryBlocked); !ok {
			return false, err
		}
		blocked = meta.FindStatusCondition(ec.Status.Conditions, etcdv1alpha1.ConditionDegraded)
		return true, nil
	})
	t.Logf("%s after the freeze, Degraded/RecoveryBlocked: %q", time.Since(frozenAt).Round(time.Second), blocked.Message)
	for _, m := range frozen {
		if !strings.Contains(blocked.Message, m) {
			t.Errorf("Degraded/RecoveryBlocked says %q, which does not name %s, a member that still runs", blocked.Message, m)
		}
	}

	// The kubelet's liveness probe may restart a frozen container after
	// about a minute; that ends its freeze, and Tend must not take the
	// moment it is not running for a loss either.
	var thawedByKubelet []string
	cluster.Consistently(t, 45*time.Second, "no recovery while the frozen members run", func(ctx context.Context) error {
		ec, err := e.get(ctx)
		if err != nil {
			return err
		}
		if r := ec.Status.Recovery; r != nil {
			return fmt.Errorf("a recovery started while the members it would give up run: status.recovery is %+v", *r)
		}
		var restores etcdv1alpha1.EtcdRestoreList
		if err := cluster.Client.List(ctx, &restores, client.InNamespace(e.Namespace)); err != nil {
			return err
		}
		if len(restores.Items) > 0 {
			return fmt.Errorf("Tend created EtcdRestore %s", restores.Items[0].Name)
		}
		for name, l := range pods.snapshot() {
			if len(l) != 1 || l[0].UID != orig[name] {
				return fmt.Errorf("member pod %s was replaced: %s", name, describeLives(l))
			}
		}
		stillFrozen := true
		for _, name := range frozen {
			pod := &corev1.Pod{}
			claim := &corev1.PersistentVolumeClaim{}
			if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, pod); err != nil {
				return err
			}
			if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: "data-" + name}, claim); err != nil {
				return err
			}
			if claim.UID != claims[name] || claim.DeletionTimestamp != nil {
				return fmt.Errorf("the volume claim of %s was deleted or replaced", name)
			}
			if etcdRestarts(pod) != restarts[name] {
				stillFrozen = false
				if !slices.Contains(thawedByKubelet, name) {
					thawedByKubelet = append(thawedByKubelet, name)
				}
			}
		}
		if stillFrozen {
			if ok, err := hasCondition(ec, etcdv1alpha1.ConditionAvailable, metav1.ConditionFalse, etcdv1alpha1.ReasonQuorumLost); !ok {
				return err
			}
		}
		return nil
	})
	if len(thawedByKubelet) > 0 {
		t.Logf("The kubelet restarted the etcd containers of %v (liveness probe) within the window", thawedByKubelet)
	}

	if err := signal(syscall.SIGCONT); err != nil {
		t.Fatalf("thawing %v: %v", frozen, err)
	}
	thawedAt := time.Now()
	after := e.waitReady(t, 3)
	t.Logf("The cluster was Available again %s after the thaw", time.Since(thawedAt).Round(time.Second))
	for name, id := range oldIDs {
		if got := memberID(t, after, name); got != id {
			t.Errorf("member %s has ID %x after the thaw, was %x: it was replaced", name, got, id)
		}
	}
	for name, l := range pods.snapshot() {
		if len(l) != 1 || l[0].UID != orig[name] {
			t.Errorf("member pod %s was replaced: %s", name, describeLives(l))
		}
	}
	if r := after.Status.Recovery; r != nil {
		t.Errorf("status.recovery is %+v, want none: nothing was recovered", *r)
	}
	e.checkKeys(t, map[string]string{"before/freeze": value})
	e.checkSameData(t)
}

// loseMembers deletes the volume claims of members without waiting (a
// claim in use stays Terminating until its pod is gone), then their pods:
// they lose their data.
func (e *etcdTest) loseMembers(t *testing.T, members []string) {
	t.Helper()
	ctx := t.Context()
	for _, m := range members {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: "data-" + m}}
		if err := cluster.Client.Delete(ctx, pvc); err != nil {
			t.Fatalf("deleting the volume claim of %s: %v", m, err)
		}
	}
	for _, m := range members {
		if err := cluster.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: m}}); err != nil {
			t.Fatalf("deleting the pod %s: %v", m, err)
		}
	}
}

// waitRecovered waits until the cluster is Available with 3 healthy
// voters and its status.recovery Complete; a recovery that fails ends the
// wait at once.
func (e *etcdTest) waitRecovered(t *testing.T, timeout time.Duration) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var ec *etcdv1alpha1.EtcdCluster
	cluster.WaitFor(t, timeout, "the recovery to complete and the cluster to be Available with 3 healthy voters", func(ctx context.Context) (bool, error) {
		var err error
		if ec, err = e.get(ctx); err != nil {
			return false, err
		}
		r := ec.Status.Recovery
		switch {
		case r != nil && r.Phase == etcdv1alpha1.RecoveryFailed:
			return false, framework.Stop(fmt.Errorf("the recovery failed: %+v; %s", *r, conditionsOf(ec)))
		case r == nil || r.Phase != etcdv1alpha1.RecoveryComplete:
			return false, fmt.Errorf("status.recovery is %+v; %s", r, conditionsOf(ec))
		}
		voters := 0
		for _, m := range ec.Status.Members {
			if m.Healthy && !m.Learner {
				voters++
			}
		}
		if voters != 3 || len(ec.Status.Members) != 3 {
			return false, fmt.Errorf("%d healthy voters among %d members; %s", voters, len(ec.Status.Members), conditionsOf(ec))
		}
		return hasCondition(ec, etcdv1alpha1.ConditionAvailable, metav1.ConditionTrue, etcdv1alpha1.ReasonQuorumHealthy)
	})
	return ec
}

// putKeys writes n keys <prefix>000, <prefix>001, ... through the client
// Service and returns them.
func (e *etcdTest) putKeys(t *testing.T, prefix string, n int) map[string]string {
	t.Helper()
	cli := cluster.EtcdClient(t, e.clientTLS(t), e.hosts(t), e.serviceEndpoint())
	want := make(map[string]string, n)
	for i := range n {
		key, value := fmt.Sprintf("%s%03d", prefix, i), fmt.Sprintf("%s-value-%d-%d", prefix, i, time.Now().UnixNano())
		ctx, cancel := context.WithTimeout(t.Context(), etcdCallTimeout)
		_, err := cli.Put(ctx, key, value)
		cancel()
		if err != nil {
			t.Fatalf("writing %s: %v", key, err)
		}
		want[key] = value
	}
	return want
}

// revision is the cluster's store revision now, through the client
// Service.
func (e *etcdTest) revision(t *testing.T) int64 {
	t.Helper()
	cli := cluster.EtcdClient(t, e.clientTLS(t), e.hosts(t), e.serviceEndpoint())
	ctx, cancel := context.WithTimeout(t.Context(), etcdCallTimeout)
	defer cancel()
	resp, err := cli.Get(ctx, "any-key")
	if err != nil {
		t.Fatalf("reading the revision: %v", err)
	}
	return resp.Header.Revision
}

// volumeBackup takes an EtcdBackup of the cluster to a volume claim of its
// own, and waits until it is Complete and Verified.
func (e *etcdTest) volumeBackup(t *testing.T, name string) *etcdv1alpha1.EtcdBackup {
	t.Helper()
	claim := backupClaim(e.Namespace)
	mustCreate(t, claim)
	b := newBackup(e.Namespace, name, e.Name, etcdv1alpha1.BackupDestination{
		Volume: &etcdv1alpha1.VolumeLocation{ClaimName: claim.Name, Path: "etcd"},
	}, etcdv1alpha1.CompressionNone)
	mustCreate(t, b)
	got := cluster.WaitBackupVerified(t, b)
	t.Logf("EtcdBackup %s: %s, revision %d", name, got.Status.Artifact.URI, got.Status.Snapshot.Revision)
	return got
}

func newRestore(ns, name, clusterName, backup string, confirm bool) *etcdv1alpha1.EtcdRestore {
	return &etcdv1alpha1.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: etcdv1alpha1.EtcdRestoreSpec{
			ClusterRef:       etcdv1alpha1.ClusterReference{Name: clusterName},
			BackupRef:        &corev1.LocalObjectReference{Name: backup},
			ConfirmOverwrite: confirm,
		},
	}
}

// waitRestore waits until cond holds for the EtcdRestore, and returns it.
func waitRestore(t *testing.T, r *etcdv1alpha1.EtcdRestore, timeout time.Duration, what string, cond func(*etcdv1alpha1.EtcdRestore) (bool, error)) *etcdv1alpha1.EtcdRestore {
	t.Helper()
	got := &etcdv1alpha1.EtcdRestore{}
	cluster.WaitFor(t, timeout, fmt.Sprintf("EtcdRestore %s: %s", r.Name, what), func(ctx context.Context) (bool, error) {
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(r), got); err != nil {
			return false, err
		}
		return cond(got)
	})
	return got
}

// restoreHasCondition is hasCondition for an EtcdRestore.
func restoreHasCondition(r *etcdv1alpha1.EtcdRestore, typ string, status metav1.ConditionStatus, reason string) (bool, error) {
	c := meta.FindStatusCondition(r.Status.Conditions, typ)
	switch {
	case c == nil:
		return false, fmt.Errorf("no %s condition, want %s/%s; %s", typ, status, reason, restoreSummary(r))
	case c.Status != status || c.Reason != reason:
		return false, fmt.Errorf("%s is %s/%s (%q), want %s/%s; %s", typ, c.Status, c.Reason, c.Message, status, reason, restoreSummary(r))
	}
	return true, nil
}

// restoreSummary is an EtcdRestore's status on one line.
func restoreSummary(r *etcdv1alpha1.EtcdRestore) string {
	var parts []string
	for _, c := range r.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s/%s (%q)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("phase %q, membersStopped %t, restoredFrom %+v, conditions: %s", r.Status.Phase, r.Status.MembersStopped, r.Status.RestoredFrom, strings.Join(parts, "; "))
}

// inOrder says how seen (distinct values in the order first seen) breaks
// the order of want, or nil. Polls may miss a short phase; they must not
// see one out of order, or one not in want.
func inOrder(seen, want []string) error {
	last := -1
	for _, s := range seen {
		i := slices.Index(want, s)
		switch {
		case i < 0:
			return fmt.Errorf("saw %v: %q is not one of %v", seen, s, want)
		case i < last:
			return fmt.Errorf("saw %v, out of the order %v", seen, want)
		}
		last = i
	}
	if len(seen) == 0 || seen[len(seen)-1] != want[len(want)-1] {
		return fmt.Errorf("saw %v, which does not end with %s", seen, want[len(want)-1])
	}
	return nil
}

// etcdRestarts is the restart count of pod's etcd container.
func etcdRestarts(pod *corev1.Pod) int32 {
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == "etcd" {
			return st.RestartCount
		}
	}
	return 0
}

// waitEventsOf waits until, for each of texts, an Event about the
// kind/name object has a message containing it, and logs the object's
// Events.
func (e *etcdTest) waitEventsOf(t *testing.T, kind, name string, texts ...string) {
	t.Helper()
	cluster.WaitFor(t, time.Minute, fmt.Sprintf("Events on %s %s mentioning %q", kind, name, texts), func(ctx context.Context) (bool, error) {
		var list corev1.EventList
		if err := cluster.Client.List(ctx, &list, client.InNamespace(e.Namespace)); err != nil {
			return false, err
		}
		var seen, messages []string
		for _, ev := range list.Items {
			if ev.InvolvedObject.Kind == kind && ev.InvolvedObject.Name == name {
				seen = append(seen, fmt.Sprintf("%s %s: %s", ev.Type, ev.Reason, ev.Message))
				messages = append(messages, ev.Message)
			}
		}
		for _, text := range texts {
			if !slices.ContainsFunc(messages, func(m string) bool { return strings.Contains(m, text) }) {
				return false, fmt.Errorf("none mentions %q; its Events are %v", text, seen)
			}
		}
		t.Logf("Events on %s %s:\n  %s", kind, name, strings.Join(seen, "\n  "))
		return true, nil
	})
}

// connectionObjects are what clients hold on to: the Services, the
// certificates' Secrets and the connection ConfigMap, by kind/name, with
// their UIDs and resourceVersions.
func (e *etcdTest) connectionObjects(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	objs := map[string]client.Object{
		"Service/" + e.Name + "-client":       &corev1.Service{},
		"Service/" + e.Name + "-peer":         &corev1.Service{},
		"Secret/" + e.Name + "-ca":            &corev1.Secret{},
		"Secret/" + e.Name + "-server-tls":    &corev1.Secret{},
		"Secret/" + e.Name + "-peer-tls":      &corev1.Secret{},
		"Secret/" + e.Name + "-client-tls":    &corev1.Secret{},
		"ConfigMap/" + e.Name + "-connection": &corev1.ConfigMap{},
	}
	for key, obj := range objs {
		_, name, _ := strings.Cut(key, "/")
		if err := cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: e.Namespace, Name: name}, obj); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		out[key] = fmt.Sprintf("uid %s, resourceVersion %s", obj.GetUID(), obj.GetResourceVersion())
	}
	return out
}

// checkConnectionKept checks that the connection objects are the ones of
// before, unchanged.
func (e *etcdTest) checkConnectionKept(t *testing.T, before map[string]string) {
	t.Helper()
	now := e.connectionObjects(t)
	for _, key := range slices.Sorted(maps.Keys(before)) {
		if now[key] != before[key] {
			t.Errorf("%s is now %s, was %s: clients rely on it staying the same", key, now[key], before[key])
		}
	}
}

// startClientPod starts the application pod and waits until it is Ready.
// The etcd image has no shell, so its process is an etcd gateway on
// localhost that nothing uses: it only keeps the container running, for
// clientExec to run etcdctl in it, with the client certificate mounted
// from <name>-client-tls and the client Service's name, as applications
// do.
func (e *etcdTest) startClientPod(t *testing.T) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: clientPodName},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			AutomountServiceAccountToken:  ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](65532),
				RunAsGroup:     ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            "etcdctl",
				Image:           cluster.Settings.EtcdImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/usr/local/bin/etcd", "gateway", "start",
					"--endpoints=" + strings.TrimPrefix(e.serviceEndpoint(), "https://"), "--listen-addr=127.0.0.1:23790"},
				VolumeMounts: []corev1.VolumeMount{{Name: "client-tls", MountPath: clientTLSDir, ReadOnly: true}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
			Volumes: []corev1.Volume{{
				Name:         "client-tls",
				VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: e.Name + "-client-tls"}},
			}},
		},
	}
	mustCreate(t, pod)
	return cluster.WaitForPodReady(t, e.Namespace, pod.Name)
}

// clientExec runs etcdctl with args in the application pod, through the
// client Service, and returns its output.
func (e *etcdTest) clientExec(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := append([]string{
		"-n", e.Namespace, "exec", clientPodName, "-c", "etcdctl", "--",
		"/usr/local/bin/etcdctl", "--endpoints=" + e.serviceEndpoint(),
		"--cacert=" + clientTLSDir + "/ca.crt", "--cert=" + clientTLSDir + "/tls.crt", "--key=" + clientTLSDir + "/tls.key",
		"--dial-timeout=10s", "--command-timeout=30s",
	}, args...)
	return cluster.KubectlErr(cmd...)
}

// clientGet reads key with etcdctl in the application pod: its value, or
// "" when there is none.
func (e *etcdTest) clientGet(t *testing.T, key string) (string, error) {
	t.Helper()
	out, err := e.clientExec(t, "get", key, "--print-value-only")
	return strings.TrimRight(out, "\n"), err
}

// recoveryRecord is what a recoveryRecorder saw, each list in the order
// values first came.
type recoveryRecord struct {
	// restorePhases are the EtcdRestore's phases.
	restorePhases []string
	// phases are the EtcdCluster's; available, progressing and degraded
	// its conditions' reasons (Degraded's when True).
	phases, available, progressing, degraded []string
	// quorumLost is Available's first message with reason QuorumLost.
	quorumLost string
	// recoveries are status.recovery's kind, restore or survivor, and
	// phase; recoveryPhases its phases alone.
	recoveries, recoveryPhases []string
	// timeline is every change of the conditions and status.recovery, with
	// the time it was seen, for a failure's log.
	timeline []string
	last     string
}

// recoveryRecorder polls the EtcdCluster, and an EtcdRestore if named,
// every second.
type recoveryRecorder struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu  sync.Mutex
	rec recoveryRecord
}

// recordRecovery starts polling; it stops when the test ends, if not
// before. restore, when not empty, names the EtcdRestore to poll too.
func (e *etcdTest) recordRecovery(t *testing.T, restore string) *recoveryRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	r := &recoveryRecorder{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			getCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if ec, err := e.get(getCtx); err == nil {
				r.observeCluster(ec)
			}
			if restore != "" {
				er := &etcdv1alpha1.EtcdRestore{}
				if err := cluster.Client.Get(getCtx, client.ObjectKey{Namespace: e.Namespace, Name: restore}, er); err == nil && er.Status.Phase != "" {
					r.mu.Lock()
					r.rec.restorePhases = appendNew(r.rec.restorePhases, er.Status.Phase)
					r.mu.Unlock()
				}
			}
			cancel()
			sleepCtx(ctx, time.Second)
		}
	}()
	t.Cleanup(func() {
		if rec := r.stop(); t.Failed() {
			t.Logf("What the EtcdCluster's status went through:\n  %s", strings.Join(rec.timeline, "\n  "))
		}
	})
	return r
}

func (r *recoveryRecorder) observeCluster(ec *etcdv1alpha1.EtcdCluster) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := &r.rec
	st := ec.Status
	now := conditionsOf(ec) + "; no recovery"
	if st.Recovery != nil {
		now = conditionsOf(ec) + fmt.Sprintf("; recovery %+v", *st.Recovery)
	}
	if now != rec.last {
		rec.last = now
		if len(rec.timeline) < 100 {
			rec.timeline = append(rec.timeline, time.Now().UTC().Format("15:04:05")+" "+now)
		}
	}
	if st.Phase != "" {
		rec.phases = appendNew(rec.phases, st.Phase)
	}
	if c := meta.FindStatusCondition(st.Conditions, etcdv1alpha1.ConditionAvailable); c != nil {
		rec.available = appendNew(rec.available, c.Reason)
		if c.Reason == etcdv1alpha1.ReasonQuorumLost && rec.quorumLost == "" {
			rec.quorumLost = c.Message
		}
	}
	if c := meta.FindStatusCondition(st.Conditions, etcdv1alpha1.ConditionProgressing); c != nil {
		rec.progressing = appendNew(rec.progressing, c.Reason)
	}
	if c := meta.FindStatusCondition(st.Conditions, etcdv1alpha1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
		rec.degraded = appendNew(rec.degraded, c.Reason)
	}
	if v := st.Recovery; v != nil {
		switch v.Kind {
		case etcdv1alpha1.RecoveryFromBackup:
			rec.recoveries = appendNew(rec.recoveries, fmt.Sprintf("%s restore %s %s", v.Kind, v.Restore, v.Phase))
		default:
			rec.recoveries = appendNew(rec.recoveries, fmt.Sprintf("%s survivor %s %s", v.Kind, v.Survivor, v.Phase))
		}
		rec.recoveryPhases = appendNew(rec.recoveryPhases, v.Phase)
	}
}

// stop stops polling and returns what was seen.
func (r *recoveryRecorder) stop() recoveryRecord {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rec
}

// appendNew appends v to s unless s holds it.
func appendNew(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}
