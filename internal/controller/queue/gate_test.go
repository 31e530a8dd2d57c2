package queue

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
	"github.com/tend-dev/tend/internal/fence"
	"github.com/tend-dev/tend/internal/scheme"
)

// lostLease is the Gate of a manager that lost its Lease: it refuses, as
// the manager's fence does, with an error wrapping fence.ErrNotLeader.
type lostLease struct{}

func (lostLease) Allow(context.Context) error {
	return fmt.Errorf("%w: the Lease tend-system/tend.tend.dev is held by %q", fence.ErrNotLeader, "tend-manager-b")
}

// gatedManager is a manager whose Gate (manager.GateOf) is gate, as the
// manager that New gives the controllers with leader election on.
type gatedManager struct {
	ctrl.Manager
	gate fence.Gate
}

func (m gatedManager) Gate() fence.Gate { return m.gate }

// exLeader returns a Reconciler set up, as Controller sets it up, with a
// manager whose Gate refuses: a manager that lost its Lease. The manager
// is not started: the tests run its passes themselves, on Queues that the
// apiserver does not hold (or holds otherwise), so that the suite's
// manager does not act on them.
func exLeader(t *testing.T) *Reconciler {
	t.Helper()
	g := NewWithT(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 scheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// The suite's manager has a controller of this name already.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	g.Expect(err).NotTo(HaveOccurred())
	limiters, err := tendaws.NewLimiters(tendaws.LimiterOptions{QPS: 100, Burst: 100})
	g.Expect(err).NotTo(HaveOccurred())
	r := &Reconciler{
		Client: env.Client, Recorder: events.NewFakeRecorder(10), Timeout: 3 * time.Second,
		Connector: &Connector{Reader: env.Client, Default: tendaws.Connection{Limiters: limiters}},
	}
	g.Expect(r.SetupWithManager(gatedManager{Manager: mgr, gate: lostLease{}}, 1)).To(Succeed())
	g.Expect(r.Connector.Default.Gate).To(Equal(lostLease{}), "SQS calls pass the manager's Gate")
	return r
}

// TestAnExLeaderDeletesNoQueue is the thawed ex-leader of
// docs/reliability.md: its stale cache still holds a Queue being deleted,
// which was meanwhile deleted and re-created under the same name, and
// whose new queue (the same SQS name, so the same URL, and owned by the
// same namespace and name) the new leader made. Its pass must not delete
// that queue.
func TestAnExLeaderDeletesNoQueue(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	name := uniqueName(ns)
	q := newQueue(ns, "orders", func(s *sqsv1alpha1.QueueSpec) { s.QueueName = name })
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	live := waitReady(g, q)

	stale := live.DeepCopy()
	stale.UID, stale.ResourceVersion = "the-old-queues-uid", "1"
	stale.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	_, err := exLeader(t).reconcileDelete(context.Background(), stale)
	g.Expect(queueExists(g, name)).To(BeTrue(), "the new Queue's queue is left")
	g.Expect(err).To(MatchError(fence.ErrNotLeader))
	g.Expect(stale.Finalizers).To(ContainElement(sqsv1alpha1.Finalizer), "the ex-leader does not let go")
}

// TestAnExLeaderCreatesNoQueue: an ex-leader's pass creates no queue for a
// new Queue.
func TestAnExLeaderCreatesNoQueue(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	fresh := newQueue(ns, "fresh", func(s *sqsv1alpha1.QueueSpec) { s.QueueName = uniqueName(ns) })
	_, err := exLeader(t).reconcileNormal(context.Background(), fresh)
	g.Expect(queueExists(g, fresh.Spec.QueueName)).To(BeFalse(), "no queue is created")
	g.Expect(err).To(MatchError(fence.ErrNotLeader))
}

// TestAnExLeaderRepairsNoQueue: an ex-leader's pass sets no attribute, and
// sets or removes no tag, of a queue that drifted.
func TestAnExLeaderRepairsNoQueue(t *testing.T) {
	startManager(t)
	for name, drift := range map[string]struct {
		spec  func(*sqsv1alpha1.QueueSpec)
		attrs map[string]string
		tags  map[string]string // and the owner tag
	}{
		"an attribute": {
			spec:  func(s *sqsv1alpha1.QueueSpec) { s.VisibilityTimeout = ptr.To[int32](30) },
			attrs: map[string]string{"VisibilityTimeout": "77"},
		},
		"a tag set and one removed": {
			spec: func(s *sqsv1alpha1.QueueSpec) { s.Tags = map[string]string{"team": "a"} },
			tags: map[string]string{"team": "b", "stray": "x"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ns := env.Namespace(t)
			sqsName := uniqueName(ns)
			q := newQueue(ns, "drifted", func(s *sqsv1alpha1.QueueSpec) {
				s.QueueName = sqsName
				drift.spec(s)
			})
			tagged := map[string]string{ownerTag: ownerValue(q)}
			maps.Copy(tagged, drift.tags)
			out, err := sqsAPI.CreateQueue(ctx(), &sqs.CreateQueueInput{QueueName: &sqsName, Attributes: drift.attrs, Tags: tagged})
			g.Expect(err).NotTo(HaveOccurred())
			q.Status.QueueURL = *out.QueueUrl
			attrs := func() map[string]string {
				got, err := sqsAPI.GetQueueAttributes(ctx(), &sqs.GetQueueAttributesInput{
					QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
				})
				g.Expect(err).NotTo(HaveOccurred())
				return got.Attributes
			}
			before := attrs()

			_, err = exLeader(t).reconcileNormal(context.Background(), q)
			g.Expect(attrs()).To(Equal(before), "no attribute is set")
			g.Expect(tags(g, *out.QueueUrl)).To(Equal(tagged), "no tag is set or removed")
			g.Expect(err).To(MatchError(fence.ErrNotLeader))
		})
	}
}
