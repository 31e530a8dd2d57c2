package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	"github.com/tend-dev/tend/internal/testing/faultproxy"
	"github.com/tend-dev/tend/internal/testing/moto"
)

// setAttributes changes the queue outside Tend, as a person would.
func setAttributes(g Gomega, api *sqs.Client, url string, attrs map[string]string) {
	_, err := api.SetQueueAttributes(ctx(), &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: attrs})
	g.Expect(err).NotTo(HaveOccurred())
}

func update(g Gomega, q *sqsv1alpha1.Queue, mutate func(*sqsv1alpha1.QueueSpec)) {
	g.Eventually(func(g Gomega) {
		got := get(g, q)
		mutate(&got.Spec)
		g.Expect(env.Client.Update(context.Background(), got)).To(Succeed())
	}).WithTimeout(10 * time.Second).Should(Succeed())
}

func TestKMSAndFIFOThroughput(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	q := newQueue(ns, "jobs", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName, s.FIFOQueue = uniqueName(ns)+".fifo", true
		s.KMSMasterKeyID, s.KMSDataKeyReusePeriodSeconds = "alias/jobs", ptr.To[int32](600)
		s.DeduplicationScope, s.FIFOThroughputLimit = "messageGroup", "perMessageGroupId"
	})
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	got := waitReady(g, q)
	attrs := attributes(g, got.Status.QueueURL)
	g.Expect(attrs).To(HaveKeyWithValue("KmsMasterKeyId", "alias/jobs"))
	g.Expect(attrs).To(HaveKeyWithValue("KmsDataKeyReusePeriodSeconds", "600"))
	g.Expect(attrs).To(HaveKeyWithValue("DeduplicationScope", "messageGroup"))
	g.Expect(attrs).To(HaveKeyWithValue("FifoThroughputLimit", "perMessageGroupId"))

	// An update reaches SQS.
	update(g, q, func(s *sqsv1alpha1.QueueSpec) {
		s.KMSMasterKeyID, s.KMSDataKeyReusePeriodSeconds = "alias/other", ptr.To[int32](900)
		s.FIFOThroughputLimit = "perQueue"
	})
	g.Eventually(func(g Gomega) {
		attrs := attributes(g, got.Status.QueueURL)
		g.Expect(attrs).To(HaveKeyWithValue("KmsMasterKeyId", "alias/other"))
		g.Expect(attrs).To(HaveKeyWithValue("KmsDataKeyReusePeriodSeconds", "900"))
		g.Expect(attrs).To(HaveKeyWithValue("FifoThroughputLimit", "perQueue"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	waitReady(g, q)

	// Changes made outside come back at the next poll.
	setAttributes(g, sqsAPI, got.Status.QueueURL, map[string]string{
		"KmsMasterKeyId": "alias/intruder", "KmsDataKeyReusePeriodSeconds": "60", "DeduplicationScope": "queue", "FifoThroughputLimit": "perMessageGroupId",
	})
	g.Eventually(func(g Gomega) {
		attrs := attributes(g, got.Status.QueueURL)
		g.Expect(attrs).To(HaveKeyWithValue("KmsMasterKeyId", "alias/other"))
		g.Expect(attrs).To(HaveKeyWithValue("KmsDataKeyReusePeriodSeconds", "900"))
		g.Expect(attrs).To(HaveKeyWithValue("DeduplicationScope", "messageGroup"))
		g.Expect(attrs).To(HaveKeyWithValue("FifoThroughputLimit", "perQueue"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) []string { return eventReasons(g, got) }).WithTimeout(10 * time.Second).Should(ContainElement("DriftRepaired"))
}

// moto 5.2.1 never returns RedriveAllowPolicy, so these calls go through
// sqsShim, which keeps it as SQS does.
func TestRedriveAllowPolicy(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	shim := startShim(t, server.URL, sqsAPI)
	createConnectionSecret(g, ns, "via-shim", shim.URL)
	viaShim := func(s *sqsv1alpha1.QueueSpec) {
		s.Connection = &sqsv1alpha1.Connection{SecretRef: &corev1.LocalObjectReference{Name: "via-shim"}}
	}
	base := uniqueName(ns)
	// The dead-letter queue names its source by reference before that
	// Queue exists: it waits for it, then allows it.
	dlq := newQueue(ns, "orders-dlq", func(s *sqsv1alpha1.QueueSpec) {
		viaShim(s)
		s.QueueName = base + "-dlq"
		s.RedriveAllowPolicy = &sqsv1alpha1.RedriveAllowPolicy{RedrivePermission: "byQueue",
			SourceQueueRefs: []corev1.LocalObjectReference{{Name: "orders"}}, SourceQueueARNs: []string{"arn:aws:sqs:us-east-1:" + moto.AccountID + ":elsewhere"}}
	})
	g.Expect(env.Client.Create(context.Background(), dlq)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(condition(get(g, dlq), sqsv1alpha1.ConditionSynced)).To(Equal("False/WaitingForSourceQueue"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	src := newQueue(ns, "orders", func(s *sqsv1alpha1.QueueSpec) {
		viaShim(s)
		s.QueueName = base
		s.Redrive = &sqsv1alpha1.Redrive{DeadLetterQueueRef: &corev1.LocalObjectReference{Name: "orders-dlq"}, MaxReceiveCount: 2}
	})
	g.Expect(env.Client.Create(context.Background(), src)).To(Succeed())
	dlqGot, srcGot := waitReady(g, dlq), waitReady(g, src)
	want := redriveAllowPolicy("byQueue", []string{srcGot.Status.QueueARN, "arn:aws:sqs:us-east-1:" + moto.AccountID + ":elsewhere"})
	shimAPI := sqs.NewFromConfig(awssdk.Config{Region: moto.Region, Credentials: sqsAPI.Options().Credentials, BaseEndpoint: &shim.URL})
	g.Eventually(func(g Gomega) {
		out, err := shimAPI.GetQueueAttributes(ctx(), &sqs.GetQueueAttributesInput{QueueUrl: &dlqGot.Status.QueueURL, AttributeNames: []sqstypes.QueueAttributeName{"All"}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(sameJSON(sortedSources(out.Attributes["RedriveAllowPolicy"]), want)).To(BeTrue(), out.Attributes["RedriveAllowPolicy"])
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// An update, then a change outside that the next poll reverts.
	update(g, dlq, func(s *sqsv1alpha1.QueueSpec) {
		s.RedriveAllowPolicy = &sqsv1alpha1.RedriveAllowPolicy{RedrivePermission: "allowAll"}
	})
	current := func(g Gomega) string {
		out, err := shimAPI.GetQueueAttributes(ctx(), &sqs.GetQueueAttributesInput{QueueUrl: &dlqGot.Status.QueueURL, AttributeNames: []sqstypes.QueueAttributeName{"All"}})
		g.Expect(err).NotTo(HaveOccurred())
		return out.Attributes["RedriveAllowPolicy"]
	}
	g.Eventually(current).WithTimeout(30 * time.Second).Should(MatchJSON(`{"redrivePermission":"allowAll"}`))
	setAttributes(g, shimAPI, dlqGot.Status.QueueURL, map[string]string{"RedriveAllowPolicy": `{"redrivePermission":"denyAll"}`})
	g.Eventually(current).WithTimeout(30 * time.Second).Should(MatchJSON(`{"redrivePermission":"allowAll"}`))

	// In line, polls set nothing.
	waitReady(g, dlq)
	before := len(shim.Calls("SetQueueAttributes"))
	time.Sleep(3 * testPoll)
	g.Expect(shim.Calls("SetQueueAttributes")).To(HaveLen(before))
}

func TestPolicyComparedByMeaning(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	proxy := faultproxy.Start(t, server.URL)
	createConnectionSecret(g, ns, "via-proxy", proxy.URL())
	policy := `{"Version":"2012-10-17","Statement":[{"Sid":"send","Effect":"Allow","Principal":{"AWS":"*"},"Action":["sqs:SendMessage","sqs:ReceiveMessage"],"Resource":"*"}]}`
	q := newQueue(ns, "orders", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName = uniqueName(ns)
		s.Connection = &sqsv1alpha1.Connection{SecretRef: &corev1.LocalObjectReference{Name: "via-proxy"}}
		s.Policy = &apiextensionsv1.JSON{Raw: []byte(policy)}
	})
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	got := waitReady(g, q)
	proxy.ResetCounts()

	// The same policy, written in SQS in another key order and spacing.
	reordered := "{\n  \"Statement\" : [ {\n    \"Resource\" : \"*\",\n    \"Action\" : [ \"sqs:SendMessage\", \"sqs:ReceiveMessage\" ],\n" +
		"    \"Principal\" : { \"AWS\" : \"*\" },\n    \"Effect\" : \"Allow\",\n    \"Sid\" : \"send\"\n  } ],\n  \"Version\" : \"2012-10-17\"\n}"
	setAttributes(g, sqsAPI, got.Status.QueueURL, map[string]string{"Policy": reordered})
	// And the spec rewritten the same way: a new generation, the same meaning.
	update(g, q, func(s *sqsv1alpha1.QueueSpec) { s.Policy = &apiextensionsv1.JSON{Raw: []byte(reordered)} })
	g.Eventually(func(g Gomega) {
		now := get(g, q)
		g.Expect(now.Status.ObservedGeneration).To(Equal(now.Generation))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	time.Sleep(3 * testPoll)
	g.Expect(proxy.CountOperation("GetQueueAttributes")).To(BeNumerically(">=", 2), "polls happened")
	g.Expect(proxy.CountOperation("SetQueueAttributes")).To(BeZero())
	g.Expect(eventReasons(g, got)).NotTo(ContainElements("DriftRepaired", "Updated"))
}

func TestQueueDepthInStatus(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	q := newQueue(ns, "work", func(s *sqsv1alpha1.QueueSpec) { s.QueueName = uniqueName(ns) })
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	got := waitReady(g, q)
	g.Expect(got.Status.Messages).To(Equal(&sqsv1alpha1.QueueMessages{}))
	url := got.Status.QueueURL
	messages := func(g Gomega) sqsv1alpha1.QueueMessages {
		m := get(g, q).Status.Messages
		g.Expect(m).NotTo(BeNil())
		return *m
	}
	for i := range 3 {
		_, err := sqsAPI.SendMessage(ctx(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: awssdk.String("m" + string(rune('0'+i)))})
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err := sqsAPI.SendMessage(ctx(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: awssdk.String("later"), DelaySeconds: 900})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(messages).WithTimeout(30 * time.Second).Should(Equal(sqsv1alpha1.QueueMessages{Visible: 3, Delayed: 1}))
	out, err := sqsAPI.ReceiveMessage(ctx(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 3, VisibilityTimeout: 600})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Messages).To(HaveLen(3))
	g.Eventually(messages).WithTimeout(30 * time.Second).Should(Equal(sqsv1alpha1.QueueMessages{InFlight: 3, Delayed: 1}))
	for _, m := range out.Messages {
		_, err := sqsAPI.DeleteMessage(ctx(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err = sqsAPI.PurgeQueue(ctx(), &sqs.PurgeQueueInput{QueueUrl: &url})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(messages).WithTimeout(30 * time.Second).Should(Equal(sqsv1alpha1.QueueMessages{}))

	// An idle, empty queue's polls write nothing.
	rv := get(g, q).ResourceVersion
	g.Consistently(func(g Gomega) string { return get(g, q).ResourceVersion }).
		WithTimeout(4 * testPoll).WithPolling(500 * time.Millisecond).Should(Equal(rv))
}

func TestObserveOnly(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	proxy := faultproxy.Start(t, server.URL)
	createConnectionSecret(g, ns, "via-proxy", proxy.URL())
	name := uniqueName(ns)
	q := newQueue(ns, "theirs", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName, s.ManagementPolicy = name, sqsv1alpha1.ManagementPolicyObserve
		s.Connection = &sqsv1alpha1.Connection{SecretRef: &corev1.LocalObjectReference{Name: "via-proxy"}}
	})
	// No queue yet: Observe never creates one.
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(condition(get(g, q), sqsv1alpha1.ConditionReady)).To(Equal("False/QueueMissing"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(queueExists(g, name)).To(BeFalse())

	// Someone else creates it, with a message in it.
	created, err := sqsAPI.CreateQueue(ctx(), &sqs.CreateQueueInput{QueueName: &name,
		Attributes: map[string]string{"DelaySeconds": "7"}, Tags: map[string]string{"team": "other"}})
	g.Expect(err).NotTo(HaveOccurred())
	url := awssdk.ToString(created.QueueUrl)
	_, err = sqsAPI.SendMessage(ctx(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: awssdk.String("x")})
	g.Expect(err).NotTo(HaveOccurred())
	update(g, q, func(s *sqsv1alpha1.QueueSpec) { s.PollInterval = &metav1.Duration{Duration: 31 * time.Second} }) // a pass now
	got := waitReady(g, q)
	g.Expect(got.Status.QueueURL).To(HaveSuffix(lastSegment(url)))
	g.Expect(got.Status.Attributes).To(HaveKeyWithValue("DelaySeconds", "7"))
	g.Expect(got.Status.Attributes).NotTo(HaveKey("ApproximateNumberOfMessages"))
	g.Expect(got.Status.Messages).To(Equal(&sqsv1alpha1.QueueMessages{Delayed: 1}), "the queue delays every message by 7s")
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "theirs-queue"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("queueURL", got.Status.QueueURL))
	g.Expect(cm.Data).To(HaveKeyWithValue("region", moto.Region))

	// A change outside is reported, not reverted; a redrive request is refused.
	setAttributes(g, sqsAPI, url, map[string]string{"DelaySeconds": "8"})
	g.Expect(env.Client.Patch(context.Background(), got, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"`+sqsv1alpha1.AnnotationRedrive+`":"now"}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		now := get(g, q)
		g.Expect(now.Status.Attributes).To(HaveKeyWithValue("DelaySeconds", "8"))
		g.Expect(now.Status.Redrive).NotTo(BeNil())
		g.Expect(now.Status.Redrive.State).To(Equal("Failed"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	for _, op := range []string{"CreateQueue", "SetQueueAttributes", "TagQueue", "UntagQueue", "DeleteQueue", "StartMessageMoveTask"} {
		g.Expect(proxy.CountOperation(op)).To(BeZero(), op)
	}
	g.Expect(tags(g, url)).To(Equal(map[string]string{"team": "other"}))

	// Managing it now follows the adoption rules: a queue that no Queue
	// owns is refused with adoption None.
	update(g, q, func(s *sqsv1alpha1.QueueSpec) { s.ManagementPolicy = sqsv1alpha1.ManagementPolicyManage })
	g.Eventually(func(g Gomega) {
		g.Expect(condition(get(g, q), sqsv1alpha1.ConditionSynced)).To(Equal("False/QueueExists"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(proxy.CountOperation("SetQueueAttributes") + proxy.CountOperation("TagQueue")).To(BeZero())

	// Back to Observe, then delete: the queue stays, whatever deletionPolicy says.
	update(g, q, func(s *sqsv1alpha1.QueueSpec) { s.ManagementPolicy = sqsv1alpha1.ManagementPolicyObserve })
	waitReady(g, q)
	g.Expect(env.Client.Delete(context.Background(), get(g, q))).To(Succeed())
	waitGone(g, q)
	g.Expect(queueExists(g, name)).To(BeTrue())
	g.Expect(proxy.CountOperation("DeleteQueue")).To(BeZero())
}

// moto 5.2.1 does not implement the message move task (it answers 500), so
// these calls go through sqsShim, which carries the move out on moto.
func TestRedriveAction(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	shim := startShim(t, server.URL, sqsAPI)
	createConnectionSecret(g, ns, "via-shim", shim.URL)
	viaShim := &sqsv1alpha1.Connection{SecretRef: &corev1.LocalObjectReference{Name: "via-shim"}}
	base := uniqueName(ns)
	dlq := newQueue(ns, "orders-dlq", func(s *sqsv1alpha1.QueueSpec) { s.QueueName, s.Connection = base+"-dlq", viaShim })
	src := newQueue(ns, "orders", func(s *sqsv1alpha1.QueueSpec) {
		s.QueueName, s.Connection = base, viaShim
		s.Redrive = &sqsv1alpha1.Redrive{DeadLetterQueueRef: &corev1.LocalObjectReference{Name: "orders-dlq"}, MaxReceiveCount: 1}
	})
	g.Expect(env.Client.Create(context.Background(), dlq)).To(Succeed())
	g.Expect(env.Client.Create(context.Background(), src)).To(Succeed())
	dlqGot, srcGot := waitReady(g, dlq), waitReady(g, src)
	for _, body := range []string{"a", "b"} {
		_, err := sqsAPI.SendMessage(ctx(), &sqs.SendMessageInput{QueueUrl: &dlqGot.Status.QueueURL, MessageBody: awssdk.String(body)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Eventually(func(g Gomega) *sqsv1alpha1.QueueMessages { return get(g, dlq).Status.Messages }).
		WithTimeout(30 * time.Second).Should(Equal(&sqsv1alpha1.QueueMessages{Visible: 2}))
	idle := len(shim.Calls("StartMessageMoveTask")) + len(shim.Calls("ListMessageMoveTasks"))
	g.Expect(idle).To(BeZero(), "no request, no call")

	g.Expect(env.Client.Patch(context.Background(), dlqGot, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"`+sqsv1alpha1.AnnotationRedrive+`":"2026-11-27T12:00:00Z"}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		st := get(g, dlq).Status.Redrive
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.Request).To(Equal("2026-11-27T12:00:00Z"))
		g.Expect(st.State).To(Equal("COMPLETED"))
		g.Expect(st.MessagesMoved).To(Equal(int64(2)))
	}).WithTimeout(60 * time.Second).Should(Succeed())
	starts := shim.Calls("StartMessageMoveTask")
	g.Expect(starts).To(HaveLen(1))
	g.Expect(starts[0].Body).To(Equal(map[string]any{"SourceArn": dlqGot.Status.QueueARN}))
	g.Expect(shim.Calls("ListMessageMoveTasks")).NotTo(BeEmpty())
	g.Expect(shim.Calls("ListMessageMoveTasks")[0].Body).To(HaveKeyWithValue("SourceArn", dlqGot.Status.QueueARN))
	// The messages are back in the source queue.
	out, err := sqsAPI.ReceiveMessage(ctx(), &sqs.ReceiveMessageInput{QueueUrl: &srcGot.Status.QueueURL, MaxNumberOfMessages: 10})
	g.Expect(err).NotTo(HaveOccurred())
	var bodies []string
	for _, m := range out.Messages {
		bodies = append(bodies, awssdk.ToString(m.Body))
	}
	g.Expect(bodies).To(ConsistOf("a", "b"))
	g.Eventually(func(g Gomega) []string { return eventReasons(g, dlqGot) }).WithTimeout(10 * time.Second).
		Should(ContainElements("RedriveStarted", "RedriveFinished"))

	// Answered: later polls start nothing more.
	time.Sleep(3 * testPoll)
	g.Expect(shim.Calls("StartMessageMoveTask")).To(HaveLen(1))
}

// Against moto itself, which does not implement the move, the request
// fails the pass and says so, and Tend retries.
func TestRedriveAgainstMotoSaysWhy(t *testing.T) {
	startManager(t)
	g := NewWithT(t)
	ns := env.Namespace(t)
	q := newQueue(ns, "dlq", func(s *sqsv1alpha1.QueueSpec) { s.QueueName = uniqueName(ns) })
	g.Expect(env.Client.Create(context.Background(), q)).To(Succeed())
	got := waitReady(g, q)
	g.Expect(env.Client.Patch(context.Background(), got, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"`+sqsv1alpha1.AnnotationRedrive+`":"x"}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := cond(get(g, q), sqsv1alpha1.ConditionSynced)
		g.Expect(c.Reason).To(Equal(sqsv1alpha1.ReasonUpstreamError))
		g.Expect(strings.Contains(c.Message, "StartMessageMoveTask")).To(BeTrue(), c.Message)
	}).WithTimeout(30 * time.Second).Should(Succeed())
}
