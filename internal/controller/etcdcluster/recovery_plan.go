package etcdcluster

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcd"
)

// voter is what the quorum-loss guard knows of one voting member.
type voter struct {
	Name string
	// Healthy: it serves linearizable reads (a quorum is behind it).
	Healthy bool
	// Answered: it answered the status request, so its store's revision
	// is known and its data can be kept.
	Answered bool
	// Running: its pod exists, is not being deleted, and its etcd
	// container runs. A member that runs may still vote, even if Tend
	// cannot reach it.
	Running bool
	// DataLost: its volume is not the one it had (markDataLoss).
	DataLost bool
	// Going: its pod is being deleted. It may still answer, but it is no
	// survivor to recover from: its pod, and maybe its volume, are going.
	Going bool
	// Revision and RaftIndex, when it answered.
	Revision  int64
	RaftIndex uint64
}

// mayVote tells whether the member could still take part in a quorum,
// somewhere Tend cannot see.
func (v voter) mayVote() bool { return v.Running && !v.DataLost }

// recoveryDecision is what the guard allows.
type recoveryDecision int

const (
	recoverNone       recoveryDecision = iota // a quorum is healthy
	recoverWait                               // not yet: too soon, or not approved
	recoverBlocked                            // not safe, or nothing to recover from
	recoverFromMember                         // keep the survivor's data
	recoverFromBackup                         // restore the backup
)

// recoveryInput is what planRecovery decides from.
type recoveryInput struct {
	voters []voter
	// lostSince is when the quorum was first seen lost.
	lostSince, now time.Time
	policy         etcdv1alpha1.QuorumLossPolicy
	after          time.Duration
	// approval is the etcd.tend.dev/recover-from annotation, if any.
	approval string
	// backup is the latest Complete and Verified EtcdBackup of the
	// cluster, if any.
	backup string
	// namespace and name are the cluster's, for the commands in messages.
	namespace, name string
}

// recoveryPlan is planRecovery's answer.
type recoveryPlan struct {
	decision recoveryDecision
	// survivor is the member whose data is kept, with its revision; backup
	// the EtcdBackup restored.
	survivor string
	revision int64
	backup   string
	// cause says who decided (the policy, or the approval).
	cause string
	// reason and message explain it in the Degraded condition; summary is
	// the plan in a sentence, for the Available condition.
	reason, message, summary string
}

// planRecovery is the quorum-loss guard: it decides whether Tend may
// rebuild a cluster that lost its quorum, and from what. Tend acts only
//   - when fewer than a quorum of voters are healthy, and have been for
//     spec.quorumLoss.after;
//   - when the members it would give up cannot vote any more: fewer than a
//     quorum of voters may still vote (run, with their data). Members that
//     run but do not answer (a network partition, a frozen process) may
//     form a quorum Tend cannot see, and a second cluster beside them would
//     be a split brain;
//   - with policy Auto, or once approved by the annotation.
//
// The source is the surviving member with the highest revision (then raft
// index), which holds every write it had applied; without one that
// answers, the latest verified backup.
func planRecovery(in recoveryInput) recoveryPlan {
	quorum := etcd.Quorum(len(in.voters))
	var healthy, mayVote []string
	var survivors []voter
	for _, v := range in.voters {
		if v.Healthy {
			healthy = append(healthy, v.Name)
		}
		if v.mayVote() {
			mayVote = append(mayVote, v.Name)
		}
		if v.Answered && !v.DataLost && !v.Going {
			survivors = append(survivors, v)
		}
	}
	if len(in.voters) == 0 || len(healthy) >= quorum {
		return recoveryPlan{decision: recoverNone}
	}
	slices.SortFunc(survivors, func(a, b voter) int {
		return cmp.Or(cmp.Compare(b.Revision, a.Revision), cmp.Compare(b.RaftIndex, a.RaftIndex), cmp.Compare(a.Name, b.Name))
	})

	p := recoveryPlan{reason: etcdv1alpha1.ReasonRecoveryPlanned}
	var known []string
	if len(survivors) > 0 {
		known = append(known, fmt.Sprintf("the most advanced surviving member is %s (revision %d)", survivors[0].Name, survivors[0].Revision))
	} else {
		known = append(known, "no surviving member answers")
	}
	if in.backup != "" {
		known = append(known, "the latest verified backup is EtcdBackup "+in.backup)
	} else {
		known = append(known, "there is no verified backup")
	}
	p.summary = strings.Join(known, "; ")

	if len(mayVote) >= quorum {
		p.decision, p.reason = recoverBlocked, etcdv1alpha1.ReasonRecoveryBlocked
		p.message = fmt.Sprintf("The quorum is lost (%d of %d voters healthy, a quorum is %d), but members %s run with their data and may still form a quorum that Tend cannot reach (a network partition, a paused process). "+
			"Tend recovers only when the members it gives up cannot vote: their pods gone or not running, or their data lost. Find out why they do not answer; %s",
			len(healthy), len(in.voters), quorum, strings.Join(mayVote, ", "), p.summary)
		return p
	}

	// The source: the approval's, else the survivor, else the backup.
	switch {
	case in.approval != "":
		if !approve(&p, in.approval, survivors) {
			return p
		}
	case len(survivors) > 0:
		p.decision, p.survivor, p.revision = recoverFromMember, survivors[0].Name, survivors[0].Revision
	case in.backup != "":
		p.decision, p.backup = recoverFromBackup, in.backup
	default:
		p.decision, p.reason = recoverBlocked, etcdv1alpha1.ReasonRecoveryBlocked
		p.message = fmt.Sprintf("The quorum is lost (%d of %d voters healthy, a quorum is %d), no surviving member answers and there is no verified backup. "+
			"Create an EtcdRestore from a backup file to bring the cluster back",
			len(healthy), len(in.voters), quorum)
		return p
	}

	lost := fmt.Sprintf("The quorum is lost (%d of %d voters healthy, a quorum is %d) and the members given up cannot vote; %s. Plan: %s",
		len(healthy), len(in.voters), quorum, p.summary, p.source())
	return schedule(in, p, lost)
}

// approve takes the source that the annotation AnnotationRecoverFrom
// names (member/<name> of a survivor that answers, or backup/<name>) into
// p. It tells whether the approval names one; if not, p is blocked and
// says what to name.
func approve(p *recoveryPlan, approval string, survivors []voter) bool {
	p.cause = fmt.Sprintf("approved by the annotation %s=%s", etcdv1alpha1.AnnotationRecoverFrom, approval)
	kind, name, _ := strings.Cut(approval, "/")
	switch {
	case kind == "member" && slices.ContainsFunc(survivors, func(v voter) bool { return v.Name == name }):
		p.decision, p.survivor = recoverFromMember, name
		for _, v := range survivors {
			if v.Name == name {
				p.revision = v.Revision
			}
		}
	case kind == "backup" && name != "":
		p.decision, p.backup = recoverFromBackup, name
	default:
		names := make([]string, len(survivors))
		for i, v := range survivors {
			names[i] = "member/" + v.Name
		}
		p.decision, p.reason = recoverBlocked, etcdv1alpha1.ReasonRecoveryBlocked
		p.message = fmt.Sprintf("The annotation %s=%s names no surviving member that answers, nor a backup; set it to one of %s, or to backup/<EtcdBackup name>; %s",
			etcdv1alpha1.AnnotationRecoverFrom, approval, cmp.Or(strings.Join(names, ", "), "(none)"), p.summary)
		return false
	}
	return true
}

// source says where p recovers from.
func (p recoveryPlan) source() string {
	if p.decision == recoverFromBackup {
		return fmt.Sprintf("restore EtcdBackup %s into every member", p.backup)
	}
	return fmt.Sprintf("keep member %s's data (revision %d) and add the others anew", p.survivor, p.revision)
}

// schedule decides when p runs: at once under policy Auto (or an
// approval) once spec.quorumLoss.after has passed; else it waits, and
// lost says why in its message.
func schedule(in recoveryInput, p recoveryPlan, lost string) recoveryPlan {
	due := in.lostSince.Add(in.after)
	switch {
	case in.policy != etcdv1alpha1.QuorumLossAuto && in.approval == "":
		p.decision = recoverWait
		p.message = fmt.Sprintf("%s. spec.quorumLoss.policy is Manual: approve with kubectl annotate etcdcluster -n %s %s %s=member/%s (or backup/<EtcdBackup name>), or create an EtcdRestore",
			lost, cmp.Or(in.namespace, "<namespace>"), cmp.Or(in.name, "<name>"), etcdv1alpha1.AnnotationRecoverFrom, cmp.Or(p.survivor, "<member>"))
	case in.now.Before(due):
		p.decision = recoverWait
		p.message = fmt.Sprintf("%s, at %s (spec.quorumLoss.after %s after the loss)", lost, due.UTC().Format(time.RFC3339), in.after)
	default:
		if p.cause == "" {
			p.cause = "spec.quorumLoss.policy Auto"
		}
		p.message = lost
	}
	return p
}

// quorumLossOf is spec.quorumLoss, resolved.
func quorumLossOf(c *etcdv1alpha1.EtcdCluster) (etcdv1alpha1.QuorumLossPolicy, time.Duration) {
	after := 5 * time.Minute
	if d := c.Spec.QuorumLoss.After; d != nil {
		after = d.Duration
	}
	return c.Spec.QuorumLoss.Policy, after
}

// votersOf is what the guard knows of each voting member.
func votersOf(c *etcdv1alpha1.EtcdCluster, views []memberView, data memberData) []voter {
	var out []voter
	for _, v := range views {
		if v.IsLearner {
			continue
		}
		out = append(out, voter{
			Name: v.Name, Healthy: v.Healthy, Answered: v.Answered, DataLost: v.DataLost,
			Running: etcdRunning(data.pods[v.Name]), Revision: v.Revision, RaftIndex: v.RaftIndex,
			Going: data.pods[v.Name] != nil && data.pods[v.Name].DeletionTimestamp != nil,
		})
	}
	return out
}

// etcdRunning tells whether pod runs its etcd container.
func etcdRunning(pod *corev1.Pod) bool {
	if pod == nil || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == "etcd" {
			return cs.State.Running != nil
		}
	}
	return false
}

// recovering tells whether rec is under way.
func recovering(rec *etcdv1alpha1.RecoveryStatus) bool {
	return rec != nil && rec.Phase != etcdv1alpha1.RecoveryComplete && rec.Phase != etcdv1alpha1.RecoveryFailed
}
