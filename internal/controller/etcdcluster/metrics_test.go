package etcdcluster

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/scheme"
	"github.com/tend-dev/tend/internal/statemetrics"
)

func TestMetrics(t *testing.T) {
	g := NewWithT(t)
	rolling := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "kv"},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3)},
		Status: etcdv1alpha1.EtcdClusterStatus{
			Members: []etcdv1alpha1.Member{
				{Name: "kv-0", Healthy: true, Leader: true}, {Name: "kv-1", Healthy: true}, {Name: "kv-2"}, {Name: "kv-3", Learner: true, Healthy: true},
			},
			Update: &etcdv1alpha1.UpdateStatus{UpdatedMembers: []string{"kv-0"}, PendingMembers: []string{"kv-1", "kv-2"}},
			Certificates: []etcdv1alpha1.CertificateStatus{
				{Secret: "kv-ca", NotAfter: metav1.Unix(2000000000, 0)},
				{Secret: "kv-server-tls"}, // unreadable: no series
			},
			Conditions: []metav1.Condition{
				{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Updating"},
				{Type: "Reconciling", Status: metav1.ConditionTrue, Reason: "Updating"},
			},
		},
	}
	// A new cluster: no member known yet, so no member or margin series.
	fresh := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "kv"}}
	restore := &etcdv1alpha1.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "back"},
		Status: etcdv1alpha1.EtcdRestoreStatus{Conditions: []metav1.Condition{
			{Type: "Stalled", Status: metav1.ConditionTrue, Reason: "ClusterAvailable"},
		}},
	}
	r := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(rolling, fresh, restore).Build()
	err := testutil.CollectAndCompare(statemetrics.NewCollector(r, Metrics), strings.NewReader(`
# HELP tend_etcdcluster_certificate_expiry_timestamp_seconds When the certificate in each of an EtcdCluster's TLS Secrets expires, as its status.certificates says.
# TYPE tend_etcdcluster_certificate_expiry_timestamp_seconds gauge
tend_etcdcluster_certificate_expiry_timestamp_seconds{name="kv",namespace="a",secret="kv-ca"} 2e+09
# HELP tend_etcdcluster_desired_members The members an EtcdCluster's spec asks for.
# TYPE tend_etcdcluster_desired_members gauge
tend_etcdcluster_desired_members{name="kv",namespace="a"} 3
tend_etcdcluster_desired_members{name="kv",namespace="b"} 3
# HELP tend_etcdcluster_members An EtcdCluster's members by state, as its status last saw them: healthy and unhealthy voters, and learners.
# TYPE tend_etcdcluster_members gauge
tend_etcdcluster_members{name="kv",namespace="a",state="healthy"} 2
tend_etcdcluster_members{name="kv",namespace="a",state="learner"} 1
tend_etcdcluster_members{name="kv",namespace="a",state="unhealthy"} 1
# HELP tend_etcdcluster_quorum_margin Healthy voting members above the quorum: how many more may fail before etcd stops serving writes (negative: the quorum is lost).
# TYPE tend_etcdcluster_quorum_margin gauge
tend_etcdcluster_quorum_margin{name="kv",namespace="a"} 0
# HELP tend_etcdcluster_roll_members While a roll runs, its members by state: updated (restarted on the new revision) and pending.
# TYPE tend_etcdcluster_roll_members gauge
tend_etcdcluster_roll_members{name="kv",namespace="a",state="pending"} 2
tend_etcdcluster_roll_members{name="kv",namespace="a",state="updated"} 1
# HELP tend_resource_condition A condition of a Tend object: 1 for its current status and reason.
# TYPE tend_resource_condition gauge
tend_resource_condition{kind="EtcdCluster",name="kv",namespace="a",reason="Updating",status="False",type="Ready"} 1
tend_resource_condition{kind="EtcdCluster",name="kv",namespace="a",reason="Updating",status="True",type="Reconciling"} 1
tend_resource_condition{kind="EtcdRestore",name="back",namespace="a",reason="ClusterAvailable",status="True",type="Stalled"} 1
`))
	g.Expect(err).NotTo(HaveOccurred())
}
