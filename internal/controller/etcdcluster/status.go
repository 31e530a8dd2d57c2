package etcdcluster

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	klabels "k8s.io/apimachinery/pkg/labels"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcd"
)

// observation is what a pass saw and did: the input of the status.
type observation struct {
	// creating is set by the pass that created the StatefulSet.
	creating bool
	// tlsProblem says what is wrong with Provided TLS Secrets.
	tlsProblem string
	// certificates are the TLS Secrets' expiries; nil when not read.
	certificates []etcdv1alpha1.CertificateStatus
	// unreachable is why no member answered; members is nil then.
	unreachable error
	members     []memberView
	// healthyQuorum: a quorum of the voting members is healthy.
	healthyQuorum bool
	job           jobState
	jobMessage    string
	// jobCreated is when the init Job was made: the cluster had formed.
	jobCreated time.Time
	// step is the membership change the pass made or waits to make.
	step step
	// deletion is what a deleted cluster waits for; finalSnapshot its
	// final EtcdBackup, once it exists.
	deletion      *deletion
	finalSnapshot string
	// staleVolumes are volume claims of an older cluster of the same name
	// that a new cluster would start on.
	staleVolumes []string
	// restore is how far a restore from a backup got.
	restore *restoreProgress
	// roll is what the roll phase saw and did; nil when it did not run.
	roll *rollObservation
	// startProblems say why member pods do not run (startup.go).
	startProblems []string
	// recovery is an in-place restore or quorum-loss recovery the pass
	// ran or held; quorum is the guard's plan while the quorum is lost.
	recovery *recoveryObservation
	quorum   *recoveryPlan
	// passError is why the pass failed, if it did: what it saw may be
	// incomplete, and the status must not say all is well.
	passError error
	// maintenance is the storage upkeep as the pass left it; volumes the
	// growth of the member claims; nil when the pass did not look.
	maintenance *etcdv1alpha1.MaintenanceStatus
	volumes     *volumeStep
	// archive is the continuous archive as the pass left it; nil when the
	// pass did not look.
	archive *archiveObservation
}

// calculateStatus computes c's status from what a pass observed. It starts
// from the current status, so that conditions keep their transition times
// and members not seen this pass keep their last known details; the caller
// sets observedGeneration.
func calculateStatus(c *etcdv1alpha1.EtcdCluster, obs observation, now time.Time) etcdv1alpha1.EtcdClusterStatus {
	st := *c.Status.DeepCopy()
	st.ClientEndpoint = clientEndpoint(c)
	st.Selector = klabels.SelectorFromSet(selector(c)).String()
	if obs.certificates != nil {
		st.Certificates = obs.certificates
	}

	switch {
	case obs.tlsProblem != "":
		// Tend could not look: what was known stays as it was.
	case obs.members != nil:
		st.Members = membersStatus(obs.members)
		st.Replicas = int32(len(obs.members))
		st.Leader, st.CurrentVersion = "", lowestVersion(obs.members)
		for _, m := range obs.members {
			if m.IsLeader() {
				st.Leader = m.Name
			}
		}
	default:
		// Nobody answered: what was known stays, but nothing is healthy.
		for i := range st.Members {
			m := &st.Members[i]
			m.Leader = false
			if m.Healthy || m.UnhealthySince == nil {
				m.UnhealthySince = &metav1.Time{Time: now}
			}
			m.Healthy = false
		}
		st.Leader = ""
	}
	st.ReadyMembers = 0
	for _, m := range st.Members {
		if m.Healthy && !m.Learner {
			st.ReadyMembers++
		}
	}

	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: c.Generation,
		})
	}
	if r := obs.roll; r != nil {
		st.Update = r.update
		if r.finished {
			st.UpdatedGeneration = c.Generation
		}
	}
	if st.Update != nil {
		// The version moves once the roll is checked, not member by member.
		st.CurrentVersion = st.Update.From
	}
	if rec := obs.recovery; rec != nil {
		st.Recovery = rec.status
		if rec.restoredFrom != nil {
			st.RestoredFrom = rec.restoredFrom
		}
	}
	if obs.maintenance != nil {
		st.Maintenance = maintenanceStatus(c, obs.maintenance)
	}
	setAvailable(c, obs, &st, set)
	setProgressing(c, obs, set)
	setDegraded(c, obs, set)
	setRestored(c, obs, &st, set)
	setArchive(obs, &st, set)
	st.Phase = phaseOf(c, st.Conditions)
	return st
}

// setArchive reports the continuous archive: its window and the
// ContinuousArchiving condition; both go with spec.archive.
func setArchive(obs observation, st *etcdv1alpha1.EtcdClusterStatus, set setFunc) {
	a := obs.archive
	switch {
	case a == nil:
		// Not looked at: what was known stays.
	case a.removed:
		st.Archive = nil
		apimeta.RemoveStatusCondition(&st.Conditions, etcdv1alpha1.ConditionContinuousArchiving)
		apimeta.RemoveStatusCondition(&st.Conditions, etcdv1alpha1.ConditionArchiveVerified)
	default:
		st.Archive = a.status
		status := metav1.ConditionFalse
		if a.ok {
			status = metav1.ConditionTrue
		}
		set(etcdv1alpha1.ConditionContinuousArchiving, status, a.reason, a.message)
		if status, reason, msg, ok := archiveVerifiedCondition(a.status); ok {
			set(etcdv1alpha1.ConditionArchiveVerified, status, reason, msg)
		}
	}
}

// setRestored reports a restore from a backup: in progress, failed, or
// done (with the backup and revision), for the life of the cluster.
func setRestored(c *etcdv1alpha1.EtcdCluster, obs observation, st *etcdv1alpha1.EtcdClusterStatus, set setFunc) {
	const t = etcdv1alpha1.ConditionRestored
	p := obs.restore
	switch {
	case obs.recovery != nil && obs.recovery.restoredFrom != nil:
		from := obs.recovery.restoredFrom
		rev := restoredRevision(from)
		set(t, metav1.ConditionTrue, etcdv1alpha1.ReasonRestoredFromBackup, fmt.Sprintf(
			"EtcdRestore %s replaced every member's data with %s%s at %s (revision %d; new revisions start above %d)",
			obs.recovery.status.Restore, cmp.Or(from.Backup, from.URI), replayedWords(from), from.Time.UTC().Format(time.RFC3339), rev, rev+bumpRevision))
	case !restoring(c):
		return
	case p == nil && st.RestoredFrom == nil:
		set(t, metav1.ConditionUnknown, etcdv1alpha1.ReasonRestoring, "The restore has not started")
	case p == nil:
		// Done in an earlier pass; the condition stays as it was.
	case p.done:
		st.RestoredFrom = p.from
		msg := fmt.Sprintf("Every member started from %s", p.from.URI)
		if p.from.Backup != "" {
			msg = fmt.Sprintf("Every member started from EtcdBackup %s (%s)", p.from.Backup, p.from.URI)
		}
		msg += replayedWords(p.from)
		if rev := restoredRevision(p.from); rev > 0 {
			msg += fmt.Sprintf(" at revision %d; new revisions start above %d", rev, rev+bumpRevision)
		}
		set(t, metav1.ConditionTrue, etcdv1alpha1.ReasonRestoredFromBackup, msg)
	default:
		set(t, metav1.ConditionFalse, p.reason, p.message)
	}
}

// restoredRevision is the revision restored data holds: the archive's
// reached by a replay, else the backup's.
func restoredRevision(from *etcdv1alpha1.RestoredFrom) int64 {
	if from.Archive != nil && from.Archive.Revision > 0 {
		return from.Archive.Revision
	}
	return from.Revision
}

// replayedWords says, in a message, what a restore to a point replayed
// after its backup.
func replayedWords(from *etcdv1alpha1.RestoredFrom) string {
	a := from.Archive
	if a == nil {
		return ""
	}
	return fmt.Sprintf(", with %d revisions of the archive %s replayed onto it (target %s)", a.Revisions, a.Location, a.Target)
}

type setFunc func(t string, s metav1.ConditionStatus, reason, msg string)

func setAvailable(c *etcdv1alpha1.EtcdCluster, obs observation, st *etcdv1alpha1.EtcdClusterStatus, set setFunc) {
	const t = etcdv1alpha1.ConditionAvailable
	voters := 0
	for _, m := range st.Members {
		if !m.Learner {
			voters++
		}
	}
	health := fmt.Sprintf("%d of %d voting members are healthy", st.ReadyMembers, voters)
	switch {
	case obs.tlsProblem != "":
		set(t, metav1.ConditionUnknown, etcdv1alpha1.ReasonInvalidTLSSecrets, "Tend cannot check the members without its client certificate; see Degraded")
	case obs.recovery != nil && obs.recovery.holding:
		set(t, metav1.ConditionFalse, etcdv1alpha1.ReasonRecovering, fmt.Sprintf("The members are stopped or starting for %s; see status.recovery", obs.recovery.status.Cause))
	case obs.restore != nil && !obs.restore.done:
		set(t, metav1.ConditionFalse, etcdv1alpha1.ReasonBootstrapping, "The members start once their data is restored; see Restored")
	case len(obs.staleVolumes) > 0:
		set(t, metav1.ConditionFalse, etcdv1alpha1.ReasonBootstrapping, "The members do not start while an older cluster's volumes are in the way; see Degraded")
	case obs.members == nil && obs.job == jobNone:
		msg := "Waiting for the members to start and form the cluster"
		switch {
		case len(obs.startProblems) > 0:
			msg += ": " + strings.Join(obs.startProblems, "; ")
		case obs.unreachable != nil:
			msg += ": " + unreachableText(obs.unreachable)
		}
		set(t, metav1.ConditionFalse, etcdv1alpha1.ReasonBootstrapping, msg)
	case obs.members == nil:
		msg := "No member answered"
		if obs.unreachable != nil {
			msg += ": " + unreachableText(obs.unreachable)
		}
		set(t, metav1.ConditionFalse, etcdv1alpha1.ReasonUnreachable,
			msg+fmt.Sprintf(". Check the member pods: kubectl get pods -n %s -l %s=%s", c.Namespace, LabelCluster, c.Name))
	case !obs.healthyQuorum && obs.quorum != nil && obs.quorum.summary != "":
		set(t, metav1.ConditionFalse, etcdv1alpha1.ReasonQuorumLost,
			fmt.Sprintf("%s, and a quorum is %d: etcd cannot serve writes; %s. See Degraded for the recovery plan", health, etcd.Quorum(voters), obs.quorum.summary))
	case !obs.healthyQuorum:
		set(t, metav1.ConditionFalse, etcdv1alpha1.ReasonQuorumLost,
			fmt.Sprintf("%s, and a quorum is %d: etcd cannot serve writes. Tend changes no membership without a quorum; bring the failed members' pods back", health, etcd.Quorum(voters)))
	case obs.job == jobFailed:
		set(t, metav1.ConditionFalse, etcdv1alpha1.ReasonBootstrapping,
			fmt.Sprintf("%s, but the init Job %s failed; see Degraded", health, initJobName(c)))
	case obs.job != jobComplete:
		set(t, metav1.ConditionFalse, etcdv1alpha1.ReasonBootstrapping,
			fmt.Sprintf("%s; waiting for the init Job %s to check the cluster", health, initJobName(c)))
	default:
		set(t, metav1.ConditionTrue, etcdv1alpha1.ReasonQuorumHealthy, health)
	}
}

// memberAddress matches a member's IP address and port in an error's text.
var memberAddress = regexp.MustCompile(`\b(?:\d{1,3}\.){3}\d{1,3}:\d+\b|\[[0-9A-Fa-f:.]+\]:\d+`)

// unreachableText is why no member answered, without the address of the
// member tried last: the etcd client tries the members in turn, and a
// message that named each pass's last one would change, and be written,
// at every pass of a cluster that stays down.
func unreachableText(err error) string {
	return memberAddress.ReplaceAllString(err.Error(), "<member>")
}

func setProgressing(c *etcdv1alpha1.EtcdCluster, obs observation, set setFunc) {
	const t = etcdv1alpha1.ConditionProgressing
	switch {
	case c.Spec.Paused:
		set(t, metav1.ConditionFalse, etcdv1alpha1.ReasonPaused, "spec.paused is true: Tend changes nothing until it is false")
	case obs.tlsProblem != "":
		set(t, metav1.ConditionUnknown, etcdv1alpha1.ReasonInvalidTLSSecrets, "Tend cannot act on the members without its client certificate; see Degraded")
	case obs.passError != nil:
		set(t, metav1.ConditionUnknown, passErrorReason(obs.passError), "Tend's last pass failed; see Degraded")
	case obs.recovery != nil && recovering(obs.recovery.status):
		rec := obs.recovery.status
		set(t, metav1.ConditionTrue, etcdv1alpha1.ReasonRecovering, fmt.Sprintf("%s (%s): %s", rec.Cause, rec.Phase, cmp.Or(obs.recovery.message, rec.Message)))
	case obs.recovery != nil && obs.recovery.holding:
		set(t, metav1.ConditionFalse, etcdv1alpha1.ReasonRecoveryFailed, "The last recovery failed; see Degraded")
	case obs.restore != nil && !obs.restore.done && !obs.restore.failed:
		set(t, metav1.ConditionTrue, obs.restore.reason, obs.restore.message)
	case obs.creating || (obs.members == nil && obs.job == jobNone):
		set(t, metav1.ConditionTrue, etcdv1alpha1.ReasonCreating, fmt.Sprintf("Creating the cluster: %d members start together", replicas(c)))
	case obs.members == nil:
		set(t, metav1.ConditionUnknown, etcdv1alpha1.ReasonUnreachable, "No member answered; Tend cannot tell the membership")
	case obs.step.kind != stepNone:
		set(t, metav1.ConditionTrue, obs.step.reason, obs.step.message)
	case obs.roll != nil && obs.roll.reason != "":
		status := metav1.ConditionTrue
		if obs.roll.degraded {
			status = metav1.ConditionFalse // it goes on only once someone acts; see Degraded
		}
		set(t, status, obs.roll.reason, obs.roll.message)
	case obs.volumes != nil && len(obs.volumes.grow)+len(obs.volumes.resizing) > 0:
		set(t, metav1.ConditionTrue, etcdv1alpha1.ReasonExpandingVolumes, volumesMessage(c, obs.volumes))
	case migrating(maintenanceOf(c, obs)):
		set(t, metav1.ConditionTrue, etcdv1alpha1.ReasonMigratingVolumes, maintenanceOf(c, obs).VolumeMigration.Message)
	default:
		set(t, metav1.ConditionFalse, etcdv1alpha1.ReasonStable, fmt.Sprintf("%d members, as the spec asks", replicas(c)))
	}
}

func setDegraded(c *etcdv1alpha1.EtcdCluster, obs observation, set setFunc) {
	const t = etcdv1alpha1.ConditionDegraded
	var alarms, unhealthy []string
	restarting := ""
	if r := obs.roll; r != nil && r.update != nil && !r.degraded {
		restarting = r.update.Member // restarted on purpose; a stall is reported as such
	}
	for _, m := range obs.members {
		if m.Name == restarting && !m.DataLost {
			continue
		}
		for _, e := range m.Errors {
			if strings.Contains(e, "alarm") && !slices.Contains(alarms, e) {
				alarms = append(alarms, e)
			}
		}
		switch {
		case m.DataLost:
			unhealthy = append(unhealthy, m.Name+" lost its data (its volume is not the one it had)")
		case !m.Healthy && !m.IsLearner:
			why := "no answer"
			if m.Err != nil {
				why = m.Err.Error()
			}
			unhealthy = append(unhealthy, fmt.Sprintf("%s since %s (%s)", m.Name, m.UnhealthySince.UTC().Format(time.RFC3339), why))
		}
	}
	n := replicas(c)
	switch {
	case obs.tlsProblem != "":
		set(t, metav1.ConditionTrue, etcdv1alpha1.ReasonInvalidTLSSecrets, obs.tlsProblem)
	case obs.passError != nil:
		set(t, metav1.ConditionTrue, passErrorReason(obs.passError), fmt.Sprintf(
			"Tend's last pass failed, and is retried with backoff: %v. The manager's log has each failure; if it repeats, the message says what to fix", obs.passError))
	case obs.restore != nil && obs.restore.failed:
		set(t, metav1.ConditionTrue, etcdv1alpha1.ReasonRestoreFailed, obs.restore.message)
	case obs.recovery != nil && obs.recovery.status.Phase == etcdv1alpha1.RecoveryFailed:
		set(t, metav1.ConditionTrue, etcdv1alpha1.ReasonRecoveryFailed, obs.recovery.status.Message)
	case obs.recovery != nil && obs.recovery.holding:
		set(t, metav1.ConditionFalse, etcdv1alpha1.ReasonRecovering, "A recovery runs; see Progressing")
	case !obs.healthyQuorum && obs.quorum != nil && obs.quorum.message != "":
		set(t, metav1.ConditionTrue, obs.quorum.reason, obs.quorum.message)
	case len(obs.staleVolumes) > 0:
		set(t, metav1.ConditionTrue, etcdv1alpha1.ReasonStaleVolumes, fmt.Sprintf(
			"Volume claims %s hold the data of an older cluster named %s, and the new members would start on them. "+
				"Delete them (kubectl delete pvc -n %s %s) to start empty, restore that data with spec.bootstrap.restore, "+
				"or annotate this cluster %s=true to start on them",
			strings.Join(obs.staleVolumes, ", "), c.Name, c.Namespace, strings.Join(obs.staleVolumes, " "), etcdv1alpha1.AnnotationAdoptVolumes))
	case obs.job == jobFailed:
		set(t, metav1.ConditionTrue, etcdv1alpha1.ReasonInitFailed,
			fmt.Sprintf("The init Job %s failed (%s). Read its pod logs; delete the Job to run it again", initJobName(c), obs.jobMessage))
	case obs.roll != nil && obs.roll.degraded:
		set(t, metav1.ConditionTrue, obs.roll.reason, obs.roll.message)
	case len(obs.startProblems) > 0:
		set(t, metav1.ConditionTrue, etcdv1alpha1.ReasonMembersCannotStart,
			fmt.Sprintf("Member pods do not run: %s. Tend cannot fix this itself; see docs/etcdcluster.md (Runbook)", strings.Join(obs.startProblems, "; ")))
	case maintenanceReason(c, obs) != "":
		set(t, metav1.ConditionTrue, maintenanceReason(c, obs), maintenanceMessage(c, obs))
	case len(alarms) > 0:
		set(t, metav1.ConditionTrue, etcdv1alpha1.ReasonAlarm,
			fmt.Sprintf("etcd raised %s. NOSPACE: compact and defragment, or raise spec.options.quotaBackendBytes, then etcdctl alarm disarm; CORRUPT: see docs/etcdcluster.md", strings.Join(alarms, "; ")))
	case len(unhealthy) > 0:
		policy := replacementOf(c)
		what := "spec.memberReplacement.policy is Manual: remove and re-add them, or set it to Auto"
		if policy.auto {
			what = fmt.Sprintf("Tend replaces a member that stays unhealthy for %s while the others keep a quorum", policy.after)
		}
		set(t, metav1.ConditionTrue, etcdv1alpha1.ReasonMembersUnhealthy,
			fmt.Sprintf("Unhealthy members: %s. %s", strings.Join(unhealthy, ", "), what))
	case n%2 == 0:
		set(t, metav1.ConditionTrue, etcdv1alpha1.ReasonEvenMembers,
			fmt.Sprintf("%d members tolerate %d failures, as %d do; an odd number is as safe for less work", n, (n-1)/2, n-1))
	default:
		set(t, metav1.ConditionFalse, etcdv1alpha1.ReasonAsExpected, "Nothing needs attention")
	}
}

// passErrorReason is the Degraded reason of a pass that failed with err.
func passErrorReason(err error) string {
	if errors.Is(err, errNotOurs) {
		return etcdv1alpha1.ReasonObjectNotOurs
	}
	return etcdv1alpha1.ReasonReconcileFailed
}

// phaseOf summarises the conditions in a word, for display.
func phaseOf(c *etcdv1alpha1.EtcdCluster, conds []metav1.Condition) string {
	available := apimeta.FindStatusCondition(conds, etcdv1alpha1.ConditionAvailable)
	progressing := apimeta.FindStatusCondition(conds, etcdv1alpha1.ConditionProgressing)
	degraded := apimeta.FindStatusCondition(conds, etcdv1alpha1.ConditionDegraded)
	switch {
	case c.Spec.Paused:
		return etcdv1alpha1.PhasePaused
	case progressing.Reason == etcdv1alpha1.ReasonRestoring:
		return etcdv1alpha1.PhaseRestoring
	case progressing.Reason == etcdv1alpha1.ReasonRecovering:
		return etcdv1alpha1.PhaseRecovering
	case degraded.Status == metav1.ConditionTrue && degraded.Reason != etcdv1alpha1.ReasonEvenMembers:
		return etcdv1alpha1.PhaseDegraded
	case available.Reason == etcdv1alpha1.ReasonBootstrapping:
		return etcdv1alpha1.PhaseCreating
	case available.Status != metav1.ConditionTrue:
		return etcdv1alpha1.PhaseDegraded
	case progressing.Status == metav1.ConditionTrue && slices.Contains([]string{etcdv1alpha1.ReasonUpdating,
		etcdv1alpha1.ReasonBackingUpBeforeUpgrade, etcdv1alpha1.ReasonCheckingUpdate}, progressing.Reason):
		return etcdv1alpha1.PhaseUpdating
	case progressing.Status == metav1.ConditionTrue:
		return etcdv1alpha1.PhaseScaling
	default:
		return etcdv1alpha1.PhaseRunning
	}
}

// membersStatus is the members as the status lists them, sorted by name.
func membersStatus(views []memberView) []etcdv1alpha1.Member {
	out := make([]etcdv1alpha1.Member, 0, len(views))
	for _, v := range views {
		m := etcdv1alpha1.Member{
			Name:    cmp.Or(v.Name, v.ID.String()),
			ID:      v.ID.String(),
			Leader:  v.IsLeader(),
			Learner: v.IsLearner,
			Healthy: v.Healthy,

			VolumeUID: v.DataHolder,
		}
		if !v.UnhealthySince.IsZero() {
			m.UnhealthySince = &metav1.Time{Time: v.UnhealthySince.Truncate(time.Second)}
		}
		if v.Version != "" {
			m.Version = "v" + v.Version
		}
		if v.Answered {
			m.DBSize = resource.NewQuantity(v.DBSize, resource.BinarySI)
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b etcdv1alpha1.Member) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// lowestVersion is the lowest version any member reports, such as
// "v3.6.16"; empty when none answered.
func lowestVersion(views []memberView) string {
	var lowest etcdVersion
	found := false
	for _, v := range views {
		mv, ok := parseVersion(v.Version)
		if ok && (!found || mv.compare(lowest) < 0) {
			lowest, found = mv, true
		}
	}
	if !found {
		return ""
	}
	return lowest.String()
}

// deletingStatus is the status of a deleted cluster: what was known stays;
// the Deleting condition says what the deletion waits for.
func deletingStatus(c *etcdv1alpha1.EtcdCluster, obs observation) etcdv1alpha1.EtcdClusterStatus {
	st := *c.Status.DeepCopy()
	st.Phase = etcdv1alpha1.PhaseDeleting
	if obs.finalSnapshot != "" {
		st.FinalSnapshot = obs.finalSnapshot
	}
	d := obs.deletion
	switch {
	case obs.passError != nil:
		d = &deletion{passErrorReason(obs.passError), fmt.Sprintf("The deletion's last pass failed, and is retried with backoff: %v", obs.passError)}
	case d == nil:
		d = &deletion{etcdv1alpha1.ReasonDeletingMembers, fmt.Sprintf("deletionPolicy %s: nothing to wait for", deletionPolicy(c))}
	}
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: etcdv1alpha1.ConditionDeleting, Status: metav1.ConditionTrue, Reason: d.reason, Message: d.message, ObservedGeneration: c.Generation,
	})
	return st
}

// deletion is what the deletion of a cluster waits for, for its status.
type deletion struct {
	reason, message string
}

// recoveryObservation is what the recovery phase saw and did.
type recoveryObservation struct {
	// status is the status.recovery to write.
	status *etcdv1alpha1.RecoveryStatus
	// holding: the members are stopped, or held, for a recovery; the pass
	// did nothing else.
	holding bool
	// message says how far it got.
	message string
	// restoredFrom is set when a restore completed.
	restoredFrom *etcdv1alpha1.RestoredFrom
}

// restoreProgress is how far the restore of a new cluster got, for its
// status.
type restoreProgress struct {
	reason, message string
	done, failed    bool
	from            *etcdv1alpha1.RestoredFrom
}

// rollObservation is what the roll phase saw and did, for the status.
type rollObservation struct {
	// update is status.update after the pass; nil when no roll is on.
	update *etcdv1alpha1.UpdateStatus
	// finished: the roll ended this pass, or none was needed.
	finished bool
	// reason and message explain Progressing; a degraded reason (stalled,
	// blocked, check failed) also sets Degraded.
	reason, message string
	degraded        bool
}
