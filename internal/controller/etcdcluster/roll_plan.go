package etcdcluster

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcd"
)

// rollMember is a voting member as the roll sees it: what etcd says, and
// its pod.
type rollMember struct {
	memberView
	// Updated: its pod exists, is not being deleted, and runs the current
	// revision. PodGone: it has no pod, or its pod is being deleted.
	Updated, PodGone bool
	// PodCreated is when its pod was made; zero without a pod.
	PodCreated time.Time
}

// rollInput is what planRoll decides from.
type rollInput struct {
	members []rollMember
	// inHand is the member the roll restarted last and since when, from
	// status.update; a lost status only makes the timeout run from the
	// pod's creation instead.
	inHand      string
	inHandSince time.Time
	timeout     time.Duration
	now         time.Time
}

// rollActionKind is the roll's next action, or the lack of one.
type rollActionKind int

const (
	rollDone       rollActionKind = iota // every member runs the revision, healthy and caught up
	rollWait                             // the next restart is not safe yet
	rollRestart                          // delete the member's pod; the StatefulSet makes it anew
	rollMoveLeader                       // hand the leadership to an updated member first
	rollStalled                          // a restarted member missed its timeout: stop
)

// rollAction is the one thing a pass does for a roll.
type rollAction struct {
	kind    rollActionKind
	member  rollMember
	to      etcd.MemberID
	message string
}

// planRoll picks the roll's next action, one member at a time:
//  1. a member that was restarted (its pod is new or gone) must become
//     healthy and catch up with the leader before anything else happens;
//     past the timeout the roll stalls on it;
//  2. members still on an older revision restart, the unhealthy ones
//     first (they hold no quorum weight), then healthy followers, highest
//     ordinal first, each only when etcd.CanRestart allows it and every
//     voting member is healthy;
//  3. the leader goes last: the leadership first moves to an updated,
//     caught-up member, so that a roll costs one planned leader change.
func planRoll(in rollInput) rollAction {
	var statuses []etcd.MemberStatus
	var members []etcd.Member
	for _, m := range in.members {
		if m.IsLearner {
			return rollAction{kind: rollWait, member: m, message: fmt.Sprintf("Waiting for learner %s to join before restarting members", m.Name)}
		}
		statuses = append(statuses, m.MemberStatus)
		members = append(members, m.Member)
	}
	leaderID, hasLeader := etcd.Leader(statuses)
	var leader etcd.MemberStatus
	for _, s := range statuses {
		if s.ID == leaderID && s.IsLeader() {
			leader = s
		}
	}

	if action, ok := settling(in, leader, hasLeader); ok {
		return action
	}

	var outdated []rollMember
	for _, m := range byOrdinalDesc(in.members) {
		if !m.Updated && !m.PodGone {
			outdated = append(outdated, m)
		}
	}
	if len(outdated) == 0 {
		return rollAction{kind: rollDone}
	}
	if !hasLeader {
		return rollAction{kind: rollWait, message: "Waiting for a leader before restarting members"}
	}
	if alarms := alarmsOf(statuses); len(alarms) > 0 {
		return rollAction{kind: rollWait, message: fmt.Sprintf("Waiting for etcd's alarms to be cleared before restarting members: %s", strings.Join(alarms, "; "))}
	}

	// Unhealthy first: restarting them costs the cluster nothing.
	for _, m := range outdated {
		if m.Healthy {
			continue
		}
		if err := etcd.CanRestart(members, statuses, m.ID); err != nil {
			return rollAction{kind: rollWait, member: m, message: fmt.Sprintf("Cannot restart unhealthy member %s yet: %v", m.Name, err)}
		}
		return rollAction{kind: rollRestart, member: m, message: fmt.Sprintf("Restarting unhealthy member %s", m.Name)}
	}
	for _, m := range in.members {
		if !m.Healthy {
			return rollAction{kind: rollWait, member: m, message: fmt.Sprintf("Waiting for member %s to become healthy before restarting the next member", m.Name)}
		}
	}
	for _, m := range outdated {
		if m.ID == leaderID {
			continue
		}
		if err := etcd.CanRestart(members, statuses, m.ID); err != nil {
			return rollAction{kind: rollWait, member: m, message: fmt.Sprintf("Cannot restart member %s yet: %v", m.Name, err)}
		}
		return rollAction{kind: rollRestart, member: m, message: fmt.Sprintf("Restarting member %s (%d of %d members still to update)", m.Name, len(outdated), len(in.members))}
	}

	// Only the leader is left.
	return leaderLast(in, outdated[0], leader, members, statuses)
}

// settleProblem says why a restarted member does not count as settled.
func settleProblem(m rollMember) string {
	switch {
	case m.PodGone:
		return "its pod is not running yet"
	case m.Err != nil:
		return m.Err.Error()
	case !m.Healthy:
		return "not healthy"
	default:
		return fmt.Sprintf("applied index %d, not yet within %d entries of the leader's", m.RaftAppliedIndex, etcd.CatchUpSlack)
	}
}

func byOrdinalDesc(members []rollMember) []rollMember {
	out := slices.Clone(members)
	slices.SortFunc(out, func(a, b rollMember) int { return cmp.Compare(b.Ordinal, a.Ordinal) })
	return out
}

// alarmsOf lists the alarms that etcd reports.
func alarmsOf(statuses []etcd.MemberStatus) []string {
	var alarms []string
	for _, s := range statuses {
		for _, e := range s.Errors {
			if strings.Contains(e, "alarm") && !slices.Contains(alarms, e) {
				alarms = append(alarms, e)
			}
		}
	}
	return alarms
}

// settling is the wait for a restarted member (updated, or whose pod is
// gone) to become healthy and catch up with leader, or the stall once
// the member timeout has passed; ok is false when every member settled.
func settling(in rollInput, leader etcd.MemberStatus, hasLeader bool) (rollAction, bool) {
	for _, m := range byOrdinalDesc(in.members) {
		if !m.Updated && !m.PodGone {
			continue
		}
		if m.Updated && hasLeader && etcd.CaughtUp(m.MemberStatus, leader) {
			continue
		}
		since := m.PodCreated
		if m.Name == in.inHand && in.inHandSince.After(since) {
			since = in.inHandSince
		}
		if since.IsZero() {
			since = in.now
		}
		if waited := in.now.Sub(since); waited >= in.timeout {
			return rollAction{kind: rollStalled, member: m, message: fmt.Sprintf(
				"Member %s, restarted at %s, is not healthy and caught up after %s (%s)",
				m.Name, since.UTC().Format(time.RFC3339), in.timeout, settleProblem(m))}, true
		}
		return rollAction{kind: rollWait, member: m, message: fmt.Sprintf(
			"Waiting for restarted member %s to become healthy and catch up (%s)", m.Name, settleProblem(m))}, true
	}

	return rollAction{}, false
}

// leaderLast restarts m, the leader and the last outdated member, after
// the leadership moved to an updated, caught-up member; a one-member
// cluster restarts at once.
func leaderLast(in rollInput, m rollMember, leader etcd.MemberStatus, members []etcd.Member, statuses []etcd.MemberStatus) rollAction {
	var to rollMember
	for _, u := range in.members {
		if u.ID == m.ID || !u.Updated || !etcd.CaughtUp(u.MemberStatus, leader) {
			continue
		}
		if to.ID == 0 || u.RaftAppliedIndex > to.RaftAppliedIndex || (u.RaftAppliedIndex == to.RaftAppliedIndex && u.ID < to.ID) {
			to = u
		}
	}
	if to.ID != 0 {
		return rollAction{kind: rollMoveLeader, member: m, to: to.ID, message: fmt.Sprintf(
			"Moving the leadership from %s to updated member %s before restarting %s", m.Name, to.Name, m.Name)}
	}
	if err := etcd.CanRestart(members, statuses, m.ID); err != nil {
		return rollAction{kind: rollWait, member: m, message: fmt.Sprintf("Cannot restart leader %s yet: %v", m.Name, err)}
	}
	if len(in.members) > 1 {
		// No updated member can lead (none is caught up): wait rather
		// than cost an unplanned election.
		return rollAction{kind: rollWait, member: m, message: fmt.Sprintf("Waiting for an updated member to catch up before moving the leadership away from %s", m.Name)}
	}
	return rollAction{kind: rollRestart, member: m, message: fmt.Sprintf("Restarting %s, the only member: the cluster is unavailable until it is back", m.Name)}
}

// defaultMemberTimeout is spec.updateStrategy.memberTimeout's default.
const defaultMemberTimeout = 5 * time.Minute

func memberTimeout(c *etcdv1alpha1.EtcdCluster) time.Duration {
	if d := c.Spec.UpdateStrategy.MemberTimeout; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return defaultMemberTimeout
}

// rollMembersOf pairs the members with their pods: whether each runs rev.
// outdated is set when a member's pod runs another revision; unmarked when
// a pod carries no revision at all (made by a Tend older than the roll).
func rollMembersOf(c *etcdv1alpha1.EtcdCluster, views []memberView, pods map[string]*corev1.Pod, rev string) (members []rollMember, outdated, unmarked bool) {
	for _, v := range views {
		if v.Ordinal < 0 {
			continue
		}
		m := rollMember{memberView: v}
		p := pods[v.Name]
		switch {
		case p == nil || p.DeletionTimestamp != nil:
			m.PodGone = true
		default:
			m.PodCreated = p.CreationTimestamp.Time
			have, ok := p.Annotations[etcdv1alpha1.AnnotationMemberRevision]
			m.Updated = have == rev
			outdated = outdated || !m.Updated
			unmarked = unmarked || !ok
		}
		members = append(members, m)
	}
	return members, outdated, unmarked
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}
