package etcdcluster

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// TestAFailingPassIsNeverStable: a pass that fails (again and again, as
// when a derived object cannot be made) says so in Progressing and
// Degraded, quoting the error, instead of Stable and AsExpected; one that
// failed on an object Tend did not make says ObjectNotOurs.
func TestAFailingPassIsNeverStable(t *testing.T) {
	c := newCluster("ns", "kv", nil)
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{errors.New(`creating EtcdBackup kv-upgrade-3-6: metadata.name: Invalid value`), etcdv1alpha1.ReasonReconcileFailed},
		{fmt.Errorf("%w: Job kv-check-1 exists but is not made by Tend for this cluster", errNotOurs), etcdv1alpha1.ReasonObjectNotOurs},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			g := NewWithT(t)
			got := map[string]metav1.Condition{}
			set := func(typ string, s metav1.ConditionStatus, reason, msg string) {
				got[typ] = metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg}
			}
			obs := observation{passError: tc.err, healthyQuorum: true}
			setProgressing(c, obs, set)
			setDegraded(c, obs, set)
			g.Expect(got[etcdv1alpha1.ConditionProgressing].Status).To(Equal(metav1.ConditionUnknown))
			g.Expect(got[etcdv1alpha1.ConditionProgressing].Reason).To(Equal(tc.reason))
			g.Expect(got[etcdv1alpha1.ConditionDegraded].Status).To(Equal(metav1.ConditionTrue))
			g.Expect(got[etcdv1alpha1.ConditionDegraded].Reason).To(Equal(tc.reason))
			g.Expect(got[etcdv1alpha1.ConditionDegraded].Message).To(ContainSubstring(tc.err.Error()))
		})
	}
}

// TestUnreachableMessageIsStable: a cluster that stays down reads the same
// Available message pass after pass, whichever member the etcd client
// tried last, so its status is not written at every pass; what went wrong
// stays in it.
func TestUnreachableMessageIsStable(t *testing.T) {
	g := NewWithT(t)
	c := newCluster("ns", "kv", nil)
	tried := func(addr string) error {
		return fmt.Errorf(`listing members: context deadline exceeded (the last attempt: latest balancer error: connection error: desc = "transport: Error while dialing: dial tcp %s: connect: connection refused")`, addr)
	}
	available := func(err error) metav1.Condition {
		var got metav1.Condition
		set := func(typ string, s metav1.ConditionStatus, reason, msg string) {
			if typ == etcdv1alpha1.ConditionAvailable {
				got = metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg}
			}
		}
		setAvailable(c, observation{unreachable: err, job: jobComplete}, &etcdv1alpha1.EtcdClusterStatus{}, set)
		return got
	}
	first := available(tried("10.244.0.17:2379"))
	g.Expect(first.Reason).To(Equal(etcdv1alpha1.ReasonUnreachable))
	g.Expect(first.Message).To(ContainSubstring("dial tcp <member>: connect: connection refused"))
	g.Expect(available(tried("10.244.0.23:2379"))).To(Equal(first))
	g.Expect(available(tried("[fd00:10:244::5]:2379"))).To(Equal(first))
	g.Expect(available(errors.New("listing members: x509: certificate signed by unknown authority")).Message).
		To(ContainSubstring("certificate signed by unknown authority"), "another cause reads otherwise")
}
