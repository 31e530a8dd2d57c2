//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// retainedForLabel marks the volume of a member's old claim while the
// member moves (the EtcdCluster contract, spelled out).
const retainedForLabel = "etcd.tend.dev/retained-for"

// The manager is killed at a random point of volume migrations of a
// 3-member EtcdCluster under a writer, back and forth between the classes
// local-path-b and local-path. After each kill the migration completes
// with every member on a claim of the target class. The cluster's Events
// show that no member moved while another was out of the voters (a move
// only after the one before was promoted) and none moved twice: those are
// the row's duplicates. No volume is left over: no PersistentVolume kept
// for the cluster, no claim of no member. At the end every acknowledged
// write reads back and the members hash alike.
func TestEtcdMigrationManagerKills(t *testing.T) {
	t.Parallel() // beside another etcd scenario, once the others ran (doc.go)
	r := scenario(t, "EtcdCluster volume migration, manager SIGKILL")
	ctx := t.Context()
	const n = 3
	e := newEtcdWith(t, cluster.Namespace(t), n, nil)
	q := watchQuorum(e, e.clientTLS(t))
	defer q.stop()
	w := startWriter(t, e.client(t))

	r.Duplicates, r.Orphans = 0, 0
	for i := range scaled() {
		class := []string{"local-path-b", "local-path"}[i%2]
		since := time.Now()
		if err := e.patchSpec(ctx, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.StorageClassName = ptr.To(class) }); err != nil {
			t.Fatal(err)
		}
		// A migration of three members takes about two and a half
		// minutes, its backup first; the kill falls anywhere in the first 90s.
		delay := time.Duration(random(t).Int64N(int64(90 * time.Second)))
		time.Sleep(delay)
		k := r.killManager(t, fmt.Sprintf("migration %d to %s (kill %s in)", i+1, class, delay.Round(time.Millisecond)))
		took := e.waitMigrated(t, class)
		e.waitReady(t, n)
		overlaps := e.moveOverlaps(t, since)
		r.Duplicates = max(r.Duplicates, len(overlaps))
		if len(overlaps) > 0 {
			t.Errorf("migration %d: %v", i+1, overlaps)
		}
		kept := e.keptVolumes(t)
		e.checkOrphanClaims(t, r, n)
		r.Orphans = max(r.Orphans, 0) + len(kept)
		if len(kept) > 0 {
			t.Errorf("migration %d: volumes still kept for the cluster: %v", i+1, kept)
		}
		waitWrites(t, w, 20)
		r.Runs++
		t.Logf("Migration %d to %s: manager %s killed %s in, a new one led after %.1fs; done in %s; no overlap; %d writes acknowledged so far",
			i+1, class, k.Pod, delay.Round(time.Millisecond), k.Takeover.Seconds(), took.Round(time.Second), w.Acked())
	}
	e.checkWrites(t, r, w, q)
}

// waitMigrated waits until the cluster's volume migration to class
// completes with every member's claim of that class, and returns how long
// the migration took by its status.
func (e *etcdHandle) waitMigrated(t *testing.T, class string) time.Duration {
	t.Helper()
	var took time.Duration
	cluster.WaitFor(t, 10*time.Minute, "every member on a claim of "+class, func(ctx context.Context) (bool, error) {
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		var mig *etcdv1alpha1.VolumeMigrationStatus
		if m := ec.Status.Maintenance; m != nil {
			mig = m.VolumeMigration
		}
		if mig == nil || mig.StorageClassName != class || mig.Phase != etcdv1alpha1.MigrationCompleted {
			return false, fmt.Errorf("status.maintenance.volumeMigration is %+v", mig)
		}
		var claims corev1.PersistentVolumeClaimList
		if err := cluster.Client.List(ctx, &claims, client.InNamespace(e.Namespace), client.MatchingLabels{"etcd.tend.dev/cluster": e.Name}); err != nil {
			return false, err
		}
		for _, c := range claims.Items {
			if strings.HasPrefix(c.Name, "data-") && ptr.Deref(c.Spec.StorageClassName, "") != class {
				return false, fmt.Errorf("claim %s is of class %s", c.Name, ptr.Deref(c.Spec.StorageClassName, ""))
			}
		}
		took = mig.CompletedAt.Sub(mig.StartedAt.Time)
		return true, nil
	})
	return took
}

// moveOverlaps reads the cluster's Events since a time and returns what
// breaks "one member at a time": a member moved (MovingMember) before the
// one moved before it was promoted again (MemberPromoted), or a member
// moved twice.
func (e *etcdHandle) moveOverlaps(t *testing.T, since time.Time) []string {
	t.Helper()
	evs, err := framework.EventsOf(t.Context(), cluster.Client, e.Namespace, "EtcdCluster", e.Name, "MovingMember", "MemberPromoted")
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	moved, out := map[string]bool{}, ""
	for _, ev := range evs {
		if ev.EventTime.Time.Before(since) {
			continue
		}
		member := strings.Fields(strings.TrimPrefix(strings.TrimPrefix(ev.Message, "Removed member "), "Promoted learner "))[0]
		switch ev.Reason {
		case "MovingMember":
			if out != "" {
				problems = append(problems, fmt.Sprintf("%s moved at %s while %s was not promoted yet", member, ev.EventTime.Format(time.StampMilli), out))
			}
			if moved[member] {
				problems = append(problems, member+" moved twice")
			}
			moved[member], out = true, member
		case "MemberPromoted":
			if member == out {
				out = ""
			}
		}
	}
	return problems
}

// keptVolumes lists the PersistentVolumes still kept for the cluster.
func (e *etcdHandle) keptVolumes(t *testing.T) []string {
	t.Helper()
	ec, err := e.get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	// A release takes a pass once the last member is a voter: give it one.
	cluster.WaitFor(t, time.Minute, "no volume kept for the cluster", func(ctx context.Context) (bool, error) {
		var pvs corev1.PersistentVolumeList
		if err := cluster.Client.List(ctx, &pvs, client.MatchingLabels{retainedForLabel: string(ec.UID)}); err != nil {
			return false, err
		}
		kept = kept[:0]
		for _, pv := range pvs.Items {
			kept = append(kept, pv.Name)
		}
		return len(kept) == 0, nil
	})
	return kept
}
