package manager_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tendaws "github.com/tend-dev/tend/internal/aws"
	"github.com/tend-dev/tend/internal/etcd"
	"github.com/tend-dev/tend/internal/fence"
	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/testenv"
	"github.com/tend-dev/tend/internal/testing/etcdserver"
	"github.com/tend-dev/tend/internal/testing/moto"
)

// TestFenceRefusesAnExLeadersWrites runs a manager with leader election on
// a real apiserver. Once it leads, its controllers' client writes; once the
// Lease passes to another process behind its back, as it does to a leader
// frozen past its Lease, the next write after the fence's interval is
// refused and the manager stops with an error, leaving the Lease to its new
// holder.
func TestFenceRefusesAnExLeadersWrites(t *testing.T) {
	g := NewWithT(t)
	env := testenv.New()
	g.Expect(env.Start()).To(Succeed())
	t.Cleanup(func() { g.Expect(env.Stop()).To(Succeed()) })
	ns := env.Namespace(t)

	// A controller's view of the manager: only its client.
	var controllers client.Client
	probe := manager.Controller{Name: "probe", Setup: func(mgr ctrl.Manager) error {
		controllers = mgr.GetClient()
		return nil
	}}
	opts := env.ManagerOptions()
	opts.LeaderElect = true
	opts.LeaderElectionNamespace = ns

	// Without leader election, there is nothing to fence with: the
	// controllers get the manager's own client.
	opts.LeaderElect = false
	mgr, err := manager.New(env.Config, opts, []manager.Controller{probe})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(controllers).To(BeIdenticalTo(mgr.GetClient()))

	opts.LeaderElect = true
	mgr, err = manager.New(env.Config, opts, []manager.Controller{probe})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(controllers).NotTo(BeIdenticalTo(mgr.GetClient()))
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	select {
	case <-mgr.Elected():
	case err := <-done:
		t.Fatalf("The manager stopped before it was elected: %v", err)
	}

	written := func(name string) bool {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return false
		}
		g.Expect(err).NotTo(HaveOccurred())
		return true
	}
	write := func(name string) error {
		return controllers.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
	g.Expect(write("leading")).To(Succeed())
	g.Expect(written("leading")).To(BeTrue())

	// Another process takes the Lease; this one's leader elector finds out
	// only at its next renewal, and gives up only at its renew deadline.
	key := client.ObjectKey{Namespace: ns, Name: opts.LeaderElectionID}
	takeLease(ctx, g, env, key)

	// Writes within the interval of the last check pass; the first after
	// it is refused.
	var last string
	g.Eventually(func() error {
		last = fmt.Sprintf("write-%d", time.Now().UnixNano())
		return write(last)
	}).WithTimeout(time.Minute).Should(MatchError(manager.ErrNotLeader))
	g.Expect(written(last)).To(BeFalse())
	g.Expect(write("after")).To(MatchError(manager.ErrNotLeader))
	g.Expect(written("after")).To(BeFalse())

	// The fence stops the manager, well before the renew deadline would.
	g.Eventually(done).WithTimeout(time.Minute).Should(Receive(MatchError(manager.ErrNotLeader)))
	// On its way out, it did not release the Lease over its new holder.
	l := &coordinationv1.Lease{}
	g.Expect(env.Client.Get(ctx, key, l)).To(Succeed())
	g.Expect(l.Spec.HolderIdentity).To(HaveValue(Equal(other)))
}

// other is the process that takes the Lease behind the manager's back.
const other = "another-replica_00000000-0000-0000-0000-000000000000"

// takeLease gives the Lease key to other, as a follower does that found it
// expired while its leader was frozen.
func takeLease(ctx context.Context, g Gomega, env *testenv.Env, key client.ObjectKey) {
	g.Eventually(func() error {
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, key, l); err != nil {
			return err
		}
		l.Spec.HolderIdentity = ptr.To(other)
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		return env.Client.Update(ctx, l)
	}).Should(Succeed())
}

// TestFenceRefusesAnExLeadersUpstreamWrites runs a manager with leader
// election on a real apiserver, and builds, on the Gate that a controller's
// Setup gets (GateOf), an SQS client on moto_server, as the queue
// controller does, and an etcd client on a real 3-member cluster. While
// the manager leads, both change things (a queue made, a learner added).
// Once the Lease passes to another process behind its back, as it does to
// a leader frozen past its Lease, the first SQS change after the fence's
// interval is refused and creates no queue, a delete leaves its queue, and
// etcd keeps its members and its leader through a refused removal and
// leadership move; the manager stops.
func TestFenceRefusesAnExLeadersUpstreamWrites(t *testing.T) {
	g := NewWithT(t)
	env := testenv.New()
	g.Expect(env.Start()).To(Succeed())
	t.Cleanup(func() { g.Expect(env.Stop()).To(Succeed()) })
	ns := env.Namespace(t)
	sqsServer := moto.Start(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 3})

	var gate fence.Gate
	probe := manager.Controller{Name: "probe", Setup: func(mgr ctrl.Manager) error {
		gate = manager.GateOf(mgr)
		return nil
	}}
	opts := env.ManagerOptions()
	opts.LeaderElectionNamespace = ns

	// Without leader election, the Gate lets everything through.
	opts.LeaderElect = false
	_, err := manager.New(env.Config, opts, []manager.Controller{probe})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gate).To(Equal(fence.Open{}))

	opts.LeaderElect = true
	mgr, err := manager.New(env.Config, opts, []manager.Controller{probe})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gate).NotTo(Equal(fence.Open{}))
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(stop)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	select {
	case <-mgr.Elected():
	case err := <-done:
		t.Fatalf("The manager stopped before it was elected: %v", err)
	}

	sqsClient := func(gate fence.Gate) *sqs.Client {
		limiters, err := tendaws.NewLimiters(tendaws.LimiterOptions{QPS: 1000, Burst: 1000})
		g.Expect(err).NotTo(HaveOccurred())
		cfg, err := tendaws.LoadConfig(ctx, tendaws.Connection{
			Region: moto.Region, EndpointURL: sqsServer.URL, Limiters: limiters, Gate: gate,
			Credentials: &tendaws.StaticCredentials{AccessKeyID: moto.AccessKeyID, SecretAccessKey: moto.SecretAccessKey},
		})
		g.Expect(err).NotTo(HaveOccurred())
		return sqs.NewFromConfig(cfg)
	}
	fenced, direct := sqsClient(gate), sqsClient(nil)
	queueExists := func(name string) bool {
		_, err := direct.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name})
		if tendaws.Classify(err) == tendaws.NotFound {
			return false
		}
		g.Expect(err).NotTo(HaveOccurred())
		return true
	}
	etcdClient := func(gate fence.Gate) *etcd.Client {
		c, err := etcd.New(ctx, etcd.Config{Endpoints: cluster.ClientURLs(), Gate: gate})
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	members, admin := etcdClient(gate), etcdClient(nil)

	// While the manager leads, its changes go through.
	leading, err := fenced.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: ptr.To("leading")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(queueExists("leading")).To(BeTrue())
	var leader etcd.MemberID
	g.Eventually(func(g Gomega) {
		statuses, err := admin.Status(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		var ok bool
		leader, ok = etcd.Leader(statuses)
		g.Expect(ok).To(BeTrue())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	voters, err := admin.Members(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var follower etcd.MemberID
	for _, m := range voters {
		if m.ID != leader {
			follower = m.ID
		}
	}
	// A learner, which never starts: etcd takes a member change once its
	// leader has been in touch with a quorum for 5s, and would take its
	// removal at any time after.
	var learner etcd.Member
	spare := cluster.NewMember(t).PeerURL
	g.Eventually(func() error {
		learner, err = members.AddLearner(ctx, spare)
		return err
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	before, err := admin.Members(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(before).To(HaveLen(4))

	takeLease(ctx, g, env, client.ObjectKey{Namespace: ns, Name: opts.LeaderElectionID})

	// Changes within the interval of the last check pass; the first after
	// it is refused, and sends nothing.
	var last string
	g.Eventually(func() error {
		last = fmt.Sprintf("q-%d", time.Now().UnixNano())
		_, err := fenced.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &last})
		return err
	}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(MatchError(manager.ErrNotLeader))
	g.Expect(queueExists(last)).To(BeFalse())
	_, err = fenced.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: leading.QueueUrl})
	g.Expect(err).To(MatchError(manager.ErrNotLeader))
	g.Expect(queueExists("leading")).To(BeTrue())

	g.Expect(members.Remove(ctx, learner.ID)).To(MatchError(manager.ErrNotLeader))
	g.Expect(members.MoveLeader(ctx, follower)).To(MatchError(manager.ErrNotLeader))
	g.Expect(admin.Members(ctx)).To(Equal(before), "no member removed")
	statuses, err := admin.Status(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	now, ok := etcd.Leader(statuses)
	g.Expect(ok).To(BeTrue())
	g.Expect(now).To(Equal(leader), "the leadership did not move")
	// Reads are not fenced.
	_, err = fenced.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: ptr.To("leading")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(members.Members(ctx)).To(Equal(before))

	// The fence stops the manager, as it does when a Kubernetes write finds
	// the Lease lost.
	g.Eventually(done).WithTimeout(time.Minute).Should(Receive(MatchError(manager.ErrNotLeader)))
}
