package queue

import (
	"net/url"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
)

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
