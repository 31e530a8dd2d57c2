package etcdcluster

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

func TestBehindOwnWrite(t *testing.T) {
	g := NewWithT(t)
	at := func(rv string) *etcdv1alpha1.EtcdCluster {
		return &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", ResourceVersion: rv}}
	}
	r := &Reconciler{}
	g.Expect(r.behindOwnWrite(at("5"))).To(BeFalse(), "nothing written yet")

	r.wrote(at("100"))
	g.Expect(r.behindOwnWrite(at("99"))).To(BeTrue(), "the cache has not seen the write")
	g.Expect(r.behindOwnWrite(at("99"))).To(BeTrue(), "still not")
	g.Expect(r.behindOwnWrite(at("100"))).To(BeFalse(), "caught up")
	g.Expect(r.behindOwnWrite(at("99"))).To(BeFalse(), "forgotten once caught up")

	r.wrote(at("200"))
	g.Expect(r.behindOwnWrite(at("1000"))).To(BeFalse(), "newer: someone else wrote since; compared as numbers, not strings")

	r.wrote(at("300"))
	g.Expect(r.behindOwnWrite(at("not-a-number"))).To(BeFalse(), "a version that does not compare is taken as current")

	r.wrote(at("400"))
	r.forget(types.NamespacedName{Namespace: "ns", Name: "c"})
	g.Expect(r.behindOwnWrite(at("399"))).To(BeFalse(), "a cluster gone and made again starts afresh")
}
