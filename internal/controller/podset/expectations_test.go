package podset

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestExpectations(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	other := types.NamespacedName{Namespace: "ns", Name: "db"}
	live := func(name string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	terminating := func(name string) *corev1.Pod {
		p := live(name)
		p.DeletionTimestamp = &metav1.Time{}
		return p
	}

	t.Run("nothing recorded is satisfied", func(t *testing.T) {
		g := NewWithT(t)
		e := newExpectations(clocktesting.NewFakePassiveClock(time.Now()))
		ok, _ := e.satisfied(key, nil)
		g.Expect(ok).To(BeTrue())
	})

	t.Run("a create is pending until the cache shows the pod", func(t *testing.T) {
		g := NewWithT(t)
		e := newExpectations(clocktesting.NewFakePassiveClock(time.Now()))
		e.created(key, "web-a")
		e.created(key, "web-b")
		ok, wait := e.satisfied(key, []*corev1.Pod{live("web-a")})
		g.Expect(ok).To(BeFalse())
		g.Expect(wait).To(Equal(expectationTTL))
		// Another PodSet's record is its own.
		ok, _ = e.satisfied(other, nil)
		g.Expect(ok).To(BeTrue())
		// web-a was struck off; web-b alone is pending, even once web-a is gone.
		ok, _ = e.satisfied(key, []*corev1.Pod{live("web-b")})
		g.Expect(ok).To(BeTrue())
	})

	t.Run("a delete is pending while the cache shows the pod live", func(t *testing.T) {
		g := NewWithT(t)
		e := newExpectations(clocktesting.NewFakePassiveClock(time.Now()))
		e.deleted(key, "web-a")
		ok, _ := e.satisfied(key, []*corev1.Pod{live("web-a")})
		g.Expect(ok).To(BeFalse())
		ok, _ = e.satisfied(key, []*corev1.Pod{terminating("web-a")})
		g.Expect(ok).To(BeTrue(), "a terminating pod no longer counts")
	})

	t.Run("a record expires", func(t *testing.T) {
		g := NewWithT(t)
		clock := clocktesting.NewFakePassiveClock(time.Now())
		e := newExpectations(clock)
		e.created(key, "web-a") // deleted before the cache ever saw it
		clock.SetTime(clock.Now().Add(expectationTTL - time.Second))
		ok, wait := e.satisfied(key, nil)
		g.Expect(ok).To(BeFalse())
		g.Expect(wait).To(Equal(time.Second))
		clock.SetTime(clock.Now().Add(time.Second))
		ok, _ = e.satisfied(key, nil)
		g.Expect(ok).To(BeTrue())
	})

	t.Run("forget drops the record", func(t *testing.T) {
		g := NewWithT(t)
		e := newExpectations(clocktesting.NewFakePassiveClock(time.Now()))
		e.created(key, "web-a")
		e.forget(key)
		ok, _ := e.satisfied(key, nil)
		g.Expect(ok).To(BeTrue())
	})
}

// TestExpectationsOfWrites checks what a create or delete leaves pending,
// by what the apiserver answered. A write that did not happen must leave
// nothing to wait for: the cache would never show it, and the PodSet would
// stand still until the record expired.
func TestExpectationsOfWrites(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	pods := schema.GroupResource{Resource: "pods"}
	live := func(name string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	refused := []struct {
		reason string
		err    error
	}{
		{"500", apierrors.NewInternalError(errors.New("etcd is sad"))},
		{"Forbidden", apierrors.NewForbidden(pods, "web-a", errors.New("denied by admission"))},
		// A delete whose UID precondition fails: another pod holds the name.
		{"Conflict", apierrors.NewConflict(pods, "web-a", errors.New("the UID in the precondition does not match"))},
		{"Timeout", apierrors.NewTimeoutError("request timed out", 1)},
		{"a context deadline", context.DeadlineExceeded},
	}

	type write struct {
		name string
		err  error
		// pending: with the pod as it was before the write still in the cache
		// (live, or absent for a create), the PodSet waits.
		pending bool
	}
	cases := []write{
		{name: "a delete that succeeded waits for the cache", pending: true},
		// The pod is gone already; the cache will show it, so the PodSet
		// waits for that rather than count a pod that is gone.
		{name: "a delete of a pod already gone is no failure", err: apierrors.NewNotFound(pods, "web-a"), pending: true},
	}
	for _, r := range refused {
		cases = append(cases, write{name: "a delete that failed with " + r.reason + " leaves nothing pending", err: r.err})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			e := newExpectations(clocktesting.NewFakePassiveClock(time.Now()))
			err := e.deleting(key, "web-a", func() error { return tc.err })
			if tc.err == nil || apierrors.IsNotFound(tc.err) {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(tc.err))
			}
			ok, _ := e.satisfied(key, []*corev1.Pod{live("web-a")})
			g.Expect(ok).To(Equal(!tc.pending), "pending while the cache shows the pod live")
			ok, _ = e.satisfied(key, nil)
			g.Expect(ok).To(BeTrue(), "satisfied once the cache shows the pod gone")
		})
	}

	creates := []write{{name: "a create that succeeded waits for the cache", pending: true}}
	for _, r := range refused {
		creates = append(creates, write{name: "a create that failed with " + r.reason + " leaves nothing pending", err: r.err})
	}
	for _, tc := range creates {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			e := newExpectations(clocktesting.NewFakePassiveClock(time.Now()))
			name, err := e.creating(key, func() (string, error) {
				if tc.err != nil {
					return "", tc.err
				}
				return "web-a", nil
			})
			if tc.err == nil {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(name).To(Equal("web-a"))
			} else {
				g.Expect(err).To(MatchError(tc.err))
			}
			ok, _ := e.satisfied(key, nil)
			g.Expect(ok).To(Equal(!tc.pending), "pending while the cache lacks the pod")
			ok, _ = e.satisfied(key, []*corev1.Pod{live("web-a")})
			g.Expect(ok).To(BeTrue(), "satisfied once the cache shows the pod")
		})
	}

	t.Run("a failed delete strikes off its own pod only", func(t *testing.T) {
		g := NewWithT(t)
		e := newExpectations(clocktesting.NewFakePassiveClock(time.Now()))
		g.Expect(e.deleting(key, "web-a", func() error { return nil })).To(Succeed())
		g.Expect(e.deleting(key, "web-b", func() error { return refused[1].err })).NotTo(Succeed())
		ok, _ := e.satisfied(key, []*corev1.Pod{live("web-a"), live("web-b")})
		g.Expect(ok).To(BeFalse(), "web-a's delete is still to be seen")
		ok, _ = e.satisfied(key, []*corev1.Pod{live("web-b")})
		g.Expect(ok).To(BeTrue(), "web-b was never deleted")
	})
}
