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
