//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// The storage upkeep of an EtcdCluster on the real node: compaction by
// Tend, a defragmentation by threshold that takes one member at a time
// under a writer, the recovery from NOSPACE, and the move of the members
// onto new volume claims.

// maintenanceTimeout bounds a compaction and a defragmentation round of
// three members on this node, passes of 30s apart included.
const maintenanceTimeout = 5 * time.Minute

// A 3-member cluster is filled with history, with compaction off; then
// set to keep its last 1000 revisions, Tend compacts past the history, its
// members pass the fragmentation threshold, and Tend defragments them one
// at a time, the leader last after one planned leadership move: the raft
// term rises by exactly one (no election), each database shrinks, every
// acknowledged write is read back and the members hash the key space
// alike. Compaction comes on only once 1000 more revisions follow the
// history, so that the first compaction frees all of it however fast the
// node writes (a compaction in the middle of the history, on a busy node,
// freed too little to pass the threshold, and the next was 5 minutes on).
func TestEtcdClusterDefragmentation(t *testing.T) {
	t.Parallel()
	e := newRollTest(t, "defrag", cluster.Settings.EtcdVersion, func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Maintenance.Compaction = &etcdv1alpha1.Compaction{Policy: etcdv1alpha1.CompactionDisabled}
		s.Maintenance.Defragmentation = &etcdv1alpha1.Defragmentation{MinimumSize: resource.NewQuantity(8<<20, resource.BinarySI)}
	})
	before := e.waitReady(t, 3)
	leader := before.Status.Leader
	w := e.startLiveWriter(t)
	cli := cluster.EtcdClient(t, e.clientTLS(t), e.hosts(t), e.serviceEndpoint())
	rev := fillHistory(t, cli, 4, 24<<20)
	for i := range 1000 {
		if _, err := put(t, cli, fmt.Sprintf("after/%d", i%10), "x"); err != nil {
			t.Fatalf("writing past the history: %v", err)
		}
	}
	termBefore := e.raftTerm(t)
	t.Logf("Wrote 24 MiB of history up to revision %d and 1000 revisions after it; leader %s, raft term %d", rev, leader, termBefore)
	e.patchSpec(t, func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Maintenance.Compaction = &etcdv1alpha1.Compaction{Revisions: ptr.To[int64](1000)}
	})

	var round *etcdv1alpha1.DefragmentationStatus
	cluster.WaitFor(t, maintenanceTimeout, "a compaction, then a defragmentation round of every member", func(ctx context.Context) (bool, error) {
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		m := ec.Status.Maintenance
		if m == nil || m.Compaction == nil || m.Compaction.Revision < rev {
			return false, fmt.Errorf("status.maintenance.compaction is %+v", m)
		}
		if round = m.Defragmentation; round == nil || round.Phase != etcdv1alpha1.DefragmentationCompleted {
			return false, fmt.Errorf("status.maintenance.defragmentation is %+v", round)
		}
		return true, nil
	})
	if round.Cause != etcdv1alpha1.DefragmentationThreshold {
		t.Errorf("the round's cause is %s, want Threshold", round.Cause)
	}
	if len(round.Results) != 3 || round.Members[2] != leader {
		t.Errorf("the round took %v (results %d), want the three members with the leader %s last", round.Members, len(round.Results), leader)
	}
	for _, r := range round.Results {
		t.Logf("Defragmented %s: %s -> %s in %s", r.Member, r.Before.String(), r.After.String(), r.Duration.Duration)
		if r.After.Value()*2 > r.Before.Value() {
			t.Errorf("member %s went from %s to %s, want less than half", r.Member, r.Before.String(), r.After.String())
		}
	}
	if termAfter := e.raftTerm(t); termAfter-termBefore != 1 {
		t.Errorf("the raft term rose by %d during the round, want exactly 1: the one MoveLeader, and no election", termAfter-termBefore)
	}
	e.waitEvents(t, "Compacted", "DefragmentationStarted", "Defragmented", "LeaderMoved", "DefragmentationCompleted")

	acked := e.stopWriter(t, w)
	e.checkAcked(t, acked)
	e.checkSameData(t)
}

// A 1-member cluster with a 16 MiB quota is filled until etcd raises
// NOSPACE. With spec.maintenance.noSpace Manual, Tend says what to do and
// disarms nothing; set to Auto, it defragments and disarms, and the
// cluster takes writes again with every key's latest value kept. (It
// compacts first, to the current revision as nothing is an hour old, only
// when the data in use is within a tenth of the quota: bbolt's free pages
// decide that, and they vary from run to run. envtest covers both ways.)
// Then a larger
// storage.size on local-path, which cannot expand volumes, cannot move a
// one-member cluster's only member: VolumeMigrationBlocked, and its claim
// is untouched.
func TestEtcdClusterNoSpace(t *testing.T) {
	t.Parallel()
	e := newRollTest(t, "full", cluster.Settings.EtcdVersion, func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Replicas = ptr.To[int32](1)
		s.Options.QuotaBackendBytes = resource.NewQuantity(16<<20, resource.BinarySI)
		s.Maintenance.NoSpace = etcdv1alpha1.NoSpaceManual
	})
	e.waitReady(t, 1)
	cli := cluster.EtcdClient(t, e.clientTLS(t), e.hosts(t), e.serviceEndpoint())
	latest, refused := fillUntilNoSpace(t, cli)
	t.Logf("etcd raised NOSPACE after %d keys were written", len(latest))

	e.waitDegraded(t, etcdv1alpha1.ReasonAlarm, "spec.maintenance.noSpace is Manual")
	if _, err := put(t, cli, "refused", "x"); !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("a write while Manual waits: %v, want NOSPACE", err)
	}

	e.patchSpec(t, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Maintenance.NoSpace = etcdv1alpha1.NoSpaceAuto })
	start := time.Now()
	cluster.WaitFor(t, maintenanceTimeout, "the NOSPACE recovery", func(ctx context.Context) (bool, error) {
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		if m := ec.Status.Maintenance; m == nil || m.NoSpace != nil {
			return false, fmt.Errorf("status.maintenance is %+v", m)
		}
		if d := meta.FindStatusCondition(ec.Status.Conditions, etcdv1alpha1.ConditionDegraded); d == nil || d.Status != metav1.ConditionFalse {
			return false, fmt.Errorf("Degraded is %+v", d)
		}
		_, err = put(t, cli, "after", "recovered")
		return err == nil, err
	})
	t.Logf("Writes accepted %s after noSpace was set to Auto", time.Since(start).Round(time.Second))
	e.waitEvents(t, etcdv1alpha1.ReasonNoSpace, "Defragmented", "NoSpaceCleared")
	for key, value := range latest {
		ctx, cancel := context.WithTimeout(t.Context(), etcdCallTimeout)
		resp, err := cli.Get(ctx, key)
		cancel()
		if err != nil || len(resp.Kvs) != 1 {
			t.Errorf("key %s after the recovery: %v, want its last value", key, err)
			continue
		}
		if got := string(resp.Kvs[0].Value); got != value && (key != refused.key || got != refused.value) {
			t.Errorf("key %s after the recovery holds the value of write %.6s, want its last acknowledged one (%.6s) or the one refused with NOSPACE (%.6s of %s)",
				key, got, value, refused.value, refused.key)
		}
	}

	_, before := e.podAndClaim(t, e.Name+"-0")
	e.patchSpec(t, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.Size = ptr.To(resource.MustParse("2Gi")) })
	e.waitDegraded(t, etcdv1alpha1.ReasonVolumeMigrationBlocked, "A one-member cluster cannot move")
	_, pvc := e.podAndClaim(t, e.Name+"-0")
	if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("1Gi")) != 0 || pvc.UID != before.UID {
		t.Errorf("claim %s asks for %s after a size the class cannot give to a one-member cluster, want the same claim untouched at 1Gi", pvc.Name, got.String())
	}
}

// fillHistory writes size bytes, rounds times over the same keys, and
// returns the revision of the last write: all but the last round are
// history that a compaction frees.
func fillHistory(t *testing.T, cli *clientv3.Client, rounds, size int) int64 {
	t.Helper()
	value := strings.Repeat("h", 16<<10)
	keys := size / rounds / len(value)
	var rev int64
	for r := range rounds {
		for k := range keys {
			resp, err := put(t, cli, fmt.Sprintf("history/%04d", k), value[r:])
			if err != nil {
				t.Fatalf("filling the history: %v", err)
			}
			rev = resp.Header.Revision
		}
	}
	return rev
}

// kv is one write.
type kv struct{ key, value string }

// fillUntilNoSpace overwrites a few keys until etcd refuses with NOSPACE,
// and returns each key's last acknowledged value, and the write refused.
// That write may be stored all the same: etcd checks the quota again as it
// applies a write that passed the check before raft, and it stores one
// that went over and answers NOSPACE (quotaApplierV3).
func fillUntilNoSpace(t *testing.T, cli *clientv3.Client) (map[string]string, kv) {
	t.Helper()
	latest := map[string]string{}
	for i := 0; ; i++ {
		if i == 2000 {
			t.Fatal("2000 writes of 64 KiB and no NOSPACE")
		}
		key, value := fmt.Sprintf("full/%d", i%8), fmt.Sprintf("%06d", i)+strings.Repeat("f", 64<<10)
		_, err := put(t, cli, key, value)
		if errors.Is(err, rpctypes.ErrNoSpace) {
			return latest, kv{key, value}
		}
		if err != nil {
			t.Fatalf("filling: %v", err)
		}
		latest[key] = value
	}
}

// put writes key through cli within the call timeout.
func put(t *testing.T, cli *clientv3.Client, key, value string) (*clientv3.PutResponse, error) {
	ctx, cancel := context.WithTimeout(t.Context(), etcdCallTimeout)
	defer cancel()
	return cli.Put(ctx, key, value)
}

// waitDegraded waits until Degraded is True with reason, its message
// containing text.
func (e *etcdTest) waitDegraded(t *testing.T, reason, text string) {
	t.Helper()
	cluster.WaitFor(t, 2*time.Minute, fmt.Sprintf("Degraded %s saying %q", reason, text), func(ctx context.Context) (bool, error) {
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		d := meta.FindStatusCondition(ec.Status.Conditions, etcdv1alpha1.ConditionDegraded)
		if d == nil || d.Status != metav1.ConditionTrue || d.Reason != reason || !strings.Contains(d.Message, text) {
			return false, fmt.Errorf("Degraded is %+v", d)
		}
		return true, nil
	})
}

// A 3-member cluster on local-path, which cannot expand volumes, under a
// writer: a larger storage.size moves every member onto a larger claim,
// then a new storageClassName moves them onto claims of local-path-b. Each
// move takes a verified backup first, remakes the StatefulSet with the new
// claim template, then moves one member at a time, the leader last after
// one leadership move; each old volume is kept until its member is a
// healthy voter again, then deleted by its provisioner. No acknowledged
// write is lost and the members hash alike.
func TestEtcdClusterVolumeMigration(t *testing.T) {
	t.Parallel()
	// A quota of its own: one that follows the size would roll the
	// members before they move.
	e := newRollTest(t, "move", cluster.Settings.EtcdVersion, func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Options.QuotaBackendBytes = resource.NewQuantity(512<<20, resource.BinarySI)
	})
	e.waitReady(t, 3)
	w := e.startLiveWriter(t)

	e.migrate(t, "a larger size", "local-path", "2Gi", func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Storage.Size = ptr.To(resource.MustParse("2Gi"))
	})
	e.migrate(t, "another class", "local-path-b", "2Gi", func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Storage.StorageClassName = ptr.To("local-path-b")
	})

	acked := e.stopWriter(t, w)
	e.checkAcked(t, acked)
	e.checkSameData(t)
	e.waitReady(t, 3)
}

// migrate changes the spec with mutate and checks that every member moves
// onto a new claim of class and size, the leader last, and that the old
// volumes are deleted.
func (e *etcdTest) migrate(t *testing.T, what, class, size string, mutate func(*etcdv1alpha1.EtcdClusterSpec)) {
	t.Helper()
	oldClaims := map[string]*corev1.PersistentVolumeClaim{}
	for i := range 3 {
		member := fmt.Sprintf("%s-%d", e.Name, i)
		_, oldClaims[member] = e.podAndClaim(t, member)
	}
	movesBefore, movedBefore := len(e.migrationLeaderMoves(t)), len(e.eventMessages(t, "MovingMember"))
	start := time.Now()
	e.patchSpec(t, mutate)
	var mig *etcdv1alpha1.VolumeMigrationStatus
	phases := map[string]bool{}
	cluster.WaitFor(t, 2*maintenanceTimeout, "every member on a claim of "+class+" and "+size, func(ctx context.Context) (bool, error) {
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		// This migration's status: started after the change (a time in
		// whole seconds), not the last one's.
		if m := ec.Status.Maintenance; m != nil && m.VolumeMigration != nil && m.VolumeMigration.StartedAt != nil &&
			!m.VolumeMigration.StartedAt.Time.Before(start.Truncate(time.Second)) {
			mig = m.VolumeMigration
			phases[mig.Phase] = true
		}
		if mig == nil || mig.Phase != etcdv1alpha1.MigrationCompleted {
			return false, fmt.Errorf("status.maintenance.volumeMigration is %+v", mig)
		}
		return true, nil
	})
	t.Logf("%s: moved 3 members in %s (phases seen: %v)", what, time.Since(start).Round(time.Second), slices.Sorted(maps.Keys(phases)))
	if mig.Backup == "" || mig.StartedAt == nil || mig.CompletedAt == nil || len(mig.Remaining) != 0 {
		t.Errorf("the completed migration says %+v", mig)
	}
	b := &etcdv1alpha1.EtcdBackup{}
	if err := cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: e.Namespace, Name: mig.Backup}, b); err != nil {
		t.Fatalf("the migration's backup: %v", err)
	}
	if !meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.BackupVerified) {
		t.Errorf("backup %s is not Verified: %+v", b.Name, b.Status.Conditions)
	}
	for member, old := range oldClaims {
		_, pvc := e.podAndClaim(t, member)
		if pvc.UID == old.UID || ptr.Deref(pvc.Spec.StorageClassName, "") != class ||
			pvc.Spec.Resources.Requests.Storage().Cmp(resource.MustParse(size)) != 0 {
			t.Errorf("%s: %s stands on claim %s (uid %s, class %v, %s), want a new claim of %s and %s",
				what, member, pvc.Name, pvc.UID, ptr.Deref(pvc.Spec.StorageClassName, ""), pvc.Spec.Resources.Requests.Storage(), class, size)
		}
		// Released to its Delete policy once the member is a healthy
		// voter: the provisioner deletes it.
		cluster.WaitFor(t, 2*time.Minute, "volume "+old.Spec.VolumeName+" of the old claim deleted", func(ctx context.Context) (bool, error) {
			pv := &corev1.PersistentVolume{}
			err := cluster.Client.Get(ctx, client.ObjectKey{Name: old.Spec.VolumeName}, pv)
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			return false, fmt.Errorf("volume %s is %s with reclaim policy %s", pv.Name, pv.Status.Phase, pv.Spec.PersistentVolumeReclaimPolicy)
		})
	}
	e.waitEvents(t, "MigrationBackup", "RemakingStatefulSet", "StatefulSetRemade", "MovingMember", "VolumeReleased", "LeaderMoved")
	// The leader moved last, after one planned leadership move.
	moves, moved := e.migrationLeaderMoves(t)[movesBefore:], e.eventMessages(t, "MovingMember")[movedBefore:]
	if len(moves) != 1 || len(moved) != 3 {
		t.Fatalf("%s: %d leadership moves and %d members moved (%q), want 1 and 3", what, len(moves), len(moved), moved)
	}
	leader := strings.Fields(strings.TrimPrefix(moves[0], "Moved the leadership from "))[0]
	if !strings.Contains(moved[2], "Removed member "+leader+" ") {
		t.Errorf("%s: members moved in the order %q, want the leader %s last", what, moved, leader)
	}
}

// migrationLeaderMoves returns the messages of the leadership moves made
// before a member moved onto a new claim (a roll moves the leader too).
func (e *etcdTest) migrationLeaderMoves(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, m := range e.eventMessages(t, "LeaderMoved") {
		if strings.Contains(m, "onto a new volume claim") {
			out = append(out, m)
		}
	}
	return out
}

// eventMessages returns the messages of the cluster's Events of reason, in
// the order they were made.
func (e *etcdTest) eventMessages(t *testing.T, reason string) []string {
	t.Helper()
	evs, err := framework.EventsOf(t.Context(), cluster.Client, e.Namespace, "EtcdCluster", e.Name, reason)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Message)
	}
	return out
}
