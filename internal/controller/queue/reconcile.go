package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
)

// localRetrySpread spreads the retries of passes that Tend's own limiter
// refused.
const localRetrySpread = 5 * time.Second

// defaultPollInterval applies when the spec has none (the CRD defaults it).
const defaultPollInterval = 5 * time.Minute

// Reconcile brings one Queue's SQS queue in line with its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	q := &sqsv1alpha1.Queue{}
	if err := r.Get(ctx, req.NamespacedName, q); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !q.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, q)
	}
	// The finalizer comes before the first create, so that no queue is ever
	// created that a deletion would forget.
	if !controllerutil.ContainsFinalizer(q, sqsv1alpha1.Finalizer) {
		patch := client.MergeFromWithOptions(q.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(q, sqsv1alpha1.Finalizer)
		if err := r.Patch(ctx, q, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
	}

	before := q.DeepCopy()
	initConditions(q)
	defer func() {
		if err := r.patchStatus(ctx, before, q); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	return r.reconcileNormal(ctx, q)
}

// reconcileNormal observes the queue and creates, adopts or repairs it.
func (r *Reconciler) reconcileNormal(ctx context.Context, q *sqsv1alpha1.Queue) (ctrl.Result, error) {
	// The SQS calls share one deadline; the status write after them does not,
	// so that a pass that timed out still reports why.
	callCtx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	api, err := r.Connector.Client(callCtx, q)
	if err != nil {
		return r.fail(q, err)
	}
	dlqARN, waiting := r.deadLetterARN(ctx, q)
	if waiting != "" {
		setSynced(q, metav1.ConditionFalse, sqsv1alpha1.ReasonWaitingForDeadLetterQueue, waiting)
		setReady(q, metav1.ConditionFalse, sqsv1alpha1.ReasonCreating, "Waiting for the dead-letter queue")
		return ctrl.Result{}, nil // the dead-letter Queue's change starts the next pass
	}

	obs, err := observe(callCtx, api, q)
	if err != nil {
		return r.fail(q, err)
	}
	switch decide(q, obs) {
	case planWait:
		q.Status.QueueURL, q.Status.QueueARN = "", ""
		setSynced(q, metav1.ConditionTrue, sqsv1alpha1.ReasonSynced, "")
		setReady(q, metav1.ConditionFalse, sqsv1alpha1.ReasonQueueMissing, fmt.Sprintf(
			"No SQS queue named %s exists, and adoption Adopt never creates one: create it, or set spec.adoption to AdoptOrCreate", q.SQSName()))
		return r.done(q), nil
	case planRefuse:
		msg := fmt.Sprintf("An SQS queue named %s exists that Tend did not create (owner tag %q): set spec.adoption to Adopt or AdoptOrCreate to manage it, or choose another spec.queueName",
			q.SQSName(), obs.tags[ownerTag])
		setSynced(q, metav1.ConditionFalse, sqsv1alpha1.ReasonQueueExists, msg)
		setReady(q, metav1.ConditionFalse, sqsv1alpha1.ReasonQueueExists, msg)
		r.event(q, corev1.EventTypeWarning, sqsv1alpha1.ReasonQueueExists, "Adopt", msg)
		return ctrl.Result{}, nil // only a spec change can help
	case planCreate:
		if err := r.create(callCtx, api, q, dlqARN); err != nil {
			return r.fail(q, err)
		}
	case planAdopt, planManage:
		adopted := q.Status.QueueURL == ""
		if err := r.repair(callCtx, api, q, obs, dlqARN, adopted); err != nil {
			return r.fail(q, err)
		}
	}
	if err := r.publish(ctx, q); err != nil {
		return ctrl.Result{}, err
	}
	setSynced(q, metav1.ConditionTrue, sqsv1alpha1.ReasonSynced, "")
	setReady(q, metav1.ConditionTrue, sqsv1alpha1.ReasonAvailable, "The queue exists and matches the spec")
	q.Status.ObservedGeneration = q.Generation
	return r.done(q), nil
}

// done is the result of a pass that succeeded: come back at the next poll.
func (r *Reconciler) done(q *sqsv1alpha1.Queue) ctrl.Result {
	interval := defaultPollInterval
	if q.Spec.PollInterval != nil {
		interval = q.Spec.PollInterval.Duration
	}
	return ctrl.Result{RequeueAfter: r.Jitter(interval)}
}

// deadLetterARN returns the ARN of the spec's dead-letter queue, or why the
// pass must wait for it.
func (r *Reconciler) deadLetterARN(ctx context.Context, q *sqsv1alpha1.Queue) (arn, waiting string) {
	rd := q.Spec.Redrive
	switch {
	case rd == nil:
		return "", ""
	case rd.DeadLetterQueueRef == nil:
		return rd.DeadLetterTargetARN, ""
	}
	dlq := &sqsv1alpha1.Queue{}
	key := client.ObjectKey{Namespace: q.Namespace, Name: rd.DeadLetterQueueRef.Name}
	if err := r.Get(ctx, key, dlq); err != nil {
		return "", fmt.Sprintf("The dead-letter Queue %s cannot be read (%v): create it in this namespace", key.Name, err)
	}
	if dlq.Status.QueueARN == "" {
		return "", fmt.Sprintf("The dead-letter Queue %s has no ARN yet: it is not Ready", key.Name)
	}
	return dlq.Status.QueueARN, ""
}

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

// create makes the queue with its attributes and tags, and records it.
func (r *Reconciler) create(ctx context.Context, api *sqs.Client, q *sqsv1alpha1.Queue, dlqARN string) error {
	out, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  awssdk.String(q.SQSName()),
		Attributes: createAttributes(&q.Spec, dlqARN),
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

// repair sets the attributes and tags that drifted from the spec.
func (r *Reconciler) repair(ctx context.Context, api *sqs.Client, q *sqsv1alpha1.Queue, obs observed, dlqARN string, adopted bool) error {
	var changed []string
	if attrs := attributeChanges(desiredAttributes(&q.Spec, dlqARN), obs.attrs); attrs != nil {
		if _, err := api.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &obs.url, Attributes: attrs}); err != nil {
			return fmt.Errorf("setting the attributes %s: %w", strings.Join(slices.Sorted(maps.Keys(attrs)), ", "), err)
		}
		changed = append(changed, slices.Sorted(maps.Keys(attrs))...)
	}
	set, remove := tagChanges(desiredTags(q), obs.tags, q.Spec.Tags != nil)
	if set != nil {
		if _, err := api.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: &obs.url, Tags: set}); err != nil {
			return fmt.Errorf("tagging the queue: %w", err)
		}
		changed = append(changed, "tags")
	}
	if remove != nil {
		if _, err := api.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: &obs.url, TagKeys: remove}); err != nil {
			return fmt.Errorf("removing the tags %s: %w", strings.Join(remove, ", "), err)
		}
		if set == nil {
			changed = append(changed, "tags")
		}
	}
	q.Status.QueueURL, q.Status.QueueARN = obs.url, obs.attrs[attrQueueArn]
	if len(changed) > 0 || adopted {
		now := metav1.NewTime(r.Clock.Now())
		q.Status.LastSyncTime = &now
	}
	switch {
	case adopted:
		r.event(q, corev1.EventTypeNormal, "Adopted", "Adopt", "Adopted the existing SQS queue "+obs.url)
	case len(changed) > 0 && q.Generation != q.Status.ObservedGeneration:
		r.event(q, corev1.EventTypeNormal, "Updated", "Update", "Applied the spec to "+strings.Join(changed, ", "))
	case len(changed) > 0:
		r.event(q, corev1.EventTypeWarning, "DriftRepaired", "Update",
			"Reverted changes made outside Kubernetes to "+strings.Join(changed, ", "))
	}
	return nil
}

// publish writes the ConfigMap <name>-queue that consumers read the queue's
// URL and ARN from. An unchanged ConfigMap is not written.
func (r *Reconciler) publish(ctx context.Context, q *sqsv1alpha1.Queue) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: q.Namespace, Name: q.Name + "-queue"}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		cm.Labels = map[string]string{"app.kubernetes.io/managed-by": "tend", "sqs.tend.dev/queue": q.Name}
		cm.Data = map[string]string{"queueName": q.SQSName(), "queueURL": q.Status.QueueURL, "queueARN": q.Status.QueueARN}
		return controllerutil.SetControllerReference(q, cm, r.Scheme())
	})
	if err != nil {
		return fmt.Errorf("publishing the ConfigMap %s: %w", cm.Name, err)
	}
	return nil
}

// reconcileDelete deletes or retains the SQS queue, then lets the Queue go.
func (r *Reconciler) reconcileDelete(ctx context.Context, q *sqsv1alpha1.Queue) (_ ctrl.Result, retErr error) {
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
		}
	}()
	setReady(q, metav1.ConditionFalse, sqsv1alpha1.ReasonDeleting, "The Queue is being deleted")

	switch {
	case q.Annotations[sqsv1alpha1.AnnotationReleaseFinalizer] == "true":
		r.event(q, corev1.EventTypeWarning, "FinalizerReleased", "Delete", fmt.Sprintf(
			"Released by the %s annotation: the SQS queue %s, if it exists, was left in place", sqsv1alpha1.AnnotationReleaseFinalizer, q.SQSName()))
	case q.Spec.DeletionPolicy == sqsv1alpha1.DeletionPolicyRetain:
		r.event(q, corev1.EventTypeNormal, "Retained", "Delete", "Left the SQS queue in place (deletionPolicy Retain)")
	case q.Status.QueueURL == "":
		// Never created or adopted: nothing to delete.
	default:
		callCtx, cancel := context.WithTimeout(ctx, r.Timeout)
		defer cancel()
		api, err := r.Connector.Client(callCtx, q)
		if err == nil {
			_, err = api.DeleteQueue(callCtx, &sqs.DeleteQueueInput{QueueUrl: &q.Status.QueueURL})
		}
		if err != nil && tendaws.Classify(err) != tendaws.NotFound {
			return r.fail(q, fmt.Errorf("deleting the queue: %w", err))
		}
		r.event(q, corev1.EventTypeNormal, "Deleted", "Delete", "Deleted the SQS queue "+q.Status.QueueURL)
	}
	patch := client.MergeFromWithOptions(q.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(q, sqsv1alpha1.Finalizer)
	if err := r.Patch(ctx, q, patch); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("removing the finalizer: %w", err))
	}
	released = true
	return ctrl.Result{}, nil
}

// fail records err in the conditions and chooses how the pass ends: a
// terminal error waits for the user, throttling waits as long as SQS (or the
// local bucket) asks, anything else backs off exponentially.
func (r *Reconciler) fail(q *sqsv1alpha1.Queue, err error) (ctrl.Result, error) {
	// Tend's own bucket being empty says nothing about the queue: the
	// conditions stay as they are (no status write, no Ready flapping after
	// a restart), and the pass comes back once tokens are due, spread so
	// that the Queues waiting for them do not all retry in the same instant.
	var limited *tendaws.RateLimitedError
	if errors.As(err, &limited) {
		return ctrl.Result{RequeueAfter: limited.RetryAfter + rand.N(localRetrySpread)}, nil
	}
	reason, msg := sqsv1alpha1.ReasonUpstreamError, describe(err)
	var connErr *connectionError
	class := tendaws.Classify(err)
	switch {
	case errors.As(err, &connErr):
		reason, class = sqsv1alpha1.ReasonConnectionError, tendaws.Terminal
	case isA[*sqstypes.QueueDeletedRecently](err):
		reason = sqsv1alpha1.ReasonQueueDeletedRecently
		msg = "SQS refuses to create a queue of this name for 60 seconds after one was deleted; Tend retries then"
	case class == tendaws.Terminal && tendaws.IsCredentialError(err):
		reason = sqsv1alpha1.ReasonCredentialsError
	case class == tendaws.Terminal:
		reason = sqsv1alpha1.ReasonInvalidSpec
	case class == tendaws.Throttled:
		reason = sqsv1alpha1.ReasonThrottled
	}
	if prev := findCondition(q, sqsv1alpha1.ConditionSynced); class == tendaws.Terminal &&
		(prev == nil || prev.Reason != reason || prev.Message != msg) {
		r.event(q, corev1.EventTypeWarning, reason, "Sync", msg)
	}
	if q.DeletionTimestamp.IsZero() {
		setReady(q, metav1.ConditionFalse, sqsv1alpha1.ReasonUnavailable, "See the Synced condition: "+msg)
	} else {
		msg += fmt.Sprintf(". If SQS is gone for good, annotate the Queue with %s=true to finish the deletion without it",
			sqsv1alpha1.AnnotationReleaseFinalizer)
	}
	setSynced(q, metav1.ConditionFalse, reason, msg)
	switch class {
	case tendaws.Terminal:
		return ctrl.Result{}, reconcile.TerminalError(err)
	case tendaws.Throttled:
		if after, ok := tendaws.RetryAfter(err); ok {
			return ctrl.Result{RequeueAfter: after}, nil
		}
	}
	return ctrl.Result{}, err
}

// patchStatus writes the status when the pass changed it, and only then.
func (r *Reconciler) patchStatus(ctx context.Context, before, q *sqsv1alpha1.Queue) error {
	if equality.Semantic.DeepEqual(before.Status, q.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, q, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing the status: %w", err)
	}
	return nil
}

func (r *Reconciler) event(q *sqsv1alpha1.Queue, eventType, reason, action, note string) {
	r.Recorder.Eventf(q, nil, eventType, reason, action, "%s", note)
}

func isA[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}
