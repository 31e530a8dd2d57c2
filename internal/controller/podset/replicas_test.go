package podset

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
)

func TestBatchSizes(t *testing.T) {
	for _, tc := range []struct {
		count int
		want  []int
	}{
		{0, nil},
		{1, []int{1}},
		{2, []int{1, 1}},
		{3, []int{1, 2}},
		{10, []int{1, 2, 4, 3}},
		{1000, []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 489}},
	} {
		g := NewWithT(t)
		g.Expect(batchSizes(tc.count)).To(Equal(tc.want), "count %d", tc.count)
	}
}

func TestSlowStartStopsAtFirstFailingBatch(t *testing.T) {
	refused := errors.New("exceeded quota")
	for _, tc := range []struct {
		name      string
		count     int
		failAfter int64 // calls that succeed before every later call fails
		wantDone  int
		wantCalls int64
	}{
		{"all succeed", 10, 100, 10, 10},
		{"first call refused: one call, not ten", 10, 0, 0, 1},
		{"refused in the third batch", 10, 3, 3, 7},
		{"nothing to do", 0, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var calls atomic.Int64
			done, err := slowStart(tc.count, func() error {
				if calls.Add(1) > tc.failAfter {
					return refused
				}
				return nil
			})
			g.Expect(done).To(Equal(tc.wantDone))
			g.Expect(calls.Load()).To(Equal(tc.wantCalls))
			if tc.wantDone < tc.count {
				g.Expect(err).To(MatchError(refused))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
		})
	}
}

// pod builds a test pod: scheduled on a node unless node is "", in phase,
// Ready or not, created age ago.
func pod(name, node string, phase corev1.PodPhase, ready bool, age time.Duration) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age)),
			Labels:            map[string]string{},
		},
		Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{
			Phase:      phase,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
		},
	}
}

func leaderPod(p *corev1.Pod) *corev1.Pod {
	p.Labels[appsv1alpha1.LabelRole] = appsv1alpha1.RoleLeader
	return p
}

func names(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestToDeleteRanksPods(t *testing.T) {
	unscheduled := pod("unscheduled", "", corev1.PodPending, false, time.Minute)
	pending := pod("pending", "node", corev1.PodPending, false, time.Hour)
	unready := pod("unready", "node", corev1.PodRunning, false, 2*time.Hour)
	oldReady := pod("old-ready", "node", corev1.PodRunning, true, 3*time.Hour)
	newReady := pod("new-ready", "node", corev1.PodRunning, true, time.Second)
	leader := leaderPod(pod("leader", "node", corev1.PodRunning, true, time.Millisecond))
	all := []*corev1.Pod{leader, oldReady, newReady, unready, pending, unscheduled}

	for _, tc := range []struct {
		n    int
		want []string
	}{
		{1, []string{"unscheduled"}},
		{3, []string{"unscheduled", "pending", "unready"}},
		{4, []string{"unscheduled", "pending", "unready", "new-ready"}},
		{5, []string{"unscheduled", "pending", "unready", "new-ready", "old-ready"}},
		// The leader goes last even though it is the newest.
		{6, []string{"unscheduled", "pending", "unready", "new-ready", "old-ready", "leader"}},
		{9, []string{"unscheduled", "pending", "unready", "new-ready", "old-ready", "leader"}},
	} {
		g := NewWithT(t)
		g.Expect(names(toDelete(all, tc.n))).To(Equal(tc.want), "n=%d", tc.n)
	}
}

func TestToDeleteBreaksTiesByName(t *testing.T) {
	g := NewWithT(t)
	a := pod("a", "", corev1.PodPending, false, time.Minute)
	b := pod("b", "", corev1.PodPending, false, time.Minute)
	g.Expect(names(toDelete([]*corev1.Pod{b, a}, 1))).To(Equal([]string{"a"}))
}

func TestIsActive(t *testing.T) {
	g := NewWithT(t)
	g.Expect(isActive(pod("p", "n", corev1.PodRunning, true, 0))).To(BeTrue())
	g.Expect(isActive(pod("p", "n", corev1.PodSucceeded, false, 0))).To(BeFalse())
	g.Expect(isActive(pod("p", "n", corev1.PodFailed, false, 0))).To(BeFalse())
	terminating := pod("p", "n", corev1.PodRunning, true, 0)
	terminating.DeletionTimestamp = &metav1.Time{}
	g.Expect(isActive(terminating)).To(BeFalse())
}
