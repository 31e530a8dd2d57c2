package queue

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
	"github.com/tend-dev/tend/internal/testing/faultproxy"
)

func TestRetainKeepsTheQueue(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	name := uniqueName(ns)
	q := newQueue(ns, "kept", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName = name
		s.DeletionPolicy = sqsv1alpha1.DeletionPolicyRetain
	})
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	waitReady(g, q)
	g.Expect(env.Client.Delete(context.Background(), q)).To(Succeed())
	waitGone(g, q)
	g.Expect(queueExists(g, name)).To(BeTrue())
}

func TestReleaseFinalizerWhenSQSIsGone(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	proxy := faultproxy.Start(t, server.URL)
	createConnectionSecret(g, ns, "via-proxy", proxy.URL())
	q := newQueue(ns, "stuck", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName = uniqueName(ns)
		s.Connection = &sqsv1alpha1.Connection{SecretRef: &corev1.LocalObjectReference{Name: "via-proxy"}}
	})
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	waitReady(g, q)

	proxy.SetMode(faultproxy.ServerError)
	g.Expect(env.Client.Delete(context.Background(), q)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, q)
		g.Expect(condition(got, sqsv1alpha1.ConditionSynced)).To(Equal("False/UpstreamError"))
		g.Expect(cond(got, sqsv1alpha1.ConditionSynced).Message).To(ContainSubstring(sqsv1alpha1.AnnotationReleaseFinalizer + "=true"))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	got := get(g, q)
	patch := client.MergeFrom(got.DeepCopy())
	got.Annotations = map[string]string{sqsv1alpha1.AnnotationReleaseFinalizer: "true"}
	g.Expect(env.Client.Patch(context.Background(), got, patch)).To(Succeed())
	waitGone(g, q)
	g.Expect(queueExists(g, q.Spec.QueueName)).To(BeTrue(), "a released queue is left in SQS")
}

// TestDeleteLeavesAnotherQueuesQueue: a Queue whose status records the URL
// of a queue that another Queue's owner tag names (as one that took a queue
// over before Tend refused that would) lets go without deleting it, and
// says so. The pass runs here on its own, on a Queue that the apiserver
// does not hold, so that no poll of the manager can clear that status first.
func TestDeleteLeavesAnotherQueuesQueue(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	nsA, nsB := env.Namespace(t), env.Namespace(t)
	name := uniqueName(nsA)
	owner := newQueue(nsA, "orders", func(s *sqsv1alpha1.QueueSpec) { s.QueueName = name })
	g.Expect(env.Client.Create(context.Background(), owner)).To(Succeed())
	url := waitReady(g, owner).Status.QueueURL

	limiters, err := tendaws.NewLimiters(tendaws.LimiterOptions{QPS: 100, Burst: 100})
	g.Expect(err).NotTo(HaveOccurred())
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{
		Client: env.Client, Recorder: recorder, Timeout: 3 * time.Second,
		Connector: &Connector{Reader: env.Client, Default: tendaws.Connection{Limiters: limiters}},
	}
	stale := newQueue(nsB, "orders", func(s *sqsv1alpha1.QueueSpec) { s.QueueName = name })
	stale.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	stale.Finalizers = []string{sqsv1alpha1.Finalizer}
	stale.ResourceVersion = "1" // its patches find no object: NotFound, which a deletion ignores
	stale.Status.QueueURL = url

	_, err = r.reconcileDelete(context.Background(), stale)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(queueExists(g, name)).To(BeTrue())
	g.Expect(tags(g, url)).To(HaveKeyWithValue(ownerTag, nsA+"/orders"))
	g.Expect(recorder.Events).To(Receive(And(
		HavePrefix(corev1.EventTypeWarning+" "+sqsv1alpha1.ReasonOwnedByAnotherQueue), ContainSubstring(nsA+"/orders"))))
	g.Expect(stale.Finalizers).To(BeEmpty(), "the Queue lets go")
}
