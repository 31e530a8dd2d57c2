//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// TestEtcdClusterSaysWhyMembersDoNotStart: a cluster whose pods the
// StatefulSet may not create (a ResourceQuota of no pods), and one whose
// volume claims stay Pending (a StorageClass that does not exist), say so
// in Degraded with Kubernetes' own words, instead of only waiting for
// the members.
func TestEtcdClusterSaysWhyMembersDoNotStart(t *testing.T) {
	t.Parallel()
	ns, other := cluster.Namespace(t), cluster.Namespace(t)
	ctx := t.Context()
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}
	noPods := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1), DeletionPolicy: etcdv1alpha1.DeletionDelete}}
	noClass := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "noclass"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1), DeletionPolicy: etcdv1alpha1.DeletionDelete,
			Storage: etcdv1alpha1.Storage{StorageClassName: ptr.To("does-not-exist")}}}
	for _, obj := range []client.Object{quota, noPods, noClass} {
		if err := cluster.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		c    *etcdv1alpha1.EtcdCluster
		want []string // parts of the Degraded message
	}{
		{c: noPods, want: []string{"StatefulSet quota cannot create pods", "exceeded quota"}},
		{c: noClass, want: []string{"volume claim data-noclass-0 is Pending", "does-not-exist"}},
	} {
		var last string
		cluster.WaitFor(t, 3*time.Minute, tc.c.Name+": Degraded MembersCannotStart with Kubernetes' reason", func(ctx context.Context) (bool, error) {
			got := &etcdv1alpha1.EtcdCluster{}
			if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(tc.c), got); err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type != etcdv1alpha1.ConditionDegraded {
					continue
				}
				last = cond.Reason + ": " + cond.Message
				if cond.Status != metav1.ConditionTrue || cond.Reason != etcdv1alpha1.ReasonMembersCannotStart {
					return false, nil
				}
				for _, w := range tc.want {
					if !strings.Contains(cond.Message, w) {
						return false, nil
					}
				}
				return true, nil
			}
			return false, nil
		})
		t.Logf("%s: %s", tc.c.Name, last)
	}
}
