package etcdcluster

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcd"
)

// memberView is one etcd member as a pass sees it: what etcd says, and
// where it sits in the StatefulSet.
type memberView struct {
	etcd.MemberStatus
	// Name is the member's pod name; a learner that has not started yet has
	// it from its peer URL. Ordinal is its place in the StatefulSet, -1 for
	// a member that Tend did not make.
	Name    string
	Ordinal int
	// UnhealthySince is when the member was first seen unhealthy in its
	// current spell; zero while it is healthy.
	UnhealthySince time.Time
	// DataHolder is the UID of the volume claim (or ephemeral pod) that
	// held the member's data when it was first seen healthy; DataLost is
	// set when the member has another one now (see markDataLoss).
	DataHolder types.UID
	DataLost   bool
	// Marked: the member's volume claim carries its member ID.
	Marked bool
}

// stepKind is a membership change, or the lack of one.
type stepKind int

const (
	stepNone       stepKind = iota // the membership matches the spec
	stepWait                       // a change is due, but not safe yet
	stepPromote                    // promote a caught-up learner
	stepAddLearner                 // add a learner at an ordinal
	stepMoveLeader                 // hand the leadership away before a removal
	stepRemove                     // remove a member (scale in)
	stepReplace                    // remove an unhealthy member and add it anew
)

// step is the one membership change a pass makes.
type step struct {
	kind stepKind
	// member is the subject of promote, move-leader, remove and replace.
	member memberView
	// to is the new leader of a move; ordinal the place of a new learner.
	to      etcd.MemberID
	ordinal int
	// reason and message explain the step in the Progressing condition.
	reason, message string
}

// replacementPolicy is spec.memberReplacement, resolved.
type replacementPolicy struct {
	auto  bool
	after time.Duration
}

func replacementOf(c *etcdv1alpha1.EtcdCluster) replacementPolicy {
	p := replacementPolicy{auto: c.Spec.MemberReplacement.Policy != etcdv1alpha1.ReplacementManual, after: 5 * time.Minute}
	if d := c.Spec.MemberReplacement.UnhealthyFor; d != nil {
		p.after = d.Duration
	}
	return p
}

// planMembers decides the next membership change towards desired members,
// one at a time and only when internal/etcd's checks allow it:
//  1. a pending learner is promoted once caught up (or removed, if the spec
//     no longer wants it or it has not joined for learnerDeadline): nothing
//     else happens while one is pending;
//  2. members beyond the spec leave, the highest ordinal first, after
//     handing away the leadership;
//  3. a voting member unhealthy for longer than the policy allows is
//     replaced, the longest unhealthy first;
//  4. missing members are added as learners, the lowest free ordinal first.
func planMembers(c *etcdv1alpha1.EtcdCluster, members []memberView, now time.Time) step {
	desired, policy := int(replicas(c)), replacementOf(c)
	all, statuses := split(members)
	byOrdinal := slices.Clone(members)
	slices.SortFunc(byOrdinal, func(a, b memberView) int { return cmp.Compare(a.Ordinal, b.Ordinal) })

	for _, m := range byOrdinal {
		if !m.IsLearner {
			continue
		}
		if m.Ordinal < 0 || m.Ordinal >= desired {
			return step{kind: stepRemove, member: m, reason: etcdv1alpha1.ReasonScalingIn,
				message: fmt.Sprintf("Removing learner %s: the spec wants %d members", m.Name, desired)}
		}
		if !m.UnhealthySince.IsZero() && now.Sub(m.UnhealthySince) >= learnerDeadline(policy) {
			return step{kind: stepRemove, member: m, reason: etcdv1alpha1.ReasonWaitingForMembers,
				message: fmt.Sprintf("Removing learner %s, not started or healthy since %s, to add it again", m.Name, m.UnhealthySince.UTC().Format(time.RFC3339))}
		}
		if !c.Spec.Storage.Ephemeral && !m.Marked {
			// Its claim is marked in the pass that sees it healthy; a voter
			// must never stand on an unmarked claim (see markDataLoss).
			return step{kind: stepWait, member: m, reason: etcdv1alpha1.ReasonWaitingForMembers,
				message: fmt.Sprintf("Waiting for learner %s's volume claim to be marked with its member ID before promoting it", m.Name)}
		}
		if err := etcd.CanPromote(all, statuses, m.ID); err != nil {
			return step{kind: stepWait, member: m, reason: etcdv1alpha1.ReasonWaitingForMembers,
				message: fmt.Sprintf("Waiting for learner %s to catch up before promoting it: %v", m.Name, err)}
		}
		return step{kind: stepPromote, member: m, reason: etcdv1alpha1.ReasonScalingOut,
			message: fmt.Sprintf("Promoting learner %s to a voting member", m.Name)}
	}

	for _, m := range slices.Backward(byOrdinal) {
		if m.Ordinal >= 0 && m.Ordinal < desired {
			break
		}
		if m.IsLeader() {
			to, err := etcd.NextLeader(all, statuses, m.ID)
			if err != nil {
				return step{kind: stepWait, member: m, reason: etcdv1alpha1.ReasonWaitingForMembers,
					message: fmt.Sprintf("Cannot remove %s yet: it leads, and %v", m.Name, err)}
			}
			return step{kind: stepMoveLeader, member: m, to: to, reason: etcdv1alpha1.ReasonScalingIn,
				message: fmt.Sprintf("Moving the leadership away from %s before removing it", m.Name)}
		}
		if err := etcd.CanRemove(all, statuses, m.ID); err != nil {
			return step{kind: stepWait, member: m, reason: etcdv1alpha1.ReasonWaitingForMembers,
				message: fmt.Sprintf("Cannot remove %s yet: %v", m.Name, err)}
		}
		return step{kind: stepRemove, member: m, reason: etcdv1alpha1.ReasonScalingIn,
			message: fmt.Sprintf("Removing member %s: the spec wants %d members", m.Name, desired)}
	}

	if policy.auto {
		if s, ok := planReplacement(members, all, statuses, policy, now, restartingMember(c)); ok {
			return s
		}
	}

	if len(members) < desired {
		ordinal := freeOrdinal(members)
		name := memberName(c, ordinal)
		if err := etcd.CanAddLearner(all, statuses); err != nil {
			return step{kind: stepWait, ordinal: ordinal, reason: etcdv1alpha1.ReasonWaitingForMembers,
				message: fmt.Sprintf("Cannot add member %s yet: %v", name, err)}
		}
		return step{kind: stepAddLearner, ordinal: ordinal, reason: etcdv1alpha1.ReasonScalingOut,
			message: fmt.Sprintf("Adding member %s as a learner (%d of %d members exist)", name, len(members), desired)}
	}
	return step{kind: stepNone}
}

// planReplacement picks the voting member that has been unhealthy the
// longest past the policy's limit, if the cluster can lose it.
func planReplacement(members []memberView, all []etcd.Member, statuses []etcd.MemberStatus, policy replacementPolicy, now time.Time, restarting string) (step, bool) {
	var due []memberView
	for _, m := range members {
		if m.IsLearner || m.Ordinal < 0 {
			continue
		}
		if m.Name == restarting && !m.DataLost {
			// The roll restarted it: if it does not come back, the roll
			// stalls on it (with its data), rather than replace it empty.
			continue
		}
		if m.DataLost || (!m.UnhealthySince.IsZero() && now.Sub(m.UnhealthySince) >= policy.after) {
			due = append(due, m)
		}
	}
	if len(due) == 0 {
		return step{}, false
	}
	// Lost data first, then the longest unhealthy.
	slices.SortFunc(due, func(a, b memberView) int {
		if a.DataLost != b.DataLost {
			if a.DataLost {
				return -1
			}
			return 1
		}
		return a.UnhealthySince.Compare(b.UnhealthySince)
	})
	m := due[0]
	why := fmt.Sprintf("unhealthy since %s", m.UnhealthySince.UTC().Format(time.RFC3339))
	if m.DataLost {
		why = "which lost its data (its volume is not the one it had)"
	}
	if err := etcd.CanRemove(all, statuses, m.ID); err != nil {
		return step{kind: stepWait, member: m, reason: etcdv1alpha1.ReasonWaitingForMembers,
			message: fmt.Sprintf("Member %s, %s, cannot be replaced yet: %v", m.Name, why, err)}, true
	}
	return step{kind: stepReplace, member: m, ordinal: m.Ordinal, reason: etcdv1alpha1.ReasonReplacingMember,
		message: fmt.Sprintf("Replacing member %s, %s, with a new member with empty data", m.Name, why)}, true
}

// restartingMember is the member a roll in progress restarted last.
func restartingMember(c *etcdv1alpha1.EtcdCluster) string {
	if c.Status.Update == nil {
		return ""
	}
	return c.Status.Update.Member
}

// learnerDeadline is how long a learner may stay unstarted or unhealthy
// before it is removed and added again (its pod and volume made anew): a
// learner that never joins, such as one whose pod cannot be scheduled,
// must not hold up every other change for good.
func learnerDeadline(policy replacementPolicy) time.Duration {
	return max(policy.after, 5*time.Minute)
}

// freeOrdinal is the lowest ordinal that no member holds.
func freeOrdinal(members []memberView) int {
	taken := map[int]bool{}
	for _, m := range members {
		taken[m.Ordinal] = true
	}
	i := 0
	for taken[i] {
		i++
	}
	return i
}

// split returns the members and their statuses in internal/etcd's terms.
func split(members []memberView) ([]etcd.Member, []etcd.MemberStatus) {
	all := make([]etcd.Member, len(members))
	statuses := make([]etcd.MemberStatus, len(members))
	for i, m := range members {
		all[i], statuses[i] = m.Member, m.MemberStatus
	}
	return all, statuses
}

// statefulSetSize is the StatefulSet size that holds every member: one past
// the highest ordinal.
func statefulSetSize(members []memberView) int32 {
	size := 0
	for _, m := range members {
		size = max(size, m.Ordinal+1)
	}
	return int32(size)
}

// bootstrapOf is what a member that starts with an empty data directory
// must be told: every member, as etcd knows them, and that the cluster
// exists.
func bootstrapOf(members []memberView) Bootstrap {
	var names []string
	byOrdinal := slices.Clone(members)
	slices.SortFunc(byOrdinal, func(a, b memberView) int { return cmp.Compare(a.Ordinal, b.Ordinal) })
	for _, m := range byOrdinal {
		if m.Ordinal >= 0 {
			names = append(names, m.Name)
		}
	}
	return Bootstrap{Members: names, State: "existing"}
}

// memberData is where the members' pods run and where their data lives.
type memberData struct {
	// ips are the member pods' IPs by the members' DNS names.
	ips map[string]string
	// holders are the UIDs of the objects that hold each member's data,
	// by member name: its volume claim, or with ephemeral storage its pod.
	holders map[string]types.UID
	// pvcs are the cluster's volume claims.
	pvcs []corev1.PersistentVolumeClaim
	// pods are the member pods by name, those being deleted included;
	// orphans the pods of member names that no controller owns yet
	// (awaitsAdoption).
	pods    map[string]*corev1.Pod
	orphans []string
	// marks are the member IDs that the members' volume claims carry
	// (annotationMemberID), and created when each claim was made, by
	// member name; persistent storage only.
	marks   map[string]string
	created map[string]time.Time
	// formed is when the cluster had formed: the init Job's creation. Zero
	// when there is no init Job.
	formed time.Time
}

// markDataLoss carries each member's data holder over from the last status
// and marks the members whose data is gone. Such a member may still answer
// for a while, from an empty data directory under its old ID, which etcd
// accepts and raft does not survive; it must be replaced at once. Two
// records tell, so that losing one cannot hide a loss:
//   - the status: a member first seen healthy on one volume claim (or
//     ephemeral pod) that now has another one lost its data with the old
//     one;
//   - the objects: every voter's claim carries its member ID (a learner
//     is promoted only once its claim does, and the first members' claims
//     are marked when first seen healthy). A voter on a claim without a
//     mark that was made after the cluster formed (the init Job) has a new,
//     empty volume: its data is gone even if the status was lost or is
//     stale.
//
// A member seen for the first time, or not yet healthy, is recorded on the
// holder it has.
func markDataLoss(views []memberView, last []etcdv1alpha1.Member, data memberData) []memberView {
	for i := range views {
		v := &views[i]
		for _, m := range last {
			if m.Name == v.Name && m.ID == v.ID.String() {
				v.DataHolder = m.VolumeUID
			}
		}
		now := data.holders[v.Name]
		v.Marked = data.marks[v.Name] == v.ID.String()
		switch {
		case now == "":
			// Deleted, or not made yet: nothing to compare.
		case v.DataHolder != "" && v.DataHolder != now:
			v.DataLost = true
		case !v.IsLearner && data.marks[v.Name] == "" && !data.formed.IsZero() && data.created[v.Name].After(data.formed):
			v.DataLost = true
		case v.DataHolder == "" && v.Healthy:
			v.DataHolder = now
		}
	}
	return views
}
