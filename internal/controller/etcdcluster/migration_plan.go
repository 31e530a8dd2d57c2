package etcdcluster

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/tend-dev/tend/internal/etcd"
)

// A StatefulSet names its members' claims after its claim template, and a
// claim can be neither renamed nor moved to another class: a member moves
// onto a new claim only by leaving etcd and coming back empty, as a
// replaced member does. Its old claim must go for the new one to take its
// name, so Tend keeps the old claim's volume instead (reclaim policy
// Retain, marked for the cluster) until the member is a healthy voter
// again, then gives the volume back its own policy.

// retainedVolume is the PersistentVolume of a member's old claim, kept
// while the member moves.
type retainedVolume struct {
	name   string
	member string
	// policy is the reclaim policy to give back.
	policy corev1.PersistentVolumeReclaimPolicy
}

// adoptionDeadline is how long a remade StatefulSet may take to adopt the
// member pods before the migration says it is blocked: the StatefulSet
// controller adopts them in its first sync, within seconds.
const adoptionDeadline = 5 * time.Minute

// migrationInput is what the volume migration decides on.
type migrationInput struct {
	replicas int
	// migrate are the member claims that differ from the target (planVolumes).
	migrate []claimView
	// templateMatches: the StatefulSet's claim template asks for the
	// spec's class and size, so that a member's new claim has them;
	// remaking: the StatefulSet is being deleted to be made again.
	templateMatches bool
	remaking        bool
	// backup is the state of the migration's EtcdBackup; backupExists
	// tells whether there is one, backupName and backupMsg name it and
	// say why it failed.
	backup       backupState
	backupExists bool
	backupName   string
	backupMsg    string
	members      []memberView
	// unadopted are the member pods that no controller owns yet: the
	// StatefulSet was remade, and its controller adopts them. set names
	// it (namespace/name), setAge is how long ago it was made.
	unadopted []string
	set       string
	setAge    time.Duration
	retained  []retainedVolume
	// classMissing names the spec's StorageClass when it does not exist:
	// a member moved onto a claim of it would never start.
	classMissing string
}

// migrationKind is one step of the volume migration.
type migrationKind int

const (
	migrateNone       migrationKind = iota // every claim has the target, no volume is kept
	migrateWait                            // a step is due, but not safe yet
	migrateBlocked                         // a person must act
	migrateBackup                          // take the backup that comes first
	migrateRemakeSet                       // delete the StatefulSet, keeping its pods, to remake its claim template
	migrateMoveLeader                      // the leader is the last to move: hand its leadership away
	migrateMember                          // keep the member's volume, remove it, add it anew on a new claim
	migrateRelease                         // give a kept volume back its reclaim policy
)

// migrationStep is the one step of the volume migration a pass takes.
type migrationStep struct {
	kind migrationKind
	// member and claim are the member that moves and its old claim;
	// to the new leader of a move; volume the volume released.
	member  memberView
	claim   claimView
	to      etcd.MemberID
	volume  retainedVolume
	message string
}

// planMigration decides the next step of the volume migration:
//  1. a kept volume whose member is a healthy voter again, on a claim of
//     the target, is released (its reclaim policy given back);
//  2. nothing moves before the migration's backup is complete and
//     verified, and a one-member cluster cannot move at all;
//  3. the StatefulSet is remade with the target's claim template, and
//     its controller adopts the pods;
//  4. one member at a time moves, only while every member is a healthy
//     voter and etcd allows its removal: followers first, by ordinal;
//     the leader last, after its leadership went to a member already on
//     the target.
func planMigration(in migrationInput) migrationStep {
	moving := func(name string) bool {
		return slices.ContainsFunc(in.migrate, func(v claimView) bool { return v.member == name })
	}
	for _, v := range in.retained {
		m, ok := memberNamed(in.members, v.member)
		if ok && !m.IsLearner && m.Healthy && !moving(v.member) {
			return migrationStep{kind: migrateRelease, volume: v, member: m,
				message: fmt.Sprintf("%s is a healthy voter on its new volume claim: giving volume %s, its old one, back its reclaim policy %s", m.Name, v.name, v.policy)}
		}
	}
	if len(in.migrate) == 0 {
		if len(in.retained) == 0 {
			return migrationStep{kind: migrateNone}
		}
		var names []string
		for _, v := range in.retained {
			names = append(names, fmt.Sprintf("%s (of %s)", v.name, v.member))
		}
		return migrationStep{kind: migrateWait, message: "Keeping volumes " + strings.Join(names, ", ") + " until their members are healthy voters on their new claims"}
	}
	if in.classMissing != "" {
		return migrationStep{kind: migrateBlocked, message: fmt.Sprintf("No member moves: StorageClass %s does not exist, and a member moved onto a claim of it would never start. "+
			"Create it, or set spec.storage.storageClassName to a class that exists", in.classMissing)}
	}
	if in.replicas < 2 {
		return migrationStep{kind: migrateBlocked, message: "A one-member cluster cannot move onto new volume claims: its only member would leave with all the data. " +
			"Scale to three members first (spec.replicas), or restore a backup into a new EtcdCluster of the new class or size"}
	}
	switch {
	case !in.backupExists:
		return migrationStep{kind: migrateBackup, message: fmt.Sprintf("Taking EtcdBackup %s before the first member moves onto a new volume claim", in.backupName)}
	case in.backup == backupFailed:
		return migrationStep{kind: migrateBlocked, message: fmt.Sprintf("No member moved: the backup taken first, %s, failed (%s). Fix the cause and delete the EtcdBackup to take it again", in.backupName, in.backupMsg)}
	case in.backup == backupRunning:
		return migrationStep{kind: migrateWait, message: fmt.Sprintf("Waiting for EtcdBackup %s to complete and be verified before the first member moves", in.backupName)}
	}
	if in.remaking {
		return migrationStep{kind: migrateWait, message: "Waiting for the StatefulSet to be deleted, keeping its pods, to make it again with the new claim template"}
	}
	if !in.templateMatches {
		return migrationStep{kind: migrateRemakeSet, message: "Remaking the StatefulSet, keeping its pods, so that new member claims have the spec's class and size"}
	}
	if len(in.unadopted) > 0 {
		pods := strings.Join(in.unadopted, ", ")
		if in.setAge >= adoptionDeadline {
			ns, name, _ := strings.Cut(in.set, "/")
			return migrationStep{kind: migrateBlocked, message: fmt.Sprintf("StatefulSet %s was made again %s ago, keeping the member pods, and has not adopted %s: "+
				"Kubernetes' StatefulSet controller (kube-controller-manager) adopts the pods its selector matches. Check that it runs, and what kubectl describe statefulset -n %s %s says; "+
				"no member moves until every member pod is the StatefulSet's", name, in.setAge.Round(time.Second), pods, ns, name)}
		}
		return migrationStep{kind: migrateWait, message: "Waiting for the remade StatefulSet to adopt the member pods " + pods}
	}
	for _, m := range in.members {
		if m.IsLearner || !m.Healthy {
			return migrationStep{kind: migrateWait, message: fmt.Sprintf("Waiting for %s to be a healthy voter before the next member moves", m.Name)}
		}
	}
	if len(in.members) != in.replicas {
		return migrationStep{kind: migrateWait, message: fmt.Sprintf("Waiting for the cluster to have its %d members before the next one moves", in.replicas)}
	}

	claims := slices.Clone(in.migrate)
	slices.SortFunc(claims, func(a, b claimView) int {
		ma, _ := memberNamed(in.members, a.member)
		mb, _ := memberNamed(in.members, b.member)
		// The leader last.
		if ma.IsLeader() != mb.IsLeader() {
			if ma.IsLeader() {
				return 1
			}
			return -1
		}
		return cmp.Compare(ma.Ordinal, mb.Ordinal)
	})
	v := claims[0]
	m, ok := memberNamed(in.members, v.member)
	if !ok {
		return migrationStep{kind: migrateWait, message: fmt.Sprintf("Waiting for %s, whose claim %s must move, to be seen in etcd", v.member, v.name)}
	}
	all, statuses := split(in.members)
	if m.IsLeader() {
		to, err := moveTarget(in.members, m, moving)
		if err != nil {
			return migrationStep{kind: migrateWait, member: m, message: fmt.Sprintf("Cannot move %s yet: it leads, and %v", m.Name, err)}
		}
		return migrationStep{kind: migrateMoveLeader, member: m, to: to, claim: v,
			message: fmt.Sprintf("Moving the leadership away from %s, the last member to move onto a new volume claim", m.Name)}
	}
	if err := etcd.CanRemove(all, statuses, m.ID); err != nil {
		return migrationStep{kind: migrateWait, member: m, message: fmt.Sprintf("Cannot move %s yet: %v", m.Name, err)}
	}
	return migrationStep{kind: migrateMember, member: m, claim: v,
		message: fmt.Sprintf("Moving %s onto a new volume claim: it leaves etcd and comes back empty as a learner; volume %s of claim %s is kept until it is a healthy voter", m.Name, cmp.Or(v.volume, "(none)"), v.name)}
}

// moveTarget is the member the leadership goes to before the leader
// moves: a healthy voter already on the target, the one furthest along
// the log; any healthy voter when none is.
func moveTarget(members []memberView, leader memberView, moving func(string) bool) (etcd.MemberID, error) {
	var done []memberView
	for _, m := range members {
		if !moving(m.Name) {
			done = append(done, m)
		}
	}
	if len(done) > 0 {
		all, statuses := split(append(done, leader))
		if to, err := etcd.NextLeader(all, statuses, leader.ID); err == nil {
			return to, nil
		}
	}
	all, statuses := split(members)
	return etcd.NextLeader(all, statuses, leader.ID)
}

// memberNamed finds the member of that name.
func memberNamed(members []memberView, name string) (memberView, bool) {
	i := slices.IndexFunc(members, func(m memberView) bool { return m.Name == name })
	if i < 0 {
		return memberView{}, false
	}
	return members[i], true
}
