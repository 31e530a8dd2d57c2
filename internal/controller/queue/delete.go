package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
)

// reconcileDelete deletes or retains the SQS queue, then lets the Queue go.
func (r *Reconciler) reconcileDelete(ctx context.Context, q *sqsv1alpha1.Queue) (res ctrl.Result, retErr error) {
	if !controllerutil.ContainsFinalizer(q, sqsv1alpha1.Finalizer) {
		return ctrl.Result{}, nil
	}
	before := q.DeepCopy()
	initConditions(q)
	released := false
	defer func() {
		if released {
			return // the Queue is gone, or going
		}
		if err := r.patchStatus(ctx, before, q); err != nil {
			retErr = errors.Join(retErr, err)
			res = ctrl.Result{} // with an error, its backoff decides the retry
		}
	}()
	setReady(q, metav1.ConditionFalse, sqsv1alpha1.ReasonDeleting, "The Queue is being deleted")

	switch {
	case q.Annotations[sqsv1alpha1.AnnotationReleaseFinalizer] == "true":
		r.event(q, corev1.EventTypeWarning, "FinalizerReleased", "Delete", fmt.Sprintf(
			"Released by the %s annotation: the SQS queue %s, if it exists, was left in place", sqsv1alpha1.AnnotationReleaseFinalizer, q.SQSName()))
	case q.Observed():
		r.event(q, corev1.EventTypeNormal, "Retained", "Delete", "Left the SQS queue in place (managementPolicy Observe never deletes it)")
	case q.Spec.DeletionPolicy == sqsv1alpha1.DeletionPolicyRetain:
		r.event(q, corev1.EventTypeNormal, "Retained", "Delete", "Left the SQS queue in place (deletionPolicy Retain)")
	case q.Status.QueueURL == "":
		// Never created or adopted: nothing to delete.
	default:
		if err := r.deleteQueue(ctx, q); err != nil {
			return r.fail(q, err)
		}
	}
	patch := client.MergeFromWithOptions(q.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(q, sqsv1alpha1.Finalizer)
	if err := r.Patch(ctx, q, patch); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("removing the finalizer: %w", err))
	}
	released = true
	return ctrl.Result{}, nil
}

// deleteQueue deletes the queue that status records, unless its owner tag
// names another Queue: that one is left as it is, and the deletion goes on
// without it. A queue that is gone already is deleted.
func (r *Reconciler) deleteQueue(ctx context.Context, q *sqsv1alpha1.Queue) error {
	callCtx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	api, err := r.Connector.Client(callCtx, q)
	if err != nil {
		return fmt.Errorf("deleting the queue: %w", err)
	}
	url := q.Status.QueueURL
	// The check and the delete take their tokens together, so that a
	// deletion never stops between them for want of a token.
	callCtx = tendaws.WithCallGroup(callCtx, 2)
	tags, err := api.ListQueueTags(callCtx, &sqs.ListQueueTagsInput{QueueUrl: &url})
	if err == nil {
		if owner := otherOwner(q, tags.Tags); owner != "" {
			r.event(q, corev1.EventTypeWarning, sqsv1alpha1.ReasonOwnedByAnotherQueue, "Delete", fmt.Sprintf(
				"Left the SQS queue %s in place: its %s tag names the Queue %s, and Tend never deletes another Queue's queue",
				url, ownerTag, owner))
			return nil
		}
		_, err = api.DeleteQueue(callCtx, &sqs.DeleteQueueInput{QueueUrl: &url})
	}
	if err != nil && tendaws.Classify(err) != tendaws.NotFound {
		return fmt.Errorf("deleting the queue: %w", err)
	}
	r.event(q, corev1.EventTypeNormal, "Deleted", "Delete", "Deleted the SQS queue "+url)
	return nil
}
