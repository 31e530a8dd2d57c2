package etcdcluster

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// servingWorld is a formed, Available cluster of three healthy members
// that match the spec, whose pods run the current revision.
func servingWorld() *world {
	c := testCluster(nil)
	c.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}}
	w := &world{cluster: c, clock: t0, sts: &appsv1.StatefulSet{}, healthyQuorum: true, initJob: jobComplete,
		data: memberData{formed: t0.Add(-time.Hour), pods: map[string]*corev1.Pod{}}}
	for i := range 3 {
		m := marked(member(i, 0))
		m.Revision = 100
		w.members = append(w.members, m)
		w.roll.members = append(w.roll.members, on(m))
		w.data.pods[m.Name] = runningPod(m.Name)
	}
	return w
}

func runningPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
}

// The world changes that the table combines.
func beingDeleted(w *world) { w.deleting = true }
func noSts(w *world)        { w.sts = nil }
func recoveryUnderWay(w *world) {
	w.recovery = &etcdv1alpha1.RecoveryStatus{Kind: etcdv1alpha1.RecoveryFromBackup, Phase: etcdv1alpha1.RecoveryRestoring}
}
func recoveryFailed(w *world) {
	w.recovery = &etcdv1alpha1.RecoveryStatus{Kind: etcdv1alpha1.RecoveryFromBackup, Phase: etcdv1alpha1.RecoveryFailed}
}
func restoreRequested(confirm bool) func(*world) {
	return func(w *world) {
		w.pending = &queuedRestore{rs: &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Name: "back"},
			Spec: etcdv1alpha1.EtcdRestoreSpec{ConfirmOverwrite: confirm}}, src: &restoreSource{}}
	}
}
func sourceNotDone(w *world) {
	w.pending.src, w.pending.progress = nil, &restoreProgress{reason: etcdv1alpha1.ReasonWaitingForBackup, message: "Waiting for EtcdBackup b to be Complete"}
}
func sourceFailed(w *world) {
	w.pending.src, w.pending.progress = nil, &restoreProgress{reason: etcdv1alpha1.ReasonRestoreFailed, failed: true, message: "EtcdBackup b failed"}
}
func notAvailable(w *world) {
	w.cluster.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionAvailable, Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}}
}
func pausedSpec(w *world) { w.cluster.Spec.Paused = true }
func nobodyAnswers(w *world) {
	w.members, w.healthyQuorum, w.unreachable = nil, false, errors.New("context deadline exceeded")
}

// quorumLostToOne leaves member 0 alone, answering with its data, the
// others' pods gone, for an hour; with policy Auto the guard recovers from
// member 0.
func quorumLostToOne(w *world) {
	notAvailable(w)
	w.cluster.Spec.QuorumLoss.Policy = etcdv1alpha1.QuorumLossAuto
	w.healthyQuorum = false
	for i := range w.members {
		w.members[i].Healthy, w.members[i].Leader = false, 0
		if i > 0 {
			w.members[i].Answered = false
			delete(w.data.pods, w.members[i].Name)
		}
	}
	w.members[0].Revision = 90
}

// quorumLostManual is quorumLostToOne under policy Manual, without an
// approval: the guard only plans.
func quorumLostManual(w *world) {
	quorumLostToOne(w)
	w.cluster.Spec.QuorumLoss.Policy = etcdv1alpha1.QuorumLossManual
}
func scaleOut(w *world) { w.cluster.Spec.Replicas = ptr.To[int32](5) }

// memberLost: member 2 is unhealthy for longer than the replacement wait.
func memberLost(w *world) {
	w.members[2] = sick(2, t0.Add(-time.Hour))
	w.roll.members[2] = on(w.members[2])
}
func upgradeHeld(w *world) {
	w.upgrade = upgradeState{from: "v3.5.21", to: "v3.6.16", minor: true}
}
func outdated(w *world) {
	w.roll.outdated = true
	for i := range w.roll.members {
		w.roll.members[i] = off(w.members[i])
	}
}
func rolledUnchecked(w *world) {
	w.cluster.Status.Update = &etcdv1alpha1.UpdateStatus{Revision: "r2"}
}

// The storage's world changes: members half free past the threshold; a
// history with a revision older than the retention; a NOSPACE alarm (Auto,
// or Manual); a defragmentation round under way.
func fragmented(w *world) {
	w.maint.defrag = defragOf(w.cluster, w.clock)
	for i := range w.members {
		w.members[i].DBSize, w.members[i].DBSizeInUse = 400<<20, 100<<20
	}
}
func compactable(w *world) {
	w.maint.compaction = compactionOf(w.cluster)
	w.maint.current = 100
	w.maint.samples = []revisionSample{{at: t0.Add(-2 * time.Hour), rev: 50}, {at: t0, rev: 100}}
}
func noSpaceAlarm(w *world) {
	w.maint.alarm = true
	w.maint.compaction = compactionOf(w.cluster)
}
func noSpaceManual(w *world) {
	noSpaceAlarm(w)
	w.cluster.Spec.Maintenance.NoSpace = etcdv1alpha1.NoSpaceManual
}
func roundUnderWay(w *world) {
	w.maint.status.Defragmentation = &etcdv1alpha1.DefragmentationStatus{Cause: etcdv1alpha1.DefragmentationRequested,
		Phase: etcdv1alpha1.DefragmentationRunning, Members: []string{w.members[1].Name, w.members[2].Name, w.members[0].Name}}
}

func volumesToGrow(w *world) { w.maint.volumes.grow = []string{"data-main-0"} }

func memberToMove(w *world) {
	w.maint.migrating, w.maint.migration = true, migrationStep{kind: migrateMember, member: w.members[1]}
}

// TestNext is the precedence table, row by row, and the operations that
// could collide, pair by pair: the first row that applies wins, and the
// others wait for a later pass.
func TestNext(t *testing.T) {
	tests := []struct {
		name    string
		world   []func(*world)
		want    opKind
		verdict string // a piece of the pending restore's answer; "" for none
		quorum  bool   // the guard's plan is reported
		step    stepKind
	}{
		{name: "nothing to do", want: opNone},
		{name: "deletion", world: []func(*world){beingDeleted}, want: opDelete},
		{name: "delete during a recovery", world: []func(*world){recoveryUnderWay, beingDeleted}, want: opDelete},
		{name: "delete during a roll", world: []func(*world){outdated, beingDeleted}, want: opDelete},
		{name: "no StatefulSet yet", world: []func(*world){noSts}, want: opWait},
		{name: "a recovery under way", world: []func(*world){recoveryUnderWay}, want: opRecovery},
		{name: "a restore requested during a recovery waits for it", world: []func(*world){recoveryUnderWay, restoreRequested(true)}, want: opRecovery},
		{name: "quorum lost during a recovery", world: []func(*world){recoveryUnderWay, quorumLostToOne}, want: opRecovery},
		{name: "paused during a recovery: the recovery holds", world: []func(*world){recoveryUnderWay, pausedSpec}, want: opRecovery},
		{name: "a confirmed restore starts", world: []func(*world){restoreRequested(true)}, want: opStartRestore},
		{name: "a restore requested during a scale-out", world: []func(*world){scaleOut, restoreRequested(true)}, want: opStartRestore},
		{name: "a restore requested during a roll", world: []func(*world){outdated, restoreRequested(true)}, want: opStartRestore},
		{name: "a restore requested while the quorum is lost", world: []func(*world){quorumLostToOne, restoreRequested(true)}, want: opStartRestore},
		{name: "a restore without confirmation of an Available cluster is refused", world: []func(*world){restoreRequested(false)},
			want: opNone, verdict: "is Available"},
		{name: "a restore without confirmation of members that hold data is refused", world: []func(*world){notAvailable, restoreRequested(false)},
			want: opNone, verdict: "holds data: main-0 at revision"},
		{name: "a restore of a backup not done waits, and the scale-out goes on", world: []func(*world){scaleOut, restoreRequested(true), sourceNotDone},
			want: opMembership, verdict: "Waiting for EtcdBackup b"},
		{name: "a restore of a failed backup is refused", world: []func(*world){restoreRequested(true), sourceFailed}, want: opNone, verdict: "failed"},
		{name: "a restore of an emptyDir cluster is refused", world: []func(*world){restoreRequested(true), func(w *world) { w.cluster.Spec.Storage.Ephemeral = true }},
			want: opNone, verdict: "emptyDir"},
		{name: "a restore of a paused cluster waits", world: []func(*world){pausedSpec, restoreRequested(true)}, want: opWait, verdict: "is paused"},
		{name: "a failed recovery holds the members", world: []func(*world){recoveryFailed}, want: opFailedHold},
		{name: "a failed recovery holds them during a scale-out", world: []func(*world){recoveryFailed, scaleOut}, want: opFailedHold},
		{name: "a new restore ends a failed recovery's hold", world: []func(*world){recoveryFailed, restoreRequested(true)}, want: opStartRestore},
		{name: "paused", world: []func(*world){pausedSpec}, want: opWait},
		{name: "paused during a roll", world: []func(*world){outdated, pausedSpec}, want: opWait},
		{name: "nobody answers", world: []func(*world){nobodyAnswers}, want: opWait},
		{name: "nobody answers during a scale-out", world: []func(*world){scaleOut, nobodyAnswers}, want: opWait},
		{name: "quorum lost: the guard recovers", world: []func(*world){quorumLostToOne}, want: opQuorumLoss, quorum: true},
		{name: "quorum lost during an upgrade backup", world: []func(*world){upgradeHeld, quorumLostToOne}, want: opQuorumLoss, quorum: true},
		{name: "quorum lost during a roll", world: []func(*world){outdated, rolledUnchecked, quorumLostToOne}, want: opQuorumLoss, quorum: true},
		{name: "quorum lost during a scale-out", world: []func(*world){scaleOut, quorumLostToOne}, want: opQuorumLoss, quorum: true},
		{name: "quorum lost, Manual: the plan is reported, and nothing changes the members", world: []func(*world){quorumLostManual}, want: opNone, quorum: true},
		{name: "quorum lost, Manual, during a scale-out: no learner is added", world: []func(*world){quorumLostManual, scaleOut}, want: opMembership, quorum: true, step: stepWait},
		{name: "quorum lost before the cluster formed: no guard", world: []func(*world){quorumLostToOne, func(w *world) { w.data.formed = time.Time{} }}, want: opNone},
		{name: "a scale-out", world: []func(*world){scaleOut}, want: opMembership},
		{name: "a member lost during a roll is replaced first", world: []func(*world){outdated, rolledUnchecked, memberLost}, want: opMembership},
		{name: "a scale-out during an upgrade's backup comes first", world: []func(*world){upgradeHeld, scaleOut}, want: opMembership},
		{name: "a scale-out during a roll comes first", world: []func(*world){outdated, scaleOut}, want: opMembership},
		{name: "a minor upgrade waits for its backup", world: []func(*world){upgradeHeld}, want: opUpgradeBackup},
		{name: "a refused upgrade path holds too", world: []func(*world){upgradeHeld, func(w *world) { w.upgrade.pathErr = errors.New("skips a minor") }}, want: opUpgradeBackup},
		{name: "an upgrade's backup before its roll", world: []func(*world){upgradeHeld, outdated}, want: opUpgradeBackup},
		{name: "a roll", world: []func(*world){outdated}, want: opRoll},
		{name: "a roll under way", world: []func(*world){outdated, rolledUnchecked}, want: opRoll},
		{name: "every member rolled: the check", world: []func(*world){rolledUnchecked}, want: opCheck},
		{name: "NOSPACE: the recovery starts", world: []func(*world){noSpaceAlarm}, want: opNoSpace},
		{name: "NOSPACE before a roll", world: []func(*world){outdated, noSpaceAlarm}, want: opNoSpace},
		{name: "NOSPACE, Manual: reported, and the roll that raises the quota goes on", world: []func(*world){outdated, noSpaceManual}, want: opRoll},
		{name: "NOSPACE, Manual: reported, nothing else to do", world: []func(*world){noSpaceManual}, want: opNone},
		{name: "a member lost during NOSPACE is replaced first", world: []func(*world){noSpaceAlarm, memberLost}, want: opMembership},
		{name: "NOSPACE during a recovery waits for it", world: []func(*world){recoveryUnderWay, noSpaceAlarm}, want: opRecovery},
		{name: "NOSPACE while the quorum is lost: the guard first", world: []func(*world){noSpaceAlarm, quorumLostToOne}, want: opQuorumLoss, quorum: true},
		{name: "history older than the retention is compacted", world: []func(*world){compactable}, want: opCompact},
		{name: "a compaction waits for a backup's verification", world: []func(*world){compactable, func(w *world) { w.maint.backupInFlight = "b" }}, want: opNone},
		{name: "a compaction waits for the roll", world: []func(*world){outdated, compactable}, want: opRoll},
		{name: "a compaction waits for a scale-out", world: []func(*world){scaleOut, compactable}, want: opMembership},
		{name: "a compaction before a defragmentation", world: []func(*world){compactable, fragmented}, want: opCompact},
		{name: "a fragmented cluster is defragmented", world: []func(*world){fragmented}, want: opDefragment},
		{name: "a defragmentation never runs beside a roll", world: []func(*world){outdated, fragmented}, want: opRoll},
		{name: "a defragmentation never runs beside the roll's check", world: []func(*world){rolledUnchecked, fragmented}, want: opCheck},
		{name: "a round under way waits for a scale-out", world: []func(*world){roundUnderWay, scaleOut}, want: opMembership},
		{name: "a round under way ends before a roll starts", world: []func(*world){roundUnderWay, outdated}, want: opDefragment},
		{name: "a round under way ends before an upgrade's backup", world: []func(*world){roundUnderWay, upgradeHeld}, want: opDefragment},
		{name: "a compaction waits for an upgrade's backup", world: []func(*world){compactable, upgradeHeld}, want: opUpgradeBackup},
		{name: "a round under way waits for a recovery", world: []func(*world){roundUnderWay, recoveryUnderWay}, want: opRecovery},
		{name: "a round under way goes on", world: []func(*world){roundUnderWay}, want: opDefragment},
		{name: "a round under way goes on before a compaction", world: []func(*world){roundUnderWay, compactable}, want: opDefragment},
		{name: "a round starts only while every member is healthy", world: []func(*world){fragmented, func(w *world) {
			w.members[2].Healthy = false
		}}, want: opNone},
		{name: "volumes to grow", world: []func(*world){volumesToGrow}, want: opExpandVolumes},
		{name: "volumes grow after a defragmentation round", world: []func(*world){roundUnderWay, volumesToGrow}, want: opDefragment},
		{name: "volumes grow before a roll", world: []func(*world){outdated, volumesToGrow}, want: opExpandVolumes},
		{name: "a scale-out before volumes grow", world: []func(*world){scaleOut, volumesToGrow}, want: opMembership},
		{name: "a member moves onto a new claim", world: []func(*world){memberToMove}, want: opMigrateVolumes},
		{name: "a scale-out before a member moves", world: []func(*world){scaleOut, memberToMove}, want: opMembership},
		{name: "a recovery under way before a member moves", world: []func(*world){recoveryUnderWay, memberToMove}, want: opRecovery},
		{name: "a member lost during a migration is replaced first", world: []func(*world){memberLost, memberToMove}, want: opMembership},
		{name: "the quorum lost during a migration: the guard first", world: []func(*world){quorumLostToOne, memberToMove}, want: opQuorumLoss, quorum: true},
		{name: "NOSPACE before a member moves", world: []func(*world){noSpaceAlarm, memberToMove}, want: opNoSpace},
		{name: "volumes grow before a member moves", world: []func(*world){volumesToGrow, memberToMove}, want: opExpandVolumes},
		{name: "a defragmentation round ends before a member moves", world: []func(*world){roundUnderWay, memberToMove}, want: opDefragment},
		{name: "a roll ends before the next member moves", world: []func(*world){outdated, memberToMove}, want: opRoll},
		{name: "a kept volume is released during a roll", world: []func(*world){outdated, func(w *world) {
			w.maint.migrating, w.maint.migration = true, migrationStep{kind: migrateRelease}
		}}, want: opMigrateVolumes},
		{name: "a migration waits for its backup before an upgrade's", world: []func(*world){upgradeHeld, func(w *world) {
			w.maint.migrating, w.maint.migration = true, migrationStep{kind: migrateWait, message: "backup"}
		}}, want: opUpgradeBackup},
		{name: "a migration that is done chooses nothing", world: []func(*world){func(w *world) { w.maint.migrating = true }}, want: opNone},
		{name: "paused: no compaction, no defragmentation", world: []func(*world){compactable, fragmented, pausedSpec}, want: opWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := servingWorld()
			for _, change := range tt.world {
				change(w)
			}
			d := next(w)
			g.Expect(d.op).To(Equal(tt.want), "chose %s (%s)", d.op, d.why)
			if tt.verdict == "" {
				g.Expect(d.verdict).To(BeNil())
			} else {
				g.Expect(d.verdict).NotTo(BeNil())
				g.Expect(d.verdict.message).To(ContainSubstring(tt.verdict))
			}
			g.Expect(d.quorum != nil).To(Equal(tt.quorum), "the guard's plan")
			if tt.step != stepNone {
				g.Expect(d.step.kind).To(Equal(tt.step), "the membership step: %s", d.step.message)
			}
			if d.op == opWait {
				g.Expect(d.why).NotTo(BeEmpty())
			}
		})
	}
}

// TestPrecedenceNamesEveryOperation: each operation has a row of the
// table and a name, and the pass knows how to carry out each one.
func TestPrecedenceNamesEveryOperation(t *testing.T) {
	g := NewWithT(t)
	seen := map[opKind]bool{opNone: true}
	for _, r := range precedence {
		seen[r.op] = true
		g.Expect(r.when).NotTo(BeEmpty())
	}
	for k := opNone; k <= opCheck; k++ {
		g.Expect(seen[k]).To(BeTrue(), "no row chooses %s", k)
		g.Expect(k.String()).NotTo(BeEmpty())
		_, own := owning[k]
		_, serves := serving[k]
		g.Expect(own || serves || k == opNone || k == opWait || k == opDelete).To(BeTrue(), "nothing carries out %s", k)
	}
}
