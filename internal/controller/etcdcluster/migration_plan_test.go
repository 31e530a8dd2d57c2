package etcdcluster

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/tend-dev/tend/internal/etcd"
)

func TestPlanMigration(t *testing.T) {
	c := testCluster(nil)
	old := func(i int) claimView {
		return claimView{name: pvcName(c, i), member: memberName(c, i), volume: "pv-old-" + memberName(c, i)}
	}
	three := func() []memberView { return []memberView{member(0, 0), member(1, 0), member(2, 0)} }
	ready := func(mut func(*migrationInput)) migrationInput {
		in := migrationInput{replicas: 3, migrate: []claimView{old(0), old(1), old(2)}, templateMatches: true,
			backup: backupDone, backupExists: true, backupName: "main-migrate-1", members: three()}
		if mut != nil {
			mut(&in)
		}
		return in
	}
	kept := func(member string) retainedVolume {
		return retainedVolume{name: "pv-old-" + member, member: member, policy: corev1.PersistentVolumeReclaimDelete}
	}
	tests := []struct {
		name    string
		in      migrationInput
		kind    migrationKind
		subject string // the member moved, or whose volume is released
		to      etcd.MemberID
		message string
	}{
		{name: "nothing to move, nothing kept", in: ready(func(in *migrationInput) { in.migrate = nil }), kind: migrateNone},
		{name: "the backup comes first", in: ready(func(in *migrationInput) { in.backupExists, in.backup = false, backupRunning }),
			kind: migrateBackup, message: "Taking EtcdBackup main-migrate-1"},
		{name: "the backup runs: wait", in: ready(func(in *migrationInput) { in.backup = backupRunning }),
			kind: migrateWait, message: "complete and be verified"},
		{name: "the backup failed: a person acts", in: ready(func(in *migrationInput) { in.backup, in.backupMsg = backupFailed, "disk full" }),
			kind: migrateBlocked, message: "disk full"},
		{name: "no such class: nothing starts, not even the backup", in: ready(func(in *migrationInput) { in.classMissing, in.backupExists = "fsat", false }),
			kind: migrateBlocked, message: "StorageClass fsat does not exist"},
		{name: "one member cannot move", in: ready(func(in *migrationInput) {
			in.replicas, in.members, in.migrate = 1, []memberView{member(0, 0)}, []claimView{old(0)}
		}), kind: migrateBlocked, message: "A one-member cluster"},
		{name: "the StatefulSet still makes old claims", in: ready(func(in *migrationInput) { in.templateMatches = false }), kind: migrateRemakeSet},
		{name: "the StatefulSet is being deleted: wait, do not delete it again", in: ready(func(in *migrationInput) { in.templateMatches, in.remaking = false, true }),
			kind: migrateWait, message: "Waiting for the StatefulSet to be deleted"},
		{name: "pods not adopted yet", in: ready(func(in *migrationInput) {
			in.unadopted, in.set, in.setAge = []string{"main-1"}, "ns/main", time.Minute
		}), kind: migrateWait, message: "adopt the member pods main-1"},
		{name: "pods not adopted for too long: a person looks", in: ready(func(in *migrationInput) {
			in.unadopted, in.set, in.setAge = []string{"main-0", "main-1"}, "ns/main", adoptionDeadline
		}), kind: migrateBlocked, message: "has not adopted main-0, main-1: Kubernetes' StatefulSet controller (kube-controller-manager) adopts the pods its selector matches. Check that it runs, and what kubectl describe statefulset -n ns main says"},
		{name: "a member is unhealthy: nobody moves", in: ready(func(in *migrationInput) { in.members = []memberView{member(0, 0), member(1, 0), sick(2, t0)} }),
			kind: migrateWait, message: "main-2 to be a healthy voter"},
		{name: "a learner is pending: nobody moves", in: ready(func(in *migrationInput) {
			in.members = []memberView{member(0, 0), member(1, 0), learnerAt(2, true, 100)}
		}), kind: migrateWait, message: "main-2 to be a healthy voter"},
		{name: "a member missing", in: ready(func(in *migrationInput) { in.members = []memberView{member(0, 0), member(1, 0)} }),
			kind: migrateWait, message: "its 3 members"},
		{name: "followers first, by ordinal", in: ready(nil), kind: migrateMember, subject: "main-1", message: "volume pv-old-main-1"},
		{name: "the leader is 2: 0 moves first", in: ready(func(in *migrationInput) {
			in.members = []memberView{member(0, 2), member(1, 2), member(2, 2)}
		}), kind: migrateMember, subject: "main-0"},
		{name: "only the leader is left: its leadership goes to a moved member", in: ready(func(in *migrationInput) {
			in.migrate = []claimView{old(0)}
			in.members[2].RaftAppliedIndex = 101 // ahead, but moved too; 1 moved as well
		}), kind: migrateMoveLeader, subject: "main-0", to: 0x102},
		{name: "a moved member is a healthy voter: its old volume is released first", in: ready(func(in *migrationInput) {
			in.migrate = []claimView{old(0), old(2)}
			in.retained = []retainedVolume{kept("main-1")}
		}), kind: migrateRelease, subject: "main-1"},
		{name: "a moved member is still a learner: its volume is kept, the next waits", in: ready(func(in *migrationInput) {
			in.migrate = []claimView{old(0), old(2)}
			in.members = []memberView{member(0, 0), learnerAt(1, true, 90), member(2, 0)}
			in.retained = []retainedVolume{kept("main-1")}
		}), kind: migrateWait, message: "main-1 to be a healthy voter"},
		{name: "a volume kept before its member left etcd is not released", in: ready(func(in *migrationInput) {
			in.retained = []retainedVolume{kept("main-1")}
		}), kind: migrateMember, subject: "main-1"},
		{name: "all moved, a volume kept for a learner", in: ready(func(in *migrationInput) {
			in.migrate = nil
			in.members = []memberView{member(0, 0), member(1, 0), learnerAt(2, true, 90)}
			in.retained = []retainedVolume{kept("main-2")}
		}), kind: migrateWait, message: "Keeping volumes pv-old-main-2 (of main-2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := planMigration(tt.in)
			g.Expect(got.kind).To(Equal(tt.kind), got.message)
			if tt.subject != "" {
				subject := got.member.Name
				if got.kind == migrateRelease {
					subject = got.volume.member
				}
				g.Expect(subject).To(Equal(tt.subject))
			}
			if tt.to != 0 {
				g.Expect(got.to).To(Equal(tt.to))
			}
			g.Expect(got.message).To(ContainSubstring(tt.message))
		})
	}
}
