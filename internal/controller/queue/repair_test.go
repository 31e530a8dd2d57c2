package queue

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

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
