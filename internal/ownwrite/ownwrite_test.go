package ownwrite

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestBehind(t *testing.T) {
	g := NewWithT(t)
	at := func(rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", ResourceVersion: rv}}
	}
	var l Log
	g.Expect(l.Behind(at("5"))).To(BeFalse(), "nothing written yet")

	l.Wrote(at("100"))
	g.Expect(l.Behind(at("99"))).To(BeTrue(), "the cache has not seen the write")
	g.Expect(l.Behind(at("99"))).To(BeTrue(), "still not")
	g.Expect(l.Behind(at("100"))).To(BeFalse(), "caught up")
	g.Expect(l.Behind(at("99"))).To(BeFalse(), "forgotten once caught up")

	l.Wrote(at("200"))
	g.Expect(l.Behind(at("1000"))).To(BeFalse(), "newer: someone else wrote since; compared as numbers, not strings")

	l.Wrote(at("300"))
	g.Expect(l.Behind(at("not-a-number"))).To(BeFalse(), "a version that does not compare is taken as current")

	l.Wrote(at("400"))
	l.Forget(types.NamespacedName{Namespace: "ns", Name: "c"})
	g.Expect(l.Behind(at("399"))).To(BeFalse(), "an object gone and made again starts afresh")

	l.Wrote(at("500"))
	other := at("1")
	other.Name = "d"
	g.Expect(l.Behind(other)).To(BeFalse(), "each object has its own record")
}
