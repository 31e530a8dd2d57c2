package aws

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/fence"
	"github.com/tend-dev/tend/internal/testing/faultproxy"
	"github.com/tend-dev/tend/internal/testing/moto"
)

// lostLease is a Gate of a process that lost its Lease: it refuses, as the
// manager's does, with an error wrapping fence.ErrNotLeader, and counts
// the calls that asked it.
type lostLease struct{ asked atomic.Int32 }

func (g *lostLease) Allow(context.Context) error {
	g.asked.Add(1)
	return fmt.Errorf("%w: the Lease tend-system/tend.tend.dev is held by %q", fence.ErrNotLeader, "tend-manager-b")
}

// TestIsRead: every SQS operation is a read or passes the Gate, and the
// reads are those whose names say so.
func TestIsRead(t *testing.T) {
	g := NewWithT(t)
	reads := []string{"GetQueueAttributes", "GetQueueUrl", "ListDeadLetterSourceQueues", "ListMessageMoveTasks",
		"ListQueueTags", "ListQueues", "GetObject", "HeadObject", "HeadBucket", "ListObjectsV2"}
	writes := []string{"AddPermission", "CancelMessageMoveTask", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch",
		"CreateQueue", "DeleteMessage", "DeleteMessageBatch", "DeleteQueue", "PurgeQueue", "ReceiveMessage",
		"RemovePermission", "SendMessage", "SendMessageBatch", "SetQueueAttributes", "StartMessageMoveTask",
		"TagQueue", "UntagQueue", "PutObject", "DeleteObject", "CreateMultipartUpload", ""}
	for _, op := range reads {
		g.Expect(isRead(op)).To(BeTrue(), op)
	}
	for _, op := range writes {
		g.Expect(isRead(op)).To(BeFalse(), op)
	}
}

// TestGateRefusesChangesAndSendsNothing: with a Gate that refuses, as the
// manager's does once its Lease is lost, no SQS call that changes
// something reaches moto (a proxy in front of it counts the requests), each
// returns the Gate's error, and moto's queue is as it was; the reads go
// through without asking the Gate.
func TestGateRefusesChangesAndSendsNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := callCtx(t)
	proxy := faultproxy.Start(t, server.URL)
	gate := &lostLease{}
	fenced := newSQS(t, Connection{
		Region:      moto.Region,
		EndpointURL: proxy.URL(),
		Credentials: &StaticCredentials{AccessKeyID: moto.AccessKeyID, SecretAccessKey: moto.SecretAccessKey},
		Limiters:    newLimiters(t),
		Gate:        gate,
	})
	kept, created := "fence-kept-"+t.Name(), "fence-created-"+t.Name()
	out, err := direct(t).CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  &kept,
		Attributes: map[string]string{"VisibilityTimeout": "30"},
		Tags:       map[string]string{"tend.dev/owner": "ns/kept"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	url := out.QueueUrl
	t.Cleanup(func() { _, _ = direct(t).DeleteQueue(callCtx(t), &sqs.DeleteQueueInput{QueueUrl: url}) })

	// In order: the queue is deleted last, were the Gate not to hold.
	writes := []struct {
		op   string
		call func() error
	}{
		{"CreateQueue", func() error {
			_, err := fenced.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &created})
			return err
		}},
		{"SetQueueAttributes", func() error {
			_, err := fenced.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: url, Attributes: map[string]string{"VisibilityTimeout": "60"}})
			return err
		}},
		{"TagQueue", func() error {
			_, err := fenced.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: url, Tags: map[string]string{"tend.dev/owner": "ns/other"}})
			return err
		}},
		{"UntagQueue", func() error {
			_, err := fenced.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: url, TagKeys: []string{"tend.dev/owner"}})
			return err
		}},
		{"SendMessage", func() error {
			_, err := fenced.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: awssdk.String("m")})
			return err
		}},
		{"PurgeQueue", func() error {
			_, err := fenced.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: url})
			return err
		}},
		{"DeleteQueue", func() error {
			_, err := fenced.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: url})
			return err
		}},
	}
	for _, w := range writes {
		err := w.call()
		g.Expect(err).To(MatchError(fence.ErrNotLeader), w.op)
		g.Expect(err).To(MatchError(ContainSubstring(w.op)), "the error names the operation")
		g.Expect(Classify(err)).To(Equal(Transient), w.op)
	}
	g.Expect(gate.asked.Load()).To(BeEquivalentTo(len(writes)))
	g.Expect(proxy.Total()).To(BeZero(), "a refused call sends nothing")

	// moto's queue is as it was, and no other was made.
	_, err = direct(t).GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &created})
	g.Expect(Classify(err)).To(Equal(NotFound), "no queue %s: %v", created, err)
	attrs, err := direct(t).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(attrs.Attributes).To(HaveKeyWithValue("VisibilityTimeout", "30"))
	g.Expect(attrs.Attributes).To(HaveKeyWithValue("ApproximateNumberOfMessages", "0"))
	tags, err := direct(t).ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: url})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tags.Tags).To(Equal(map[string]string{"tend.dev/owner": "ns/kept"}))

	// Reads are not fenced.
	_, err = fenced.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &kept})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = fenced.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: url})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gate.asked.Load()).To(BeEquivalentTo(len(writes)), "reads do not ask the Gate")
	g.Expect(proxy.CountOperation("GetQueueUrl")).To(Equal(1))
	g.Expect(proxy.CountOperation("ListQueueTags")).To(Equal(1))
}

// TestGateLetsTheLeaderChange: a Gate that allows lets the changes through,
// each asking it once.
func TestGateLetsTheLeaderChange(t *testing.T) {
	g := NewWithT(t)
	ctx := callCtx(t)
	var asked atomic.Int32
	fenced := newSQS(t, Connection{
		Region:      moto.Region,
		EndpointURL: server.URL,
		Credentials: &StaticCredentials{AccessKeyID: moto.AccessKeyID, SecretAccessKey: moto.SecretAccessKey},
		Limiters:    newLimiters(t),
		Gate:        gateFunc(func(context.Context) error { asked.Add(1); return nil }),
	})
	name := "fence-leader-" + t.Name()
	out, err := fenced.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = fenced.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = fenced.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = direct(t).GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name})
	g.Expect(Classify(err)).To(Equal(NotFound), "no queue %s: %v", name, err)
	g.Expect(asked.Load()).To(BeEquivalentTo(2))
}

type gateFunc func(context.Context) error

func (f gateFunc) Allow(ctx context.Context) error { return f(ctx) }
