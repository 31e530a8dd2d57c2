package agent

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tend-dev/tend/internal/etcd"
)

// ErrNoMember: no member can give a snapshot, or answer for the live
// cluster: none is healthy. A retry may find one.
var ErrNoMember = errors.New("no healthy voting member")

// ChooseMember picks the member a backup takes its snapshot from: among the
// healthy voting members, the one with the highest revision, which has
// applied the most; of equals, a follower rather than the leader, which
// has the most to do; of those, the lowest ID, so that the choice is
// stable. Learners are left out: etcd serves them no snapshot.
func ChooseMember(statuses []etcd.MemberStatus) (etcd.MemberStatus, error) {
	var best etcd.MemberStatus
	found := false
	var why []string
	for _, s := range statuses {
		switch {
		case s.IsLearner:
			why = append(why, s.String()+": a learner")
			continue
		case !s.Healthy || s.Endpoint == "":
			why = append(why, fmt.Sprintf("%s: %v", s.Member, s.Err))
			continue
		}
		if !found || better(s, best) {
			best, found = s, true
		}
	}
	if !found {
		return etcd.MemberStatus{}, fmt.Errorf("%w among %d members (%s)", ErrNoMember, len(statuses), strings.Join(why, "; "))
	}
	return best, nil
}

// better tells whether a is a better source than b.
func better(a, b etcd.MemberStatus) bool {
	if a.Revision != b.Revision {
		return a.Revision > b.Revision
	}
	if a.IsLeader() != b.IsLeader() {
		return !a.IsLeader()
	}
	return a.ID < b.ID
}

// memberNamed returns the healthy voting member named name.
func memberNamed(statuses []etcd.MemberStatus, name string) (etcd.MemberStatus, bool) {
	for _, s := range statuses {
		if s.Name == name && s.Healthy && !s.IsLearner && s.Endpoint != "" {
			return s, true
		}
	}
	return etcd.MemberStatus{}, false
}
