package etcd

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
)

// The members of the check tables: voters a to e, learner l.
const (
	a MemberID = 0xa
	b MemberID = 0xb
	c MemberID = 0xc
	d MemberID = 0xd
	e MemberID = 0xe
	l MemberID = 0x1
)

func voter(id MemberID) Member {
	return Member{ID: id, Name: "m" + id.String(), PeerURLs: []string{"http://" + id.String() + ":2380"}, ClientURLs: []string{"http://" + id.String() + ":2379"}}
}

func learner(id MemberID) Member {
	m := voter(id)
	m.IsLearner = true
	return m
}

func voters(ids ...MemberID) []Member {
	var ms []Member
	for _, id := range ids {
		ms = append(ms, voter(id))
	}
	return ms
}

// up is a healthy member that follows leader in term 2, at index.
func up(id, leader MemberID, index uint64) MemberStatus {
	return MemberStatus{Member: Member{ID: id}, Answered: true, Healthy: true, Leader: leader, RaftTerm: 2, RaftIndex: index, RaftAppliedIndex: index}
}

// down is a member that did not answer.
func down(id MemberID) MemberStatus {
	return MemberStatus{Member: Member{ID: id}, Err: errors.New("connection refused")}
}

func statuses(s ...MemberStatus) []MemberStatus { return s }

func TestQuorum(t *testing.T) {
	g := NewWithT(t)
	for voters, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4} {
		g.Expect(Quorum(voters)).To(Equal(want), "%d voters", voters)
	}
}

func TestHealthyQuorum(t *testing.T) {
	tests := []struct {
		name     string
		members  []Member
		statuses []MemberStatus
		want     bool
	}{
		{name: "all of three", members: voters(a, b, c), statuses: statuses(up(a, a, 9), up(b, a, 9), up(c, a, 9)), want: true},
		{name: "two of three", members: voters(a, b, c), statuses: statuses(up(a, a, 9), up(b, a, 9), down(c)), want: true},
		{name: "one of three", members: voters(a, b, c), statuses: statuses(up(a, a, 9), down(b), down(c)), want: false},
		{name: "a member without a status counts as unhealthy", members: voters(a, b, c), statuses: statuses(up(a, a, 9)), want: false},
		{name: "two of four", members: voters(a, b, c, d), statuses: statuses(up(a, a, 9), up(b, a, 9), down(c), down(d)), want: false},
		{name: "a healthy learner does not vote", members: append(voters(a, b), learner(l)), statuses: statuses(up(a, a, 9), down(b), up(l, a, 9)), want: false},
		{name: "statuses of members not in the list do not count", members: voters(a, b, c), statuses: statuses(up(a, a, 9), up(d, a, 9), up(e, a, 9)), want: false},
		{name: "no members", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(HealthyQuorum(tt.members, tt.statuses)).To(Equal(tt.want))
		})
	}
}

func TestLeader(t *testing.T) {
	stale := up(c, c, 5)
	stale.RaftTerm = 1
	unanswered := down(d)
	unanswered.Leader = d // never set by Status; must not count anyway
	noLeader := up(e, 0, 5)
	noLeader.RaftTerm = 3

	tests := []struct {
		name     string
		statuses []MemberStatus
		want     MemberID
		wantOK   bool
	}{
		{name: "all agree", statuses: statuses(up(a, b, 9), up(b, b, 9)), want: b, wantOK: true},
		{name: "the newest term wins over a stale member", statuses: statuses(stale, up(a, b, 9)), want: b, wantOK: true},
		{name: "members that did not answer do not count", statuses: statuses(unanswered), wantOK: false},
		{name: "a newer term without a leader says nothing", statuses: statuses(noLeader, up(a, b, 9)), want: b, wantOK: true},
		{name: "nobody knows", statuses: statuses(down(a), noLeader), wantOK: false},
		{name: "no statuses", wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, ok := Leader(tt.statuses)
			g.Expect(ok).To(Equal(tt.wantOK))
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestLearnerCaughtUp(t *testing.T) {
	leader := up(a, a, 100)
	at := func(applied uint64) MemberStatus {
		s := up(l, a, applied)
		s.RaftIndex = applied + 5 // committed runs ahead of applied
		return s
	}
	otherLeader := at(100)
	otherLeader.Leader = b
	follower := up(b, a, 100)

	tests := []struct {
		name            string
		learner, leader MemberStatus
		want            bool
	}{
		{name: "level with the leader", learner: at(100), leader: leader, want: true},
		{name: "at the threshold", learner: at(90), leader: leader, want: true},
		{name: "below the threshold", learner: at(89), leader: leader, want: false},
		{name: "a learner that has applied nothing", learner: at(0), leader: leader, want: false},
		{name: "the learner follows another leader", learner: otherLeader, leader: leader, want: false},
		{name: "the leader is not the leader by its own account", learner: at(100), leader: follower, want: false},
		{name: "the learner did not answer", learner: down(l), leader: leader, want: false},
		{name: "the leader did not answer", learner: at(100), leader: down(a), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(LearnerCaughtUp(tt.learner, tt.leader)).To(Equal(tt.want))
		})
	}
}

func TestCanAddLearner(t *testing.T) {
	tests := []struct {
		name     string
		members  []Member
		statuses []MemberStatus
		wantErr  error
		wantMsg  string
	}{
		{name: "a whole, healthy cluster", members: voters(a, b, c), statuses: statuses(up(a, a, 9), up(b, a, 9), up(c, a, 9))},
		{name: "one voter", members: voters(a), statuses: statuses(up(a, a, 9))},
		{
			name: "a learner is pending", members: append(voters(a, b, c), learner(l)),
			statuses: statuses(up(a, a, 9), up(b, a, 9), up(c, a, 9), up(l, a, 9)),
			wantErr:  ErrLearnerPending, wantMsg: "m1 (1) must be promoted or removed first",
		},
		{
			name: "a voter is down", members: voters(a, b, c), statuses: statuses(up(a, a, 9), up(b, a, 9), down(c)),
			wantErr: ErrUnhealthy, wantMsg: "voting member mc (c): connection refused",
		},
		{
			name: "a voter without a status", members: voters(a, b, c), statuses: statuses(up(a, a, 9), up(b, a, 9)),
			wantErr: ErrUnhealthy, wantMsg: "mc (c): its status is unknown",
		},
		{name: "no voters", wantErr: ErrUnhealthy, wantMsg: "no voting member"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := CanAddLearner(tt.members, tt.statuses)
			if tt.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(tt.wantErr))
			g.Expect(err.Error()).To(ContainSubstring(tt.wantMsg))
			g.Expect(Classify(err)).To(Equal(Transient))
		})
	}
}

func TestCanPromote(t *testing.T) {
	three := append(voters(a, b, c), learner(l))
	behind := up(l, a, 50)
	silent := down(l)
	leaderless := []MemberStatus{up(a, 0, 100), up(b, 0, 100), up(c, 0, 100), up(l, 0, 100)}
	tests := []struct {
		name     string
		members  []Member
		statuses []MemberStatus
		id       MemberID
		wantErr  error
		wantMsg  string
	}{
		{name: "caught up", members: three, statuses: statuses(up(a, a, 100), up(b, a, 100), up(c, a, 100), up(l, a, 95)), id: l},
		{name: "already a voter", members: voters(a, b, c), statuses: statuses(up(a, a, 100)), id: b},
		{name: "not a member", members: three, id: d, wantErr: ErrMemberNotFound},
		{
			name: "behind", members: three, statuses: statuses(up(a, a, 100), up(b, a, 100), up(c, a, 100), behind), id: l,
			wantErr: ErrLearnerNotReady, wantMsg: "applied index 50, and needs 90% of the leader's 100",
		},
		{
			name: "the learner does not answer", members: three, statuses: statuses(up(a, a, 100), up(b, a, 100), up(c, a, 100), silent), id: l,
			wantErr: ErrLearnerNotReady, wantMsg: "has not answered: connection refused",
		},
		{name: "no leader", members: three, statuses: leaderless, id: l, wantErr: ErrNoLeader},
		{
			name: "the leader's status is missing", members: three, statuses: statuses(up(b, a, 100), up(c, a, 100), up(l, a, 100)), id: l,
			wantErr: ErrNoLeader,
		},
		{
			name: "no healthy quorum to commit it", members: three, statuses: statuses(up(a, a, 100), down(b), down(c), up(l, a, 100)), id: l,
			wantErr: ErrQuorumAtRisk, wantMsg: "1 of 3 voting members are healthy",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := CanPromote(tt.members, tt.statuses, tt.id)
			if tt.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(tt.wantErr))
			g.Expect(err.Error()).To(ContainSubstring(tt.wantMsg))
		})
	}
}

func TestCanRemove(t *testing.T) {
	healthy3 := statuses(up(a, a, 9), up(b, a, 9), up(c, a, 9))
	tests := []struct {
		name     string
		members  []Member
		statuses []MemberStatus
		id       MemberID
		wantErr  error
		wantMsg  string
	}{
		{name: "a follower of a healthy three", members: voters(a, b, c), statuses: healthy3, id: b},
		{name: "a dead follower of three: the replacement case", members: voters(a, b, c), statuses: statuses(up(a, a, 9), up(b, a, 9), down(c)), id: c},
		{name: "a follower of a healthy two", members: voters(a, b), statuses: statuses(up(a, a, 9), up(b, a, 9)), id: b},
		{name: "a learner, even one that is down", members: append(voters(a, b, c), learner(l)), statuses: statuses(up(a, a, 9), down(b), up(c, a, 9), down(l)), id: l},
		{name: "a dead member of five with another dead", members: voters(a, b, c, d, e), statuses: statuses(up(a, a, 9), up(b, a, 9), up(c, a, 9), down(d), down(e)), id: e},
		{name: "not a member", members: voters(a, b, c), statuses: healthy3, id: d, wantErr: ErrMemberNotFound},
		{
			name: "the leader", members: voters(a, b, c), statuses: healthy3, id: a,
			wantErr: ErrIsLeader, wantMsg: "ma (a) leads the cluster; move the leadership",
		},
		{
			name: "a voter while a learner is pending", members: append(voters(a, b, c), learner(l)),
			statuses: statuses(up(a, a, 9), up(b, a, 9), up(c, a, 9), up(l, a, 9)), id: c,
			wantErr: ErrLearnerPending, wantMsg: "m1 (1) must be promoted or removed before mc (c) is removed",
		},
		{
			name: "a healthy follower while another is down", members: voters(a, b, c), statuses: statuses(up(a, a, 9), up(b, a, 9), down(c)), id: b,
			wantErr: ErrQuorumAtRisk, wantMsg: "would leave 1 healthy of 2 voting members, and a quorum is 2",
		},
		{
			name: "a healthy member of five with two down", members: voters(a, b, c, d, e), statuses: statuses(up(a, a, 9), up(b, a, 9), up(c, a, 9), down(d), down(e)), id: c,
			wantErr: ErrQuorumAtRisk, wantMsg: "would leave 2 healthy of 4 voting members, and a quorum is 3",
		},
		{
			name: "a dead member of two: the change cannot commit", members: voters(a, b), statuses: statuses(up(a, a, 9), down(b)), id: b,
			wantErr: ErrQuorumAtRisk, wantMsg: "1 of 2 voting members are healthy, and a quorum is 2",
		},
		{
			name: "the last voter", members: voters(a), statuses: statuses(up(a, b, 9)), id: a,
			wantErr: ErrQuorumAtRisk, wantMsg: "the last voting member",
		},
		{
			name: "without statuses nothing is known to be healthy", members: voters(a, b, c), id: c,
			wantErr: ErrQuorumAtRisk, wantMsg: "0 of 3",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := CanRemove(tt.members, tt.statuses, tt.id)
			if tt.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(tt.wantErr))
			g.Expect(err.Error()).To(ContainSubstring(tt.wantMsg))
		})
	}
}

func TestNextLeader(t *testing.T) {
	tests := []struct {
		name     string
		members  []Member
		statuses []MemberStatus
		leaving  MemberID
		want     MemberID
		wantErr  error
	}{
		{name: "the one furthest along", members: voters(a, b, c), statuses: statuses(up(a, a, 9), up(b, a, 7), up(c, a, 8)), leaving: a, want: c},
		{name: "the lowest ID of equals", members: voters(a, b, c), statuses: statuses(up(a, a, 9), up(c, a, 9), up(b, a, 9)), leaving: a, want: b},
		{name: "never the one leaving, even when furthest", members: voters(a, b, c), statuses: statuses(up(a, a, 9), up(b, a, 1), up(c, a, 2)), leaving: c, want: a},
		{name: "never a learner or an unhealthy member", members: append(voters(a, b, c), learner(l)), statuses: statuses(up(a, a, 9), down(b), up(c, a, 3), up(l, a, 9)), leaving: a, want: c},
		{name: "statuses of members not in the list do not count", members: voters(a, b), statuses: statuses(up(a, a, 9), down(b), up(d, a, 9)), leaving: a, wantErr: ErrUnhealthy},
		{name: "nobody", members: voters(a, b), statuses: statuses(up(a, a, 9), down(b)), leaving: a, wantErr: ErrUnhealthy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := NextLeader(tt.members, tt.statuses, tt.leaving)
			if tt.wantErr != nil {
				g.Expect(err).To(MatchError(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestCanRestart(t *testing.T) {
	healthy3 := statuses(up(a, a, 9), up(b, a, 9), up(c, a, 9))
	tests := []struct {
		name     string
		members  []Member
		statuses []MemberStatus
		id       MemberID
		wantErr  error
		wantMsg  string
	}{
		{name: "a follower of a healthy three", members: voters(a, b, c), statuses: healthy3, id: c},
		{name: "the leader of a healthy three: the caller moves the leadership first", members: voters(a, b, c), statuses: healthy3, id: a},
		{name: "a dead member of three costs nothing", members: voters(a, b, c), statuses: statuses(up(a, a, 9), up(b, a, 9), down(c)), id: c},
		{name: "a dead member of five with another dead", members: voters(a, b, c, d, e), statuses: statuses(up(a, a, 9), up(b, a, 9), up(c, a, 9), down(d), down(e)), id: e},
		{name: "the lone member", members: voters(a), statuses: statuses(up(a, a, 9)), id: a},
		{name: "a follower of a healthy two", members: voters(a, b), statuses: statuses(up(a, a, 9), up(b, a, 9)), id: b},
		{name: "the dead member of two", members: voters(a, b), statuses: statuses(up(a, a, 9), down(b)), id: b},
		{
			name: "a healthy follower while another is down", members: voters(a, b, c), statuses: statuses(up(a, a, 9), up(b, a, 9), down(c)), id: b,
			wantErr: ErrQuorumAtRisk, wantMsg: "would leave 1 healthy of 3 voting members, and a quorum is 2",
		},
		{
			name: "a dead member of three with another dead: no quorum to come back to", members: voters(a, b, c), statuses: statuses(up(a, a, 9), down(b), down(c)), id: c,
			wantErr: ErrQuorumAtRisk, wantMsg: "would leave 1 healthy of 3",
		},
		{
			name: "the healthy member of two while the other is down", members: voters(a, b), statuses: statuses(up(a, a, 9), down(b)), id: a,
			wantErr: ErrUnhealthy, wantMsg: "1 of 2 voting members are healthy",
		},
		{
			name: "a voter while a learner is pending", members: append(voters(a, b, c), learner(l)),
			statuses: statuses(up(a, a, 9), up(b, a, 9), up(c, a, 9), up(l, a, 9)), id: c,
			wantErr: ErrLearnerPending, wantMsg: "must be promoted or removed before mc (c) restarts",
		},
		{name: "no leader", members: voters(a, b, c), statuses: statuses(down(a), down(b), down(c)), id: c, wantErr: ErrNoLeader},
		{name: "not a member", members: voters(a, b, c), statuses: healthy3, id: d, wantErr: ErrMemberNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := CanRestart(tt.members, tt.statuses, tt.id)
			if tt.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(tt.wantErr))
			g.Expect(err.Error()).To(ContainSubstring(tt.wantMsg))
		})
	}
}

func TestCaughtUp(t *testing.T) {
	g := NewWithT(t)
	leader := up(a, a, 5000)
	g.Expect(CaughtUp(up(b, a, 5000), leader)).To(BeTrue())
	g.Expect(CaughtUp(up(b, a, 5000-CatchUpSlack), leader)).To(BeTrue())
	g.Expect(CaughtUp(up(b, a, 5000-CatchUpSlack-1), leader)).To(BeFalse())
	g.Expect(CaughtUp(up(b, c, 5000), leader)).To(BeFalse(), "follows another leader")
	g.Expect(CaughtUp(down(b), leader)).To(BeFalse())
	g.Expect(CaughtUp(up(b, a, 5000), up(a, c, 5000))).To(BeFalse(), "the leader does not say it leads")
}
