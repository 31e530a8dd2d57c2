package etcdcluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// opKind is the one operation a pass carries out on the members.
type opKind int

const (
	opNone           opKind = iota // the members match the spec
	opWait                         // nothing may be done now; decision.why says why
	opDelete                       // op_delete.go
	opRecovery                     // op_recovery.go: an in-place restore or quorum-loss recovery under way
	opStartRestore                 // op_restore.go: a pending EtcdRestore starts
	opFailedHold                   // op_recovery.go: a failed recovery holds the members stopped, or is retried
	opQuorumLoss                   // op_quorum_loss.go: a recovery starts, as the guard allows
	opMembership                   // op_membership.go: replace, add a learner, promote, move the leader, remove
	opUpgradeBackup                // op_upgrade_backup.go: a minor upgrade waits for its backup (or its path is refused)
	opRoll                         // op_roll.go: restart one outdated member, or move the leader first
	opCheck                        // op_check.go: every member runs the revision; the check Job ends the roll
	opNoSpace                      // op_no_space.go: etcd raised NOSPACE; compact, defragment, disarm
	opCompact                      // op_compact.go: drop the history older than the retention
	opDefragment                   // op_defragment.go: one step of a defragmentation round
	opExpandVolumes                // op_expand_volumes.go: member claims ask for spec.storage.size
	opMigrateVolumes               // op_migrate_volumes.go: members move onto claims of the spec's class and size
)

var opNames = [...]string{"None", "Wait", "Delete", "Recovery", "StartRestore", "FailedHold", "QuorumLoss", "Membership", "UpgradeBackup", "Roll", "Check", "NoSpace", "Compact", "Defragment", "ExpandVolumes", "MigrateVolumes"}

func (k opKind) String() string { return opNames[k] }

// decision is next's choice: one operation, with what it was chosen on.
type decision struct {
	op opKind
	// why says why a pass waits (opWait).
	why string
	// step is the membership change (opMembership); roll the roll's
	// action (opRoll); quorum the guard's plan while the quorum is lost,
	// whatever was chosen.
	step   step
	roll   rollAction
	quorum *recoveryPlan
	// verdict answers a pending EtcdRestore that does not start this
	// pass: it waits, or is refused. It is written whatever was chosen.
	verdict *restoreVerdict
	// noSpace is the NOSPACE recovery's step, reported whatever was
	// chosen (a recovery that waits for a person lets a roll that raises
	// the quota go on); compact the revision to compact to; defrag the
	// defragmentation's step.
	noSpace noSpaceStep
	compact int64
	defrag  defragStep
	// migration is the volume migration's step.
	migration migrationStep
}

// restoreVerdict is what a pending EtcdRestore is told when it does not
// start: it waits (pending), or it is refused (reason set).
type restoreVerdict struct {
	reason, message string
	// retry: look again at the steady interval (a backup being taken).
	retry bool
}

// rule is one row of the precedence table: the operation it chooses, and
// whether it applies to the world (it may fill in the decision).
type rule struct {
	op    opKind
	when  string
	apply func(w *world, d *decision) bool
}

// precedence is the order in which operations take the members: the first
// row that applies is the pass's operation. One operation at a time: a
// row never runs beside another.
var precedence = []rule{
	{opDelete, "the cluster is being deleted", func(w *world, _ *decision) bool { return w.deleting }},
	{opWait, "no StatefulSet to act on yet", noStatefulSet},
	{opRecovery, "a restore or recovery is under way", func(w *world, _ *decision) bool { return recovering(w.recovery) }},
	{opStartRestore, "an EtcdRestore is pending and may start", restoreMayStart},
	{opFailedHold, "the last recovery failed", func(w *world, _ *decision) bool { return failed(w.recovery) }},
	{opWait, "no member answered", unreachable},
	{opWait, "spec.paused", paused},
	{opQuorumLoss, "the quorum is lost and the guard allows a recovery", quorumLost},
	{opMembership, "the membership differs from the spec", membershipStep},
	{opNoSpace, "etcd raised NOSPACE, or its recovery ends", noSpaceDue},
	{opCompact, "the history older than the retention may go", compactDue},
	{opDefragment, "a defragmentation round runs, or one is due", defragDue},
	{opExpandVolumes, "a member's volume claim asks for less than spec.storage.size, and its class can grow", volumesDue},
	{opMigrateVolumes, "a member's volume claim is of another class, or smaller and its class cannot grow; or a kept volume awaits release", migrationDue},
	{opUpgradeBackup, "a minor upgrade waits for its path check or backup", func(w *world, _ *decision) bool { return w.upgrade.hold() }},
	{opRoll, "a member runs another revision", rollStep},
	{opCheck, "every member runs the revision; the roll is not checked", rollChecked},
}

// next chooses the pass's one operation from the world: the first row of
// precedence that applies, or opNone.
func next(w *world) decision {
	d := decision{}
	for _, r := range precedence {
		if r.apply(w, &d) {
			d.op = r.op
			if r.op == opWait && d.why == "" {
				d.why = r.when
			}
			return d
		}
	}
	return d
}

func noStatefulSet(w *world, _ *decision) bool { return w.sts == nil }

func failed(rec *etcdv1alpha1.RecoveryStatus) bool {
	return rec != nil && rec.Phase == etcdv1alpha1.RecoveryFailed
}

func paused(w *world, d *decision) bool {
	if w.cluster.Spec.Paused {
		d.why = "spec.paused is true"
	}
	return w.cluster.Spec.Paused
}

func unreachable(w *world, d *decision) bool {
	if w.members == nil {
		d.why = fmt.Sprintf("no member answered: %v", w.unreachable)
	}
	return w.members == nil
}

// restoreMayStart tells whether the pending EtcdRestore starts now. One
// that may not is given its verdict (waits, or refused) in d, and the
// choice goes on down the table.
func restoreMayStart(w *world, d *decision) bool {
	p := w.pending
	if p == nil {
		return false
	}
	c, rs := w.cluster, p.rs
	holding := w.membersWithData()
	refuse := func(reason, msg string) bool {
		d.verdict = &restoreVerdict{reason: reason, message: msg}
		return false
	}
	switch {
	case c.Spec.Paused:
		d.verdict = &restoreVerdict{message: fmt.Sprintf("EtcdCluster %s is paused (spec.paused); the restore starts when it is not", c.Name)}
		return false
	case c.Spec.Storage.Ephemeral:
		return refuse(etcdv1alpha1.ReasonRestoreFailed, fmt.Sprintf("EtcdCluster %s keeps its data in emptyDir volumes (spec.storage.ephemeral), which a restore cannot fill; restore into a new EtcdCluster with persistent storage", c.Name))
	case apimeta.IsStatusConditionTrue(c.Status.Conditions, etcdv1alpha1.ConditionAvailable) && !rs.Spec.ConfirmOverwrite:
		return refuse(etcdv1alpha1.ReasonClusterAvailable, fmt.Sprintf(
			"EtcdCluster %s is Available: restoring would replace its data, and every write since the backup would be lost. Nothing was touched. To go ahead, create a new EtcdRestore with spec.confirmOverwrite: true", c.Name))
	case !rs.Spec.ConfirmOverwrite && len(holding) > 0:
		// The condition is what an earlier pass saw: Unknown, or a passing
		// Unreachable, says nothing of the data. The members say.
		return refuse(etcdv1alpha1.ReasonClusterAvailable, fmt.Sprintf(
			"EtcdCluster %s holds data: %s answered. Restoring would replace it, and every write since the backup would be lost. Nothing was touched. To go ahead, create a new EtcdRestore with spec.confirmOverwrite: true",
			c.Name, strings.Join(holding, ", ")))
	case p.progress != nil && p.progress.failed:
		return refuse(etcdv1alpha1.ReasonRestoreFailed, p.progress.message)
	case p.progress != nil:
		d.verdict = &restoreVerdict{message: p.progress.message, retry: true}
		return false
	}
	return true
}

// quorumLost runs the guard while a formed cluster has no healthy quorum:
// its plan goes into the status whatever is chosen, and a recovery starts
// only when the guard allows one.
func quorumLost(w *world, d *decision) bool {
	if w.healthyQuorum || !w.formed() {
		return false
	}
	plan := planRecovery(quorumInput(w))
	d.quorum = &plan
	return plan.decision == recoverFromMember || plan.decision == recoverFromBackup
}

// quorumInput is what the guard decides a quorum loss on.
func quorumInput(w *world) recoveryInput {
	c := w.cluster
	policy, after := quorumLossOf(c)
	in := recoveryInput{voters: votersOf(w.cluster, w.members, w.data), lostSince: w.now(), now: w.now(), policy: policy, after: after,
		approval: c.Annotations[etcdv1alpha1.AnnotationRecoverFrom], backup: w.backup, namespace: c.Namespace, name: c.Name}
	if cond := apimeta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAvailable); cond != nil && cond.Status != metav1.ConditionTrue {
		in.lostSince = cond.LastTransitionTime.Time
	}
	return in
}

func membershipStep(w *world, d *decision) bool {
	d.step = planMembers(w.cluster, w.members, w.now())
	return d.step.kind != stepNone
}

// rolling tells whether a roll is due or under way.
func rolling(w *world) bool {
	return w.roll.outdated || w.cluster.Status.Update != nil || w.upgrade.minor
}

func rollStep(w *world, d *decision) bool {
	if !rolling(w) {
		return false
	}
	d.roll = planRoll(rollInputOf(w))
	return d.roll.kind != rollDone
}

func rollChecked(w *world, _ *decision) bool { return rolling(w) }

// rollInputOf is what planRoll decides the roll's next step on.
func rollInputOf(w *world) rollInput {
	c := w.cluster
	in := rollInput{members: w.roll.members, timeout: memberTimeout(c), now: w.now()}
	if u := c.Status.Update; u != nil {
		in.inHand, in.inHandSince = u.Member, timeOf(u.MemberSince)
	}
	return in
}

// now is the pass's clock reading.
func (w *world) now() time.Time { return w.clock }

// operation carries out one choice of next; each lives in its own file
// (op_*.go) and picks up from what is stored on objects, so that a pass
// cut short anywhere is resumed by the next.
type operation func(r *Reconciler, ctx context.Context, s *scope, w *world, d decision) error
