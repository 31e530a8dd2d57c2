//go:build e2e

package chaos

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

// Two manager replicas; the leader is frozen (SIGSTOP) past its Lease.
// While it is frozen, the follower takes over and does what the frozen
// one's cache will not know of: a Queue is deleted and created again under
// the same SQS name (a new SQS queue), and an EtcdCluster is scaled 3 → 4
// (a new member). Then the old leader thaws, with a cache in which the
// Queue is the old one and the cluster wants 3 members. Before it finds
// out that it lost the Lease, it must make no call to SQS or etcd that
// changes anything: for 30s the new SQS queue keeps its creation time and
// attributes (moto), and etcd's member list keeps its 4 members.
func TestLeaderFrozenPastLeaseCallsNoUpstream(t *testing.T) {
	r := scenario(t, "2 manager replicas, leader SIGSTOP past its Lease, SQS and etcd due")
	ctx := t.Context()
	ns := cluster.Namespace(t)
	setManagerReplicas(t, 2)
	api := sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: awssdk.String(cluster.Settings.MotoURL),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	sqsName := fmt.Sprintf("chaos-frozen-%d", rand.Uint32())
	newQueue := func() *sqsv1alpha1.Queue {
		return &sqsv1alpha1.Queue{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "frozen"},
			Spec:       sqsv1alpha1.QueueSpec{QueueName: sqsName, PollInterval: &metav1.Duration{Duration: 30 * time.Second}},
		}
	}
	q := newQueue()
	if err := cluster.Client.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	waitQueueReady(t, q)
	e := newEtcd(t, ns, 3)
	tlsConfig := e.clientTLS(t)
	r.Duplicates, r.Orphans = 0, 0

	leader, thaw := r.freezeLeader(t)
	defer thaw()

	// What the frozen leader does not see: the Queue replaced, the cluster
	// grown.
	if err := cluster.Client.Delete(ctx, q); err != nil {
		t.Fatal(err)
	}
	cluster.WaitFor(t, 2*time.Minute, "Queue "+q.Name+" to be gone", func(ctx context.Context) (bool, error) {
		err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(q), &sqsv1alpha1.Queue{})
		return apierrors.IsNotFound(err), err
	})
	q = newQueue()
	if err := cluster.Client.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	url := waitQueueReady(t, q)
	before := queueAttributes(t, api, url)
	if err := e.patchSpec(ctx, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Replicas = ptr.To[int32](4) }); err != nil {
		t.Fatal(err)
	}
	e.waitReady(t, 4)
	members := memberIDs(t, e, tlsConfig)
	t.Logf("Leader %s frozen; the new leader replaced the SQS queue (created %s) and grew the cluster to members %v", leader.Name, before["CreatedTimestamp"], members)

	thaw()
	cluster.Consistently(t, 30*time.Second, "SQS and etcd after the old leader thawed", func(ctx context.Context) error {
		now := queueAttributes(t, api, url)
		if !maps.Equal(now, before) {
			r.Duplicates = 1
			return fmt.Errorf("the SQS queue changed after the thaw: %v, was %v", now, before)
		}
		if got := memberIDs(t, e, tlsConfig); !slices.Equal(got, members) {
			r.Duplicates = 1
			return fmt.Errorf("etcd's members changed after the thaw: %v, were %v", got, members)
		}
		return nil
	})
	r.Runs++
	r.Restarts = restartsNow(t)
}

// waitQueueReady waits until q is Ready and returns its queue's URL.
func waitQueueReady(t *testing.T, q *sqsv1alpha1.Queue) string {
	t.Helper()
	var url string
	cluster.WaitFor(t, 2*time.Minute, "Queue "+q.Name+" to be Ready", func(ctx context.Context) (bool, error) {
		got := &sqsv1alpha1.Queue{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(q), got); err != nil {
			return false, err
		}
		if !apimeta.IsStatusConditionTrue(got.Status.Conditions, sqsv1alpha1.ConditionReady) {
			return false, fmt.Errorf("not Ready: %+v", got.Status.Conditions)
		}
		url = got.Status.QueueURL
		return true, nil
	})
	return url
}

// queueAttributes reads every attribute of the queue at url.
func queueAttributes(t *testing.T, api *sqs.Client, url string) map[string]string {
	t.Helper()
	out, err := api.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		t.Fatalf("reading the queue %s: %v", url, err)
	}
	// The message counts are not the manager's to change.
	for _, k := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"} {
		delete(out.Attributes, k)
	}
	return out.Attributes
}

// memberIDs is etcd's member list, as sorted IDs.
func memberIDs(t *testing.T, e *etcdHandle, tlsConfig *tls.Config) []uint64 {
	t.Helper()
	resp, err := e.memberList(t.Context(), tlsConfig)
	if err != nil {
		t.Fatalf("listing etcd's members: %v", err)
	}
	var ids []uint64
	for _, m := range resp.Members {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	return ids
}
