package etcd

import (
	"fmt"
)

// The checks below decide membership changes from what Members and Status
// returned. They make no calls, so a controller can test its decisions
// without etcd. Each returns nil when the change may go ahead, or an error
// that wraps one of the package's errors and says, for a condition message,
// what stands in the way. members should be the linearizable list of
// Members; a member without a status in statuses counts as unhealthy.

// PromoteThreshold is how far a learner must have applied the log, as a
// fraction of the leader's committed index, to count as caught up. It is
// the threshold below which etcd refuses a promotion (readyPercentThreshold
// in etcdserver), so a promotion that LearnerCaughtUp allows is one that etcd
// should accept.
const PromoteThreshold = 0.9

// Quorum returns how many of a cluster's voting members must agree for it
// to commit anything: a majority, voters/2+1.
func Quorum(voters int) int { return voters/2 + 1 }

// HealthyQuorum tells whether the healthy voting members make a quorum of
// all voting members, which any change of membership needs to commit.
func HealthyQuorum(members []Member, statuses []MemberStatus) bool {
	voters, healthy := countVoters(members, index(statuses))
	return voters > 0 && healthy >= Quorum(voters)
}

// Leader returns the leader that the answering member with the newest term
// follows: terms only grow, and a member that has seen the newest election
// knows its winner. It returns false when no member that answered knows a
// leader.
func Leader(statuses []MemberStatus) (MemberID, bool) {
	var leader MemberID
	var term uint64
	for _, s := range statuses {
		if s.Answered && s.Leader != 0 && (leader == 0 || s.RaftTerm > term) {
			leader, term = s.Leader, s.RaftTerm
		}
	}
	return leader, leader != 0
}

// LearnerCaughtUp tells whether learner has applied the log far enough
// behind leader to be promoted: to PromoteThreshold of the leader's
// committed index. Both must have answered, leader must lead by its own
// account, and learner must follow it.
func LearnerCaughtUp(learner, leader MemberStatus) bool {
	if !learner.Answered || !leader.IsLeader() || learner.Leader != leader.ID {
		return false
	}
	return float64(learner.RaftAppliedIndex) >= PromoteThreshold*float64(leader.RaftIndex)
}

// CanAddLearner allows adding a learner when there is no learner yet
// (learners join one at a time) and every voting member is healthy (a
// cluster that is not whole is repaired before it grows; an unhealthy
// member is replaced, by CanRemove, first).
func CanAddLearner(members []Member, statuses []MemberStatus) error {
	if l, ok := pendingLearner(members, 0); ok {
		return fmt.Errorf("%w: %s must be promoted or removed first", ErrLearnerPending, l)
	}
	byID := index(statuses)
	voters := 0
	for _, m := range members {
		if m.IsLearner {
			continue
		}
		voters++
		if !healthy(byID, m.ID) {
			return fmt.Errorf("%w: voting member %s: %s", ErrUnhealthy, m, unhealthyReason(byID, m.ID))
		}
	}
	if voters == 0 {
		return fmt.Errorf("%w: the cluster has no voting member", ErrUnhealthy)
	}
	return nil
}

// CanPromote allows promoting learner id when it has caught up with the
// leader (LearnerCaughtUp) and the healthy voting members make a quorum, so
// that the promotion can commit. A member that already votes may be
// "promoted": Promote does nothing for it.
func CanPromote(members []Member, statuses []MemberStatus, id MemberID) error {
	m, ok := find(members, id)
	if !ok {
		return fmt.Errorf("%w: %s", ErrMemberNotFound, id)
	}
	if !m.IsLearner {
		return nil
	}
	byID := index(statuses)
	if voters, healthy := countVoters(members, byID); healthy < Quorum(voters) {
		return fmt.Errorf("%w: %d of %d voting members are healthy, and a quorum is %d", ErrQuorumAtRisk, healthy, voters, Quorum(voters))
	}
	learner, ok := byID[id]
	if !ok || !learner.Answered {
		return fmt.Errorf("%w: learner %s has not answered: %s", ErrLearnerNotReady, m, unhealthyReason(byID, id))
	}
	leaderID, ok := Leader(statuses)
	if !ok {
		return fmt.Errorf("%w: no member knows a leader", ErrNoLeader)
	}
	leader, ok := byID[leaderID]
	if !ok || !leader.IsLeader() {
		return fmt.Errorf("%w: leader %s has not answered as the leader", ErrNoLeader, leaderID)
	}
	if !LearnerCaughtUp(learner, leader) {
		return fmt.Errorf("%w: learner %s has applied index %d, and needs %.0f%% of the leader's %d",
			ErrLearnerNotReady, m, learner.RaftAppliedIndex, PromoteThreshold*100, leader.RaftIndex)
	}
	return nil
}

// CanRemove allows removing member id when the cluster keeps a healthy
// quorum through and after the change. A learner may always be removed: it
// does not vote. A voting member may be removed when:
//   - no learner is pending (one membership change at a time);
//   - it is not the leader (move the leadership first, see NextLeader);
//   - the healthy voting members make a quorum now, so the removal can
//     commit;
//   - the healthy voting members that remain make a quorum of those that
//     remain. Removing an unhealthy member of three leaves two of two
//     healthy: allowed, that is how a dead member is replaced. Removing a
//     healthy one while another is down leaves one of two: refused.
//
// It never allows removing the last voting member.
func CanRemove(members []Member, statuses []MemberStatus, id MemberID) error {
	m, ok := find(members, id)
	if !ok {
		return fmt.Errorf("%w: %s", ErrMemberNotFound, id)
	}
	if m.IsLearner {
		return nil
	}
	if l, ok := pendingLearner(members, id); ok {
		return fmt.Errorf("%w: %s must be promoted or removed before %s is removed", ErrLearnerPending, l, m)
	}
	if leader, ok := Leader(statuses); ok && leader == id {
		return fmt.Errorf("%w: %s leads the cluster; move the leadership to another member first", ErrIsLeader, m)
	}
	byID := index(statuses)
	voters, healthyNow := countVoters(members, byID)
	if voters == 1 {
		return fmt.Errorf("%w: %s is the last voting member", ErrQuorumAtRisk, m)
	}
	if healthyNow < Quorum(voters) {
		return fmt.Errorf("%w: %d of %d voting members are healthy, and a quorum is %d", ErrQuorumAtRisk, healthyNow, voters, Quorum(voters))
	}
	remaining, healthyAfter := voters-1, healthyNow
	if healthy(byID, id) {
		healthyAfter--
	}
	if healthyAfter < Quorum(remaining) {
		return fmt.Errorf("%w: removing %s would leave %d healthy of %d voting members, and a quorum is %d",
			ErrQuorumAtRisk, m, healthyAfter, remaining, Quorum(remaining))
	}
	return nil
}

// NextLeader picks the voting member to hand the leadership to when leaving
// must stop leading: a healthy voting member other than leaving, the one
// furthest along the log, and of those the lowest ID, so that the choice is
// stable. It fails with ErrUnhealthy when there is none.
func NextLeader(members []Member, statuses []MemberStatus, leaving MemberID) (MemberID, error) {
	byID := index(statuses)
	var best MemberStatus
	for _, m := range members {
		s, ok := byID[m.ID]
		if m.IsLearner || m.ID == leaving || !ok || !s.Healthy {
			continue
		}
		if best.ID == 0 || s.RaftAppliedIndex > best.RaftAppliedIndex ||
			(s.RaftAppliedIndex == best.RaftAppliedIndex && s.ID < best.ID) {
			best = s
		}
	}
	if best.ID == 0 {
		return 0, fmt.Errorf("%w: no healthy voting member other than %s can take the leadership", ErrUnhealthy, leaving)
	}
	return best.ID, nil
}

// index returns statuses by member ID.
func index(statuses []MemberStatus) map[MemberID]MemberStatus {
	byID := make(map[MemberID]MemberStatus, len(statuses))
	for _, s := range statuses {
		byID[s.ID] = s
	}
	return byID
}

func healthy(byID map[MemberID]MemberStatus, id MemberID) bool {
	s, ok := byID[id]
	return ok && s.Healthy
}

func unhealthyReason(byID map[MemberID]MemberStatus, id MemberID) string {
	s, ok := byID[id]
	switch {
	case !ok:
		return "its status is unknown"
	case s.Err != nil:
		return s.Err.Error()
	}
	return "unhealthy"
}

// countVoters counts the voting members, and the healthy ones among them.
func countVoters(members []Member, byID map[MemberID]MemberStatus) (voters, healthyVoters int) {
	for _, m := range members {
		if m.IsLearner {
			continue
		}
		voters++
		if healthy(byID, m.ID) {
			healthyVoters++
		}
	}
	return voters, healthyVoters
}

// pendingLearner returns a learner other than except.
func pendingLearner(members []Member, except MemberID) (Member, bool) {
	for _, m := range members {
		if m.IsLearner && m.ID != except {
			return m, true
		}
	}
	return Member{}, false
}

// CatchUpSlack is how many raft entries a restarted voting member may
// still trail the leader's committed index by and count as caught up. The
// statuses are asked at slightly different moments; under steady writes
// the leader is a few entries ahead of any follower even when both are
// current.
const CatchUpSlack = 1000

// CaughtUp tells whether voting member m is healthy, follows leader, and
// has applied the log to within CatchUpSlack of the leader's committed
// index.
func CaughtUp(m, leader MemberStatus) bool {
	if !m.Healthy || !leader.IsLeader() || m.Leader != leader.ID {
		return false
	}
	return m.RaftAppliedIndex+CatchUpSlack >= leader.RaftIndex
}

// CanRestart allows restarting voting member id (stopping it and starting
// it again on the same data) when the cluster keeps a healthy quorum while
// it is down: a leader is known, no learner is pending, and the healthy
// voting members other than id make a quorum of all voting members.
// Restarting an unhealthy member costs nothing, so it only needs the
// others' quorum. A cluster of one or two voting members cannot keep a
// quorum through any restart: CanRestart allows restarting a healthy member
// of it only when every voting member is healthy, and the cluster pauses
// while the member restarts.
func CanRestart(members []Member, statuses []MemberStatus, id MemberID) error {
	m, ok := find(members, id)
	if !ok {
		return fmt.Errorf("%w: %s", ErrMemberNotFound, id)
	}
	if l, ok := pendingLearner(members, id); ok {
		return fmt.Errorf("%w: %s must be promoted or removed before %s restarts", ErrLearnerPending, l, m)
	}
	if _, ok := Leader(statuses); !ok {
		return fmt.Errorf("%w: no member knows a leader", ErrNoLeader)
	}
	byID := index(statuses)
	voters, healthyNow := countVoters(members, byID)
	others := healthyNow
	if healthy(byID, id) {
		others--
	}
	if voters < 3 {
		if healthyNow < voters && healthy(byID, id) {
			return fmt.Errorf("%w: %d of %d voting members are healthy", ErrUnhealthy, healthyNow, voters)
		}
		return nil
	}
	if others < Quorum(voters) {
		return fmt.Errorf("%w: restarting %s would leave %d healthy of %d voting members, and a quorum is %d",
			ErrQuorumAtRisk, m, others, voters, Quorum(voters))
	}
	return nil
}
