package etcdbackup

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

func TestAvailabilityChanged(t *testing.T) {
	cluster := func(status metav1.ConditionStatus, reason, msg string) *etcdv1alpha1.EtcdCluster {
		c := &etcdv1alpha1.EtcdCluster{}
		if status != "" {
			c.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionAvailable, Status: status, Reason: reason, Message: msg}}
		}
		return c
	}
	for _, tc := range []struct {
		name     string
		old, cur *etcdv1alpha1.EtcdCluster
		want     bool
	}{
		{name: "becomes Available", old: cluster("False", "Bootstrapping", ""), cur: cluster("True", "QuorumHealthy", ""), want: true},
		{name: "first condition", old: cluster("", "", ""), cur: cluster("False", "QuorumLost", ""), want: true},
		{name: "another reason to wait", old: cluster("False", "Bootstrapping", ""), cur: cluster("False", "QuorumLost", ""), want: true},
		{name: "only the message", old: cluster("True", "QuorumHealthy", "3 of 3"), cur: cluster("True", "QuorumHealthy", "2 of 3")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := availabilityChanged().Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.cur})
			NewWithT(t).Expect(got).To(Equal(tc.want))
		})
	}
}
