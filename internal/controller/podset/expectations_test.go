package podset

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
