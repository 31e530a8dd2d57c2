package queue

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

// reconcileObserve is the pass of a Queue with managementPolicy Observe: it
// reads the queue (the same calls as a managed pass's observe) and reports
// its URL, ARN, attributes and depth, and publishes its ConfigMap. It makes
// no call that changes the queue: no create, no attribute, no tag, no
// message move. Whose owner tag the queue carries does not matter, since
// reading takes nothing from its owner.
func (r *Reconciler) reconcileObserve(ctx, callCtx context.Context, api *sqs.Client, q *sqsv1alpha1.Queue) (ctrl.Result, error) {
	obs, err := observe(callCtx, api, q)
	if err != nil {
		return r.fail(q, err)
	}
	q.Status.ObservedGeneration = q.Generation
	if !obs.exists {
		q.Status.QueueURL, q.Status.QueueARN, q.Status.Messages, q.Status.Attributes = "", "", nil, nil
		setSynced(q, metav1.ConditionTrue, sqsv1alpha1.ReasonSynced, "")
		setReady(q, metav1.ConditionFalse, sqsv1alpha1.ReasonQueueMissing, fmt.Sprintf(
			"No SQS queue named %s exists, and managementPolicy Observe never creates one: create it, or set spec.managementPolicy to Manage", q.SQSName()))
		return r.done(q), nil
	}
	q.Status.QueueURL, q.Status.QueueARN = obs.url, obs.attrs[attrQueueArn]
	q.Status.Messages = messagesOf(obs.attrs)
	q.Status.Attributes = reportedAttributes(obs.attrs)
	if err := r.publish(ctx, q); err != nil {
		return ctrl.Result{}, err
	}
	r.refuseRedrive(q, "managementPolicy Observe changes nothing in SQS, messages included")
	setSynced(q, metav1.ConditionTrue, sqsv1alpha1.ReasonSynced, "")
	setReady(q, metav1.ConditionTrue, sqsv1alpha1.ReasonAvailable,
		"The queue exists; Tend observes it and changes nothing (managementPolicy Observe)")
	return r.done(q), nil
}
