package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	"github.com/tend-dev/tend/internal/testing/faultproxy"
	"github.com/tend-dev/tend/internal/testing/moto"
)

func TestCreateUpdateAndPublish(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	name := uniqueName(ns)
	q := newQueue(ns, "orders", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName = name
		s.DelaySeconds, s.VisibilityTimeout = ptr.To[int32](5), ptr.To[int32](120)
		s.Policy = &apiextensionsv1.JSON{Raw: []byte(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"sqs:SendMessage","Resource":"*"}]}`)}
		s.Tags = map[string]string{"team": "payments"}
	})
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())

	got := waitReady(g, q)
	g.Expect(got.Finalizers).To(ContainElement(sqsv1alpha1.Finalizer))
	g.Expect(got.Status.QueueURL).To(HaveSuffix("/" + moto.AccountID + "/" + name))
	g.Expect(got.Status.QueueARN).To(Equal("arn:aws:sqs:us-east-1:" + moto.AccountID + ":" + name))
	g.Expect(got.Status.LastSyncTime).NotTo(BeNil())
	g.Expect(condition(got, sqsv1alpha1.ConditionSynced)).To(Equal("True/Synced"))
	g.Expect(condition(got, sqsv1alpha1.ConditionReconciling)).To(BeEmpty())
	g.Expect(condition(got, sqsv1alpha1.ConditionStalled)).To(BeEmpty())
	g.Expect(kstatusOf(g, got)).To(Equal(kstatus.CurrentStatus))
	attrs := attributes(g, got.Status.QueueURL)
	g.Expect(attrs).To(HaveKeyWithValue("DelaySeconds", "5"))
	g.Expect(attrs).To(HaveKeyWithValue("VisibilityTimeout", "120"))
	g.Expect(sameJSON(attrs["Policy"], string(q.Spec.Policy.Raw))).To(BeTrue(), attrs["Policy"])
	g.Expect(tags(g, got.Status.QueueURL)).To(Equal(map[string]string{"team": "payments", ownerTag: ns + "/orders"}))

	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "orders-queue"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(Equal(map[string]string{"queueName": name, "queueURL": got.Status.QueueURL, "queueARN": got.Status.QueueARN, "region": moto.Region}))
	g.Expect(metav1.IsControlledBy(cm, got)).To(BeTrue())

	// An update of the spec reaches SQS.
	got.Spec.DelaySeconds = ptr.To[int32](9)
	got.Spec.Tags = map[string]string{"team": "billing"}
	g.Expect(env.Client.Update(context.Background(), got)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(attributes(g, got.Status.QueueURL)).To(HaveKeyWithValue("DelaySeconds", "9"))
		g.Expect(tags(g, got.Status.QueueURL)).To(Equal(map[string]string{"team": "billing", ownerTag: ns + "/orders"}))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	waitReady(g, q)

	// Delete (the default policy) removes the queue, then the Queue.
	g.Expect(env.Client.Delete(context.Background(), got)).To(Succeed())
	waitGone(g, q)
	g.Expect(queueExists(g, name)).To(BeFalse())
}

func TestSteadyStateWritesNothing(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	q := newQueue(ns, "idle", func(s *sqsv1alpha1.QueueSpec) { s.QueueName = uniqueName(ns) })
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	got := waitReady(g, q)
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "idle-queue"}, cm)).To(Succeed())

	// Several polls (one a second here) later, nothing was written.
	g.Consistently(func(g Gomega) {
		now := get(g, q)
		g.Expect(now.ResourceVersion).To(Equal(got.ResourceVersion))
		now2 := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(cm), now2)).To(Succeed())
		g.Expect(now2.ResourceVersion).To(Equal(cm.ResourceVersion))
	}).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
}

func TestDeadLetterQueueByReferenceAndFIFO(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	base := uniqueName(ns)
	main := newQueue(ns, "jobs", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName, s.FIFOQueue, s.ContentBasedDeduplication = base+".fifo", true, ptr.To(true)
		s.Redrive = &sqsv1alpha1.Redrive{DeadLetterQueueRef: &corev1.LocalObjectReference{Name: "jobs-dlq"}, MaxReceiveCount: 3}
	})
	g.Expect(env.Client.Create(context.Background(), main)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(condition(get(g, main), sqsv1alpha1.ConditionSynced)).To(Equal("False/WaitingForDeadLetterQueue"))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	dlq := newQueue(ns, "jobs-dlq", func(s *sqsv1alpha1.QueueSpec) { s.QueueName, s.FIFOQueue = base+"-dlq.fifo", true })
	g.Expect(env.Client.Create(context.Background(), dlq)).To(Succeed())
	dlqGot := waitReady(g, dlq)
	got := waitReady(g, main)
	attrs := attributes(g, got.Status.QueueURL)
	g.Expect(attrs).To(HaveKeyWithValue("FifoQueue", "true"))
	g.Expect(attrs).To(HaveKeyWithValue("ContentBasedDeduplication", "true"))
	g.Expect(sameJSON(attrs["RedrivePolicy"], redrivePolicy(dlqGot.Status.QueueARN, 3))).To(BeTrue(), attrs["RedrivePolicy"])
}

func TestUpstreamFaults(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	proxy := faultproxy.Start(t, server.URL)
	createConnectionSecret(g, ns, "via-proxy", proxy.URL())
	name := uniqueName(ns)
	q := newQueue(ns, "faulty", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName = name
		s.Connection = &sqsv1alpha1.Connection{SecretRef: &corev1.LocalObjectReference{Name: "via-proxy"}}
	})
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	waitReady(g, q)

	for _, tc := range []struct {
		mode   faultproxy.Mode
		reason string
	}{
		{faultproxy.Throttle, "False/Throttled"},
		{faultproxy.ServerError, "False/UpstreamError"},
		{faultproxy.Hang, "False/UpstreamError"},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			g := NewWithT(t)
			proxy.SetMode(tc.mode)
			g.Eventually(func(g Gomega) {
				got := get(g, q)
				g.Expect(condition(got, sqsv1alpha1.ConditionSynced)).To(Equal(tc.reason))
				g.Expect(condition(got, sqsv1alpha1.ConditionReady)).To(Equal(tc.reason), "Ready says what Synced says")
				g.Expect(condition(got, sqsv1alpha1.ConditionReconciling)).To(Equal("True/"+strings.TrimPrefix(tc.reason, "False/")),
					"SQS's failures are retried")
				g.Expect(kstatusOf(g, got)).To(Equal(kstatus.InProgressStatus))
			}).WithTimeout(60 * time.Second).Should(Succeed())
			// The failure settles: over the next seconds the Queue keeps
			// saying why, and is not rewritten by the retries (a repeated
			// failure reads the same), while the queue in SQS stays as it
			// was. That the retries back off is TestFailEndsThePass's.
			settled := get(g, q)
			g.Consistently(func(g Gomega) {
				now := get(g, q)
				g.Expect(now.ResourceVersion).To(Equal(settled.ResourceVersion))
				g.Expect(condition(now, sqsv1alpha1.ConditionSynced)).To(Equal(tc.reason))
			}).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
			g.Expect(tags(g, settled.Status.QueueURL)).To(HaveKeyWithValue(ownerTag, ns+"/faulty"))

			proxy.SetMode(faultproxy.PassThrough)
			waitReady(g, q)
		})
	}
	g.Expect(queueExists(g, name)).To(BeTrue())
}

// A paused Queue gets no call to SQS: a spec change waits, and its status
// says why; resumed, the change reaches SQS.
func TestPauseHoldsChangesUntilResumed(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	q := newQueue(ns, "held", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName = uniqueName(ns)
		s.DelaySeconds = ptr.To[int32](5)
	})
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	got := waitReady(g, q)

	got.Annotations = map[string]string{sqsv1alpha1.AnnotationPaused: "true"}
	got.Spec.DelaySeconds = ptr.To[int32](9)
	g.Expect(env.Client.Update(context.Background(), got)).To(Succeed())
	g.Eventually(func(g Gomega) {
		now := get(g, q)
		g.Expect(condition(now, sqsv1alpha1.ConditionSynced)).To(Equal("False/Paused"))
		g.Expect(now.Status.ObservedGeneration).To(Equal(now.Generation))
		g.Expect(kstatusOf(g, now)).To(Equal(kstatus.InProgressStatus))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(attributes(g, got.Status.QueueURL)).To(HaveKeyWithValue("DelaySeconds", "5"))
	}).WithTimeout(3*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "no change reaches SQS while paused")

	now := get(g, q)
	delete(now.Annotations, sqsv1alpha1.AnnotationPaused)
	g.Expect(env.Client.Update(context.Background(), now)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(attributes(g, got.Status.QueueURL)).To(HaveKeyWithValue("DelaySeconds", "9"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	waitReady(g, q)
}

// TestAnotherConfigMapOfThePublishedNameIsLeftAlone: a ConfigMap named
// <queue>-queue that Tend did not make for the Queue (even one carrying
// Tend's label) is neither overwritten nor taken over.
func TestAnotherConfigMapOfThePublishedNameIsLeftAlone(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	theirs := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine-queue", Labels: map[string]string{"app.kubernetes.io/managed-by": "tend"}},
		Data:       map[string]string{"queueURL": "https://example.com/someone-elses"},
	}
	g.Expect(env.Client.Create(context.Background(), theirs)).To(Succeed())
	name := uniqueName(ns)
	q := newQueue(ns, "mine", func(s *sqsv1alpha1.QueueSpec) { s.QueueName = name })
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(queueExists(g, name)).To(BeTrue()) }).WithTimeout(30 * time.Second).Should(Succeed())
	g.Consistently(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(theirs), cm)).To(Succeed())
		g.Expect(cm.Data).To(Equal(theirs.Data))
		g.Expect(cm.OwnerReferences).To(BeEmpty())
		g.Expect(condition(get(g, q), sqsv1alpha1.ConditionReady)).NotTo(HavePrefix("True"))
	}, 3*time.Second).Should(Succeed())
}
