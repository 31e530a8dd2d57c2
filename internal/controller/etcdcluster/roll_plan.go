package etcdcluster

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

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
				m.Name, since.UTC().Format(time.RFC3339), in.timeout, settleProblem(m))}
		}
		return rollAction{kind: rollWait, member: m, message: fmt.Sprintf(
			"Waiting for restarted member %s to become healthy and catch up (%s)", m.Name, settleProblem(m))}
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
	m := outdated[0]
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

// upgradePath is a minor-version upgrade that etcd supports, and what it
// needs first.
type upgradePath struct {
	fromMinor, toMinor int
	// minPatch is the lowest patch release of the older minor version
	// that may upgrade.
	minPatch int
	// noAuth: etcd cannot roll this upgrade with authentication on.
	noAuth bool
	// source is where etcd says so.
	source string
}

// upgradePaths are the minor-version upgrades Tend performs, as etcd's
// upgrade guides state them. A hop that is not here is refused: Tend's
// member builders know only these versions' settings.
var upgradePaths = []upgradePath{
	{fromMinor: 4, toMinor: 5, noAuth: true,
		source: "https://etcd.io/docs/v3.5/upgrades/upgrade_3_5/ (a rolling upgrade from 3.4 with auth enabled is not supported)"},
	{fromMinor: 5, toMinor: 6, minPatch: 32,
		source: "https://etcd.io/docs/v3.6/upgrades/upgrade_3_6/ (Upgrade checklists, Update 3.5: all members on 3.5.32 or later)"},
}

// semver is an etcd version's numbers.
type semver struct{ major, minor, patch int }

func parseVersion(v string) (semver, bool) {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) != 3 {
		return semver{}, false
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(strings.SplitN(p, "-", 2)[0])
		if err != nil {
			return semver{}, false
		}
		n[i] = x
	}
	return semver{n[0], n[1], n[2]}, true
}

func (v semver) String() string { return fmt.Sprintf("v%d.%d.%d", v.major, v.minor, v.patch) }

// checkUpgradePath allows moving members that run from (the oldest
// member's version) to the spec's version to: a patch change within a
// minor version, or one minor version up along upgradePaths from a recent
// enough patch. The error says which version to go to first.
func checkUpgradePath(from, to string, auth bool) error {
	f, ok1 := parseVersion(from)
	t, ok2 := parseVersion(to)
	if !ok1 || !ok2 {
		return fmt.Errorf("cannot read the versions %q and %q", from, to)
	}
	switch {
	case t.major != f.major:
		return fmt.Errorf("%s to %s changes the major version, which etcd does not support", f, t)
	case t.minor == f.minor:
		return nil
	case t.minor < f.minor:
		return fmt.Errorf("members run %s and etcd cannot downgrade a data directory to %s; restore a backup into a new cluster instead", f, t)
	case t.minor > f.minor+1:
		return fmt.Errorf("members run %s: upgrade to v%d.%d first, one minor version at a time", f, f.major, f.minor+1)
	}
	for _, p := range upgradePaths {
		if p.fromMinor != f.minor || p.toMinor != t.minor {
			continue
		}
		if f.patch < p.minPatch {
			return fmt.Errorf("members run %s: upgrade to v%d.%d.%d or later first, as etcd's upgrade guide requires (%s)",
				f, f.major, f.minor, p.minPatch, p.source)
		}
		if p.noAuth && auth {
			return fmt.Errorf("etcd cannot roll %s to %s with authentication on (%s)", f, t, p.source)
		}
		return nil
	}
	return fmt.Errorf("this Tend does not know the upgrade from v%d.%d to v%d.%d; use a Tend release that supports v%d.%d",
		f.major, f.minor, t.major, t.minor, t.major, t.minor)
}

// isMinorUpgrade tells whether moving from to to changes the minor version
// up.
func isMinorUpgrade(from, to string) bool {
	f, ok1 := parseVersion(from)
	t, ok2 := parseVersion(to)
	return ok1 && ok2 && (t.major > f.major || (t.major == f.major && t.minor > f.minor))
}
