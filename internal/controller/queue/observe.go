package queue

import (
	"context"
	"fmt"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
)

// observe reads the queue from SQS: its URL (when status lacks it), its
// attributes and its tags. A queue that is not there is not an error.
func observe(ctx context.Context, api *sqs.Client, q *sqsv1alpha1.Queue) (observed, error) {
	url := q.Status.QueueURL
	if url == "" {
		out, err := api.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: awssdk.String(q.SQSName())})
		if tendaws.Classify(err) == tendaws.NotFound {
			return observed{}, nil
		}
		if err != nil {
			return observed{}, fmt.Errorf("looking up the queue's URL: %w", err)
		}
		url = awssdk.ToString(out.QueueUrl)
	}
	// Attributes and tags take their tokens together: with a token each, a
	// restart's thousands of due passes would spend the bucket on first
	// calls and finish none.
	ctx = tendaws.WithCallGroup(ctx, 2)
	attrs, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
	})
	if tendaws.Classify(err) == tendaws.NotFound {
		return observed{}, nil
	}
	if err != nil {
		return observed{}, fmt.Errorf("reading the queue's attributes: %w", err)
	}
	tags, err := api.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: &url})
	if tendaws.Classify(err) == tendaws.NotFound {
		return observed{}, nil
	}
	if err != nil {
		return observed{}, fmt.Errorf("reading the queue's tags: %w", err)
	}
	return observed{exists: true, url: url, attrs: attrs.Attributes, tags: tags.Tags}, nil
}
