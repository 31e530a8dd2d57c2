package etcd

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

var epoch = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// at is s seconds after epoch.
func at(s float64) time.Time { return epoch.Add(time.Duration(s * float64(time.Second))) }

// m is a member: flags h healthy, l learner, L leader.
func m(name, id, flags string) etcdv1alpha1.Member {
	return etcdv1alpha1.Member{Name: name, ID: id, Healthy: strings.Contains(flags, "h"),
		Learner: strings.Contains(flags, "l"), Leader: strings.Contains(flags, "L")}
}

// st is an observation at s seconds: Available and Progressing as given,
// readyMembers counted from the members.
func st(s float64, avail, progressing bool, members ...etcdv1alpha1.Member) observation {
	cond := func(t string, v bool) metav1.Condition {
		c := metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: "R"}
		if v {
			c.Status = metav1.ConditionTrue
		}
		return c
	}
	o := observation{at: at(s), generation: 1, status: etcdv1alpha1.EtcdClusterStatus{
		ObservedGeneration: 1,
		Members:            members,
		Conditions: []metav1.Condition{
			cond(etcdv1alpha1.ConditionAvailable, avail), cond(etcdv1alpha1.ConditionProgressing, progressing),
		},
	}}
	o.status.ReadyMembers = int32(healthyVoters(&o.status))
	return o
}

func TestConvergedAndStable(t *testing.T) {
	for _, tc := range []struct {
		name              string
		o                 observation
		n                 int
		converged, stable bool
	}{
		{"three healthy voters, settled", st(0, true, false, m("a-0", "1", "hL"), m("a-1", "2", "h"), m("a-2", "3", "h")), 3, true, true},
		{"still progressing", st(0, true, true, m("a-0", "1", "hL"), m("a-1", "2", "h"), m("a-2", "3", "h")), 3, true, false},
		{"a learner is not a voter", st(0, true, true, m("a-0", "1", "hL"), m("a-1", "2", "h"), m("a-2", "3", "hl")), 3, false, false},
		{"an unhealthy member", st(0, true, false, m("a-0", "1", "hL"), m("a-1", "2", ""), m("a-2", "3", "h")), 3, false, false},
		{"not Available", st(0, false, false, m("a-0", "1", "hL"), m("a-1", "2", "h"), m("a-2", "3", "h")), 3, false, false},
		{"fewer members than wanted", st(0, true, false, m("a-0", "1", "hL"), m("a-1", "2", "h"), m("a-2", "3", "h")), 5, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(converged(&tc.o.status, tc.n)).To(Equal(tc.converged))
			g.Expect(stable(&tc.o, tc.n, 1)).To(Equal(tc.stable))
		})
	}
	o := st(0, true, false, m("a-0", "1", "hL"))
	NewWithT(t).Expect(stable(&o, 1, 2)).To(BeFalse(), "a newer generation than observed is not settled")
}

func TestReplaced(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    observation
		want bool
	}{
		{"back with a new ID", st(0, true, false, m("a-0", "1", "hL"), m("a-1", "9", "h"), m("a-2", "3", "h")), true},
		{"still the old ID", st(0, true, false, m("a-0", "1", "hL"), m("a-1", "2", "h"), m("a-2", "3", "h")), false},
		{"a learner yet", st(0, true, true, m("a-0", "1", "hL"), m("a-1", "9", "hl"), m("a-2", "3", "h")), false},
		{"removed, not yet added", st(0, true, true, m("a-0", "1", "hL"), m("a-2", "3", "h")), false},
		{"added without an ID yet", st(0, true, true, m("a-0", "1", "hL"), m("a-1", "", ""), m("a-2", "3", "h")), false},
	} {
		NewWithT(t).Expect(replaced(&tc.o.status, "a-1", "2", 3)).To(Equal(tc.want), tc.name)
	}
}

func TestFirstAfter(t *testing.T) {
	g := NewWithT(t)
	obs := []observation{st(1, true, false), st(2, false, false), st(3, true, false)}
	isAvailable := func(o *observation) bool { return available(&o.status) }
	o, ok := firstAfter(obs, at(0), isAvailable)
	g.Expect(ok).To(BeTrue())
	g.Expect(o.at).To(Equal(at(1)))
	o, ok = firstAfter(obs, at(1.5), isAvailable)
	g.Expect(ok).To(BeTrue())
	g.Expect(o.at).To(Equal(at(3)), "a state received before since does not count")
	_, ok = firstAfter(obs, at(4), isAvailable)
	g.Expect(ok).To(BeFalse())
}

func TestScaleSteps(t *testing.T) {
	g := NewWithT(t)
	three := []etcdv1alpha1.Member{m("a-0", "1", "hL"), m("a-1", "2", "h"), m("a-2", "3", "h")}
	obs := []observation{
		st(9, true, false, three...),
		st(11, true, true, append(three, m("a-3", "4", "l"))...),
		st(13, true, true, append(three, m("a-3", "4", "hl"))...),
		st(14, true, true, append(three, m("a-3", "4", ""))...),
		st(15, true, true, append(three, m("a-3", "4", "h"))...),
		st(17, true, true, append(three, m("a-3", "4", "h"), m("a-4", "5", "hl"))...),
		st(20, true, true, append(three, m("a-3", "4", "h"), m("a-4", "5", "h"))...),
	}
	got := scaleSteps(obs, at(10), at(20), []string{"a-3", "a-4"})
	g.Expect(got).To(Equal([]memberSteps{
		{name: "a-3", listed: time.Second, voter: 4 * time.Second, healthy: 5 * time.Second, seenOnce: true},
		{name: "a-4", listed: 7 * time.Second, voter: 10 * time.Second, healthy: 10 * time.Second, seenOnce: true},
	}))
}

func TestReplaceTimeline(t *testing.T) {
	since := metav1.NewTime(at(3))
	sick := m("a-1", "2", "")
	sick.UnhealthySince = &since
	obs := []observation{
		st(0, true, false, m("a-0", "1", "hL"), m("a-1", "2", "h"), m("a-2", "3", "h")),
		st(1, true, false, m("a-0", "1", "hL"), m("a-1", "2", "h"), m("a-2", "3", "h")),
		st(3.5, true, false, m("a-0", "1", "hL"), sick, m("a-2", "3", "h")),
		st(14, true, true, m("a-0", "1", "hL"), m("a-2", "3", "h")),
		st(15, true, true, m("a-0", "1", "hL"), m("a-1", "9", "l"), m("a-2", "3", "h")),
		st(20, true, true, m("a-0", "1", "hL"), m("a-1", "9", "h"), m("a-2", "3", "h")),
	}
	t.Run("from status alone", func(t *testing.T) {
		got := replaceTimeline(obs, nil, at(0.5), at(20), "a-1", "2")
		NewWithT(t).Expect(got).To(Equal(replaceTimes{unhealthy: at(3.5), acted: at(14), done: at(20), unhealthySince: at(3)}))
	})
	t.Run("an Event before the status shows the removal", func(t *testing.T) {
		evs := []event{
			{at: at(0.2), reason: eventReplacingMember}, // before the delete: another replacement
			{at: at(13.6), reason: eventReplacingMember},
			{at: at(13.8), reason: eventMemberRemoved},
		}
		got := replaceTimeline(obs, evs, at(0.5), at(20), "a-1", "2")
		NewWithT(t).Expect(got.acted).To(Equal(at(13.6)))
	})
	t.Run("faster than the watch: the parts stay in order", func(t *testing.T) {
		quick := []observation{obs[0], obs[5]}
		got := replaceTimeline(quick, nil, at(0.5), at(20), "a-1", "2")
		NewWithT(t).Expect(got).To(Equal(replaceTimes{unhealthy: at(20), acted: at(20), done: at(20)}))
	})
}

func TestCameBackUnreplaced(t *testing.T) {
	healthy := st(1, true, false, m("a-0", "1", "hL"), m("a-1", "2", "h"))
	sick := st(3, true, false, m("a-0", "1", "hL"), m("a-1", "2", ""))
	back := st(5, true, false, m("a-0", "1", "hL"), m("a-1", "2", "h"))
	renewed := st(6, true, false, m("a-0", "1", "hL"), m("a-1", "9", "l"))
	for _, tc := range []struct {
		name string
		obs  []observation
		now  float64
		fail bool
	}{
		{"never unhealthy yet: wait", []observation{healthy}, 600, false},
		{"unhealthy now: wait", []observation{healthy, sick}, 600, false},
		{"back with the old ID, briefly: wait", []observation{healthy, sick, back}, 5 + 49, false},
		{"back with the old ID for long: give up", []observation{healthy, sick, back}, 5 + 51, true},
		{"replaced: wait for it to settle", []observation{healthy, sick, renewed}, 600, false},
	} {
		err := cameBackUnreplaced(tc.obs, at(2), at(tc.now), "a-1", "2", 10*time.Second)
		NewWithT(t).Expect(err != nil).To(Equal(tc.fail), "%s: %v", tc.name, err)
	}
}

func TestSummary(t *testing.T) {
	o := st(0, true, false, m("b8-0", "8e9e05c52164694d", "hL"), m("b8-1", "", "l"))
	o.status.Phase = etcdv1alpha1.PhaseScaling
	NewWithT(t).Expect(summary(&o)).To(Equal(
		"gen 1/1 Scaling Available=True/R Progressing=False/R ready 1/2: b8-0(64694d,L) b8-1(-,l!)"))
}

func TestRenderTimeline(t *testing.T) {
	obs := []observation{st(1, false, true, m("b8-0", "", "")), st(4.25, true, false, m("b8-0", "a1", "hL"))}
	evs := []event{{at: at(2), typ: "Normal", reason: "InitJobCreated", message: "Created Job b8-init"}}
	marks := []mark{{at: at(0.5), what: "create 1 member"}}
	NewWithT(t).Expect(renderTimeline(at(0.5), obs, evs, marks)).To(Equal(
		`   +0.00s bench   create 1 member
   +0.50s status  gen 1/1 - Available=False/R Progressing=True/R ready 0/1: b8-0(-,!)
   +1.50s event   Normal InitJobCreated: Created Job b8-init
   +3.75s status  gen 1/1 - Available=True/R Progressing=False/R ready 1/1: b8-0(a1,L)
`))
}
