package queue

import (
	"context"
	"fmt"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

// create makes the queue with its attributes and tags, and records it. A
// redriveAllowPolicy that names source Queues needs the new queue's ARN,
// so it is set right after the create, in the same pass.
func (r *Reconciler) create(ctx context.Context, api *sqs.Client, q *sqsv1alpha1.Queue, dlqARN string) error {
	sources, err := r.sourceARNs(ctx, q, "")
	if err != nil {
		return err
	}
	out, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  awssdk.String(q.SQSName()),
		Attributes: createAttributes(&q.Spec, dlqARN, sources),
		Tags:       desiredTags(q),
	})
	if err != nil {
		return fmt.Errorf("creating the queue: %w", err)
	}
	url := awssdk.ToString(out.QueueUrl)
	arn, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return fmt.Errorf("reading the new queue's ARN: %w", err)
	}
	recreated := q.Status.QueueURL != ""
	q.Status.QueueURL, q.Status.QueueARN = url, arn.Attributes[attrQueueArn]
	q.Status.Messages = &sqsv1alpha1.QueueMessages{} // a new queue is empty
	if p := q.Spec.RedriveAllowPolicy; p != nil && len(p.SourceQueueRefs) > 0 {
		sources, err := r.sourceARNs(ctx, q, q.Status.QueueARN)
		if err != nil {
			return err
		}
		if _, err := api.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{
			attrRedriveAllowPolicy: redriveAllowPolicy(p.RedrivePermission, sources),
		}}); err != nil {
			return fmt.Errorf("setting the new queue's RedriveAllowPolicy: %w", err)
		}
	}
	now := metav1.NewTime(r.Clock.Now())
	q.Status.LastSyncTime = &now
	if recreated {
		r.event(q, corev1.EventTypeWarning, "Recreated", "Create",
			"The SQS queue was deleted outside Kubernetes; created it again at "+url)
	} else {
		r.event(q, corev1.EventTypeNormal, "Created", "Create", "Created the SQS queue "+url)
	}
	return nil
}
