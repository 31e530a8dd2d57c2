package etcdcluster

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcd"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// member is member i of testCluster, healthy, following the leader lead
// (an ordinal), at raft index 100.
func member(i, lead int) memberView {
	c := testCluster(nil)
	name := memberName(c, i)
	id := etcd.MemberID(0x100 + i)
	return memberView{
		MemberStatus: etcd.MemberStatus{
			Member:   etcd.Member{ID: id, Name: name, PeerURLs: []string{peerURL(c, name)}, ClientURLs: []string{memberClientURL(c, name)}},
			Answered: true, Healthy: true, Leader: etcd.MemberID(0x100 + lead),
			RaftTerm: 2, RaftIndex: 100, RaftAppliedIndex: 100,
		},
		Name: name, Ordinal: i,
	}
}

// sick is member i, unhealthy since the given time.
func sick(i int, since time.Time) memberView {
	m := member(i, 0)
	m.Answered, m.Healthy, m.Leader, m.Err = false, false, 0, errors.New("connection refused")
	m.UnhealthySince = since
	return m
}

// learnerAt is a learner at ordinal i; started and caught up when applied
// is 100.
func learnerAt(i int, started bool, applied uint64) memberView {
	m := member(i, 0)
	m.IsLearner = true
	m.RaftAppliedIndex = applied
	if !started {
		m.Member.Name, m.ClientURLs = "", nil
		m.Answered, m.Healthy, m.Leader = false, false, 0
	}
	return m
}

// marked is m with its volume claim marked with its member ID.
func marked(m memberView) memberView {
	m.Marked = true
	return m
}

// stuck is m, unhealthy since the given time.
func stuck(m memberView, since time.Time) memberView {
	m.UnhealthySince = since
	return m
}

func TestPlanMembers(t *testing.T) {
	five := func(s *etcdv1alpha1.EtcdClusterSpec) { s.Replicas = ptr.To[int32](5) }
	one := func(s *etcdv1alpha1.EtcdClusterSpec) { s.Replicas = ptr.To[int32](1) }
	manual := func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.MemberReplacement.Policy = etcdv1alpha1.ReplacementManual
	}
	short := func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.MemberReplacement.UnhealthyFor = &metav1.Duration{Duration: 30 * time.Second}
	}
	cases := []struct {
		name    string
		spec    func(*etcdv1alpha1.EtcdClusterSpec)
		members []memberView
		kind    stepKind
		subject string // the member acted on, or the new member's name
		to      etcd.MemberID
	}{
		{name: "matches the spec", members: []memberView{member(0, 0), member(1, 0), member(2, 0)}, kind: stepNone},
		{name: "scale out adds the lowest free ordinal", spec: five,
			members: []memberView{member(0, 0), member(1, 0), member(2, 0)}, kind: stepAddLearner, subject: "main-3"},
		{name: "a gap is filled first", spec: five,
			members: []memberView{member(0, 0), member(2, 0), member(3, 0)}, kind: stepAddLearner, subject: "main-1"},
		{name: "no learner while a voter is unhealthy", spec: five,
			members: []memberView{member(0, 0), member(1, 0), sick(2, t0)}, kind: stepWait},
		{name: "a caught-up learner is promoted", spec: five,
			members: []memberView{member(0, 0), member(1, 0), member(2, 0), marked(learnerAt(3, true, 100))}, kind: stepPromote, subject: "main-3"},
		{name: "a caught-up learner waits for its volume claim's mark", spec: five,
			members: []memberView{member(0, 0), member(1, 0), member(2, 0), learnerAt(3, true, 100)}, kind: stepWait, subject: "main-3"},
		{name: "a learner that lags is waited for", spec: five,
			members: []memberView{member(0, 0), member(1, 0), member(2, 0), learnerAt(3, true, 10)}, kind: stepWait, subject: "main-3"},
		{name: "a learner that has not started is waited for", spec: five,
			members: []memberView{member(0, 0), member(1, 0), member(2, 0), learnerAt(3, false, 0)}, kind: stepWait, subject: "main-3"},
		{name: "one learner at a time, even with members missing", spec: five,
			members: []memberView{member(0, 0), member(1, 0), member(2, 0), learnerAt(3, false, 0)}, kind: stepWait},
		{name: "a learner that never joins is removed after the deadline", spec: five,
			members: []memberView{member(0, 0), member(1, 0), member(2, 0), stuck(learnerAt(3, false, 0), t0.Add(-5*time.Minute))}, kind: stepRemove, subject: "main-3"},
		{name: "a learner is given until the deadline", spec: five,
			members: []memberView{member(0, 0), member(1, 0), member(2, 0), stuck(learnerAt(3, false, 0), t0.Add(-4*time.Minute))}, kind: stepWait, subject: "main-3"},
		{name: "a learner the spec no longer wants is removed",
			members: []memberView{member(0, 0), member(1, 0), member(2, 0), learnerAt(3, false, 0)}, kind: stepRemove, subject: "main-3"},
		{name: "scale in removes the highest ordinal",
			members: []memberView{member(0, 0), member(1, 0), member(2, 0), member(3, 0), member(4, 0)}, kind: stepRemove, subject: "main-4"},
		{name: "scale in moves the leadership away first", spec: one,
			members: []memberView{member(0, 1), member(1, 1)}, kind: stepMoveLeader, subject: "main-1", to: 0x100},
		{name: "scale in may remove a healthy member when the rest keep a quorum",
			members: []memberView{member(0, 0), sick(1, t0), member(2, 0), member(3, 0)}, kind: stepRemove, subject: "main-3"},
		{name: "scale in never breaks quorum",
			members: []memberView{member(0, 0), sick(1, t0), sick(2, t0), member(3, 0)}, kind: stepWait, subject: "main-3"},
		{name: "an unhealthy member is left alone before the threshold",
			members: []memberView{member(0, 0), member(1, 0), sick(2, t0.Add(-4*time.Minute))}, kind: stepNone},
		{name: "an unhealthy member is replaced after the threshold",
			members: []memberView{member(0, 0), member(1, 0), sick(2, t0.Add(-5*time.Minute))}, kind: stepReplace, subject: "main-2"},
		{name: "the threshold is the spec's", spec: short,
			members: []memberView{member(0, 0), member(1, 0), sick(2, t0.Add(-30*time.Second))}, kind: stepReplace, subject: "main-2"},
		{name: "the longest unhealthy is replaced first", spec: five,
			members: []memberView{member(0, 0), member(1, 0), member(2, 0), sick(3, t0.Add(-6*time.Minute)), sick(4, t0.Add(-9*time.Minute))}, kind: stepReplace, subject: "main-4"},
		{name: "no replacement that would lose quorum",
			members: []memberView{member(0, 0), sick(1, t0.Add(-time.Hour)), sick(2, t0.Add(-time.Hour))}, kind: stepWait},
		{name: "Manual policy replaces nothing", spec: manual,
			members: []memberView{member(0, 0), member(1, 0), sick(2, t0.Add(-time.Hour))}, kind: stepNone},
		{name: "a single member is never replaced", spec: one,
			members: []memberView{sick(0, t0.Add(-time.Hour))}, kind: stepWait},
		{name: "replacement goes before scale out", spec: five,
			members: []memberView{member(0, 0), member(1, 0), sick(2, t0.Add(-time.Hour))}, kind: stepReplace, subject: "main-2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := planMembers(testCluster(tc.spec), tc.members, t0)
			g.Expect(got.kind).To(Equal(tc.kind), got.message)
			switch tc.kind {
			case stepAddLearner:
				g.Expect(memberName(testCluster(nil), got.ordinal)).To(Equal(tc.subject))
			case stepNone:
			default:
				if tc.subject != "" {
					g.Expect(got.member.Name).To(Equal(tc.subject), got.message)
				}
			}
			if tc.to != 0 {
				g.Expect(got.to).To(Equal(tc.to))
			}
			if tc.kind != stepNone {
				g.Expect(got.message).NotTo(BeEmpty())
				g.Expect(got.reason).NotTo(BeEmpty())
			}
		})
	}
}

func TestStatefulSetSizeAndBootstrap(t *testing.T) {
	g := NewWithT(t)
	members := []memberView{member(2, 0), member(0, 0), learnerAt(3, false, 0)}
	g.Expect(statefulSetSize(members)).To(Equal(int32(4)))
	g.Expect(bootstrapOf(members)).To(Equal(Bootstrap{Members: []string{"main-0", "main-2", "main-3"}, State: "existing"}))
	g.Expect(statefulSetSize(nil)).To(Equal(int32(0)))
}

func TestMemberNames(t *testing.T) {
	g := NewWithT(t)
	c := testCluster(nil)
	for _, tc := range []struct {
		name    string
		ordinal int
		ok      bool
	}{{"main-0", 0, true}, {"main-12", 12, true}, {"main-01", 0, false}, {"main-", 0, false}, {"other-1", 0, false}, {"main-x", 0, false}} {
		i, ok := memberOrdinal(c, tc.name)
		g.Expect(ok).To(Equal(tc.ok), tc.name)
		g.Expect(i).To(Equal(tc.ordinal), tc.name)
	}
	name, ok := memberNameOfPeerURL(c, peerURL(c, "main-4"))
	g.Expect(ok).To(BeTrue())
	g.Expect(name).To(Equal("main-4"))
	_, ok = memberNameOfPeerURL(c, "https://main-4.other.db.svc:2380")
	g.Expect(ok).To(BeFalse())
}

func TestViewsOfTimesIllHealth(t *testing.T) {
	g := NewWithT(t)
	c := testCluster(nil)
	earlier := metav1.NewTime(t0.Add(-time.Minute))
	c.Status.Members = []etcdv1alpha1.Member{
		{Name: "main-1", ID: etcd.MemberID(0x101).String(), UnhealthySince: &earlier},
		{Name: "main-2", ID: "999", UnhealthySince: &earlier}, // another member of that name
	}
	statuses := []etcd.MemberStatus{member(0, 0).MemberStatus, sick(1, time.Time{}).MemberStatus, sick(2, time.Time{}).MemberStatus, learnerAt(3, false, 0).MemberStatus}
	views := viewsOf(c, statuses, t0)
	g.Expect(views).To(HaveLen(4))
	g.Expect(views[0].UnhealthySince.IsZero()).To(BeTrue())
	g.Expect(views[1].UnhealthySince).To(Equal(earlier.Time), "the spell goes on")
	g.Expect(views[2].UnhealthySince).To(Equal(t0), "a new member starts a new spell")
	g.Expect(views[3].Name).To(Equal("main-3"), "a learner's name comes from its peer URL")
	g.Expect(views[3].Ordinal).To(Equal(3))
	g.Expect(views[3].UnhealthySince).To(Equal(t0), "a learner is timed from when Tend first saw it")
}

func TestHealthRequeue(t *testing.T) {
	g := NewWithT(t)
	c := testCluster(nil)
	g.Expect(healthRequeue(c, []memberView{member(0, 0), member(1, 0)}, t0)).To(Equal(requeueIdle), "healthy members, far from the quota")
	full := member(1, 0)
	full.DBSize = quotaOf(c) * 3 / 4
	g.Expect(healthRequeue(c, []memberView{member(0, 0), full}, t0)).To(Equal(requeueSteady), "a database at three quarters of the quota")
	full.DBSize--
	g.Expect(healthRequeue(c, []memberView{member(0, 0), full}, t0)).To(Equal(requeueIdle), "just below three quarters")
	alarm := member(1, 0)
	alarm.Errors = []string{"memberID:257 alarm:NOSPACE"}
	g.Expect(healthRequeue(c, []memberView{member(0, 0), alarm}, t0)).To(Equal(requeueSteady), "an alarm")
	g.Expect(healthRequeue(c, []memberView{member(0, 0), learnerAt(1, true, 100)}, t0)).To(Equal(requeueSteady), "a learner")
	g.Expect(healthRequeue(c, nil, t0)).To(Equal(requeueSteady), "no member seen")
	g.Expect(healthRequeue(c, []memberView{sick(1, t0)}, t0)).To(Equal(requeueUnreachable))
	g.Expect(healthRequeue(c, []memberView{sick(1, t0.Add(-5*time.Minute+time.Second))}, t0)).To(Equal(time.Second))
}

func TestMarkDataLoss(t *testing.T) {
	g := NewWithT(t)
	healthy, down := member(0, 0), sick(1, t0)
	fresh := member(2, 0)
	pending := learnerAt(3, false, 0)
	last := []etcdv1alpha1.Member{
		{Name: "main-0", ID: healthy.ID.String(), VolumeUID: "pvc-0"},
		{Name: "main-1", ID: down.ID.String(), VolumeUID: "pvc-1"},
		{Name: "main-3", ID: "123", VolumeUID: "pvc-3-old"}, // a member of that name before
	}
	data := memberData{holders: map[string]types.UID{"main-0": "pvc-0", "main-1": "pvc-1-new", "main-2": "pvc-2", "main-3": "pvc-3"}}
	views := markDataLoss([]memberView{healthy, down, fresh, pending}, last, data)

	g.Expect(views[0].DataHolder).To(Equal(types.UID("pvc-0")))
	g.Expect(views[0].DataLost).To(BeFalse(), "same volume")
	g.Expect(views[1].DataHolder).To(Equal(types.UID("pvc-1")), "the record is kept")
	g.Expect(views[1].DataLost).To(BeTrue(), "the volume it had is gone")
	g.Expect(views[2].DataHolder).To(Equal(types.UID("pvc-2")), "first seen healthy: recorded")
	g.Expect(views[3].DataHolder).To(BeEmpty(), "not healthy yet, and the old record is another member's")
	g.Expect(views[3].DataLost).To(BeFalse())

	// A claim being deleted, or not made yet, proves nothing.
	views = markDataLoss([]memberView{member(1, 0)}, last[1:2], memberData{holders: map[string]types.UID{}})
	g.Expect(views[0].DataLost).To(BeFalse())
}

// TestMarkDataLossWithoutTheStatus: the claims' marks tell a lost volume
// when the status that recorded the old one is gone or stale.
func TestMarkDataLossWithoutTheStatus(t *testing.T) {
	formed := t0
	cases := []struct {
		name    string
		member  memberView
		mark    string
		created time.Time
		formed  time.Time
		lost    bool
	}{
		{name: "a voter on a new, unmarked claim made after the cluster formed", member: member(1, 0), created: formed.Add(time.Hour), formed: formed, lost: true},
		{name: "a voter on its marked claim", member: member(1, 0), mark: member(1, 0).ID.String(), created: formed.Add(time.Hour), formed: formed},
		{name: "a first member not yet marked, its claim made before the cluster formed", member: member(1, 0), created: formed.Add(-time.Minute), formed: formed},
		{name: "a new cluster without an init Job yet", member: member(1, 0), created: formed.Add(time.Hour)},
		{name: "a learner on a new claim", member: learnerAt(3, true, 100), created: formed.Add(time.Hour), formed: formed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			data := memberData{
				holders: map[string]types.UID{tc.member.Name: "pvc-new"},
				marks:   map[string]string{tc.member.Name: tc.mark},
				created: map[string]time.Time{tc.member.Name: tc.created},
				formed:  tc.formed,
			}
			// No status: lost, or written by a pass that never saw the old claim.
			views := markDataLoss([]memberView{tc.member}, nil, data)
			g.Expect(views[0].DataLost).To(Equal(tc.lost))
			g.Expect(views[0].Marked).To(Equal(tc.mark != ""))
		})
	}
}

func TestPlanReplacesLostDataAtOnce(t *testing.T) {
	g := NewWithT(t)
	lost := member(2, 0) // answers, from an empty data directory
	lost.DataLost = true
	got := planMembers(testCluster(nil), []memberView{member(0, 0), member(1, 0), lost}, t0)
	g.Expect(got.kind).To(Equal(stepReplace))
	g.Expect(got.member.Name).To(Equal("main-2"))
	g.Expect(got.message).To(ContainSubstring("lost its data"))

	manual := testCluster(func(s *etcdv1alpha1.EtcdClusterSpec) { s.MemberReplacement.Policy = etcdv1alpha1.ReplacementManual })
	g.Expect(planMembers(manual, []memberView{member(0, 0), member(1, 0), lost}, t0).kind).To(Equal(stepNone), "Manual reports, and leaves it")
}

func TestUntilTickLooksOncePerInterval(t *testing.T) {
	g := NewWithT(t)
	r := &Reconciler{MemberChangeInterval: 10 * time.Second}
	a, b := types.NamespacedName{Namespace: "x", Name: "a"}, types.NamespacedName{Namespace: "x", Name: "b"}
	g.Expect(r.untilTick(a, t0)).To(BeZero(), "the first look is due at once")
	g.Expect(r.untilTick(a, t0.Add(3*time.Second))).To(Equal(7*time.Second), "passes in between wait")
	g.Expect(r.untilTick(b, t0.Add(3*time.Second))).To(BeZero(), "per cluster")
	g.Expect(r.untilTick(a, t0.Add(10*time.Second))).To(BeZero())
	g.Expect(r.untilTick(a, t0.Add(11*time.Second))).To(Equal(9*time.Second), "the next look is an interval after the last")
}
