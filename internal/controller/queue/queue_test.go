package queue

import (
	"context"
	"net/url"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
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
	attrs := attributes(g, got.Status.QueueURL)
	g.Expect(attrs).To(HaveKeyWithValue("DelaySeconds", "5"))
	g.Expect(attrs).To(HaveKeyWithValue("VisibilityTimeout", "120"))
	g.Expect(sameJSON(attrs["Policy"], string(q.Spec.Policy.Raw))).To(BeTrue(), attrs["Policy"])
	g.Expect(tags(g, got.Status.QueueURL)).To(Equal(map[string]string{"team": "payments", ownerTag: ns + "/orders"}))

	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "orders-queue"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(Equal(map[string]string{"queueName": name, "queueURL": got.Status.QueueURL, "queueARN": got.Status.QueueARN}))
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

func TestDriftIsRepaired(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	name := uniqueName(ns)
	q := newQueue(ns, "drift", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName = name
		s.MessageRetentionPeriod = ptr.To[int32](3600)
		s.Tags = map[string]string{"env": "test"}
	})
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	got := waitReady(g, q)
	url := got.Status.QueueURL

	// Out of band: an attribute changed, a tag removed, a foreign tag added.
	_, err := sqsAPI.SetQueueAttributes(ctx(), &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"MessageRetentionPeriod": "600"}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = sqsAPI.UntagQueue(ctx(), &sqs.UntagQueueInput{QueueUrl: &url, TagKeys: []string{"env"}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = sqsAPI.TagQueue(ctx(), &sqs.TagQueueInput{QueueUrl: &url, Tags: map[string]string{"stray": "x"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		g.Expect(attributes(g, url)).To(HaveKeyWithValue("MessageRetentionPeriod", "3600"))
		g.Expect(tags(g, url)).To(Equal(map[string]string{"env": "test", ownerTag: ns + "/drift"}))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// Out of band: the queue deleted. It comes back at the same URL.
	_, err = sqsAPI.DeleteQueue(ctx(), &sqs.DeleteQueueInput{QueueUrl: &url})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		g.Expect(queueExists(g, name)).To(BeTrue())
		g.Expect(attributes(g, url)).To(HaveKeyWithValue("MessageRetentionPeriod", "3600"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	got = waitReady(g, q)
	g.Expect(got.Status.QueueURL).To(Equal(url))
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

func TestAdoption(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	name := uniqueName(ns)
	out, err := sqsAPI.CreateQueue(ctx(), &sqs.CreateQueueInput{QueueName: awssdk.String(name), Tags: map[string]string{"made-by": "hand"}})
	g.Expect(err).NotTo(HaveOccurred())

	// adoption None refuses a queue that Tend did not make, and says how to proceed.
	q := newQueue(ns, "foreign", func(s *sqsv1alpha1.QueueSpec) { s.QueueName = name })
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, q)
		g.Expect(condition(got, sqsv1alpha1.ConditionSynced)).To(Equal("False/QueueExists"))
		g.Expect(cond(got, sqsv1alpha1.ConditionSynced).Message).To(ContainSubstring("set spec.adoption to Adopt or AdoptOrCreate"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(tags(g, *out.QueueUrl)).NotTo(HaveKey(ownerTag), "a refused queue is not touched")

	// Adopt takes it over, and tags it as Tend's.
	got := get(g, q)
	got.Spec.Adoption = sqsv1alpha1.AdoptionAdopt
	g.Expect(env.Client.Update(context.Background(), got)).To(Succeed())
	got = waitReady(g, q)
	g.Expect(got.Status.QueueURL).To(Equal(*out.QueueUrl))
	g.Expect(tags(g, *out.QueueUrl)).To(HaveKeyWithValue(ownerTag, ns+"/foreign"))
	g.Expect(tags(g, *out.QueueUrl)).To(HaveKeyWithValue("made-by", "hand"), "tags are Tend's only when the spec declares them")

	// Adopt never creates: a missing queue is reported, not made.
	missing := newQueue(ns, "missing", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName = uniqueName(ns) + "-m"
		s.Adoption = sqsv1alpha1.AdoptionAdopt
	})
	g.Expect(env.Client.Create(context.Background(), missing)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(condition(get(g, missing), sqsv1alpha1.ConditionReady)).To(Equal("False/QueueMissing"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(queueExists(g, missing.Spec.QueueName)).To(BeFalse())
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

func TestConnectionSecret(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	q := newQueue(ns, "via-secret", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName = uniqueName(ns)
		s.Connection = &sqsv1alpha1.Connection{SecretRef: &corev1.LocalObjectReference{Name: "aws"}}
	})
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, q)
		g.Expect(condition(got, sqsv1alpha1.ConditionSynced)).To(Equal("False/ConnectionError"))
		g.Expect(cond(got, sqsv1alpha1.ConditionSynced).Message).To(ContainSubstring(`reading the connection Secret aws`))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// The Secret's arrival starts a pass by itself.
	createConnectionSecret(g, ns, "aws", server.URL)
	waitReady(g, q)
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
			proxy.ResetCounts()
			g.Eventually(func(g Gomega) {
				got := get(g, q)
				g.Expect(condition(got, sqsv1alpha1.ConditionSynced)).To(Equal(tc.reason))
				g.Expect(condition(got, sqsv1alpha1.ConditionReady)).To(Equal("False/Unavailable"))
			}).WithTimeout(60 * time.Second).Should(Succeed())
			// Backoff, not a hot loop: over the next seconds the failing
			// calls stay few (a hot loop would make thousands).
			time.Sleep(5 * time.Second)
			g.Expect(proxy.Count(tc.mode)).To(BeNumerically("<", 20))

			proxy.SetMode(faultproxy.PassThrough)
			waitReady(g, q)
		})
	}
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

// TestObserveTakesItsTokensTogether shows that an observe makes both its
// calls or none. One that got its first call through and found no token for
// the second would have spent a token for nothing; after a restart, when
// every Queue is due at once, such passes spend the whole bucket and none
// finishes.
func TestObserveTakesItsTokensTogether(t *testing.T) {
	startManager(t) // and sqsAPI with it
	g := NewWithT(t)
	name := uniqueName("observe")
	out, err := sqsAPI.CreateQueue(ctx(), &sqs.CreateQueueInput{QueueName: awssdk.String(name)})
	g.Expect(err).NotTo(HaveOccurred())
	// Time stands still: 3 tokens, ever; one observe and one token over.
	limiters, err := tendaws.NewLimiters(tendaws.LimiterOptions{QPS: 1, Burst: 3, Clock: clocktesting.NewFakePassiveClock(time.Now())})
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := tendaws.LoadConfig(ctx(), tendaws.Connection{Limiters: limiters})
	g.Expect(err).NotTo(HaveOccurred())
	api := sqs.NewFromConfig(cfg)
	q := newQueue("observe", "observe", func(s *sqsv1alpha1.QueueSpec) { s.QueueName = name })
	q.Status.QueueURL = *out.QueueUrl

	obs, err := observe(ctx(), api, q)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(obs.exists).To(BeTrue())
	_, err = observe(ctx(), api, q)
	g.Expect(tendaws.Classify(err)).To(Equal(tendaws.Throttled))

	u, err := url.Parse(server.URL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(limiters.Stats(tendaws.EndpointKey(u))).To(Equal(tendaws.Stats{Sent: 2, Refused: 1}),
		"the refused observe sent nothing")
}

func cond(q *sqsv1alpha1.Queue, typ string) metav1.Condition {
	for _, c := range q.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

// waitGone waits until the Queue has left the apiserver.
func waitGone(g Gomega, q *sqsv1alpha1.Queue) {
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(q), &sqsv1alpha1.Queue{}))
	}).WithTimeout(30 * time.Second).Should(BeTrue())
}

// createConnectionSecret creates a connection Secret that sends a Queue's
// SQS calls to endpoint.
func createConnectionSecret(g Gomega, ns, name, endpoint string) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{
		keyAccessKeyID: "test", keySecretAccessKey: "test", keyEndpointSQS: endpoint,
	}}
	g.Expect(env.Client.Create(context.Background(), secret)).To(Succeed())
}
