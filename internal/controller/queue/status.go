package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
	"github.com/tend-dev/tend/internal/readiness"
)

// initConditions sets both conditions on a Queue's first pass, as Unknown,
// so that kubectl shows them from the start.
func initConditions(q *sqsv1alpha1.Queue) {
	if findCondition(q, sqsv1alpha1.ConditionReady) == nil {
		setReady(q, metav1.ConditionUnknown, sqsv1alpha1.ReasonCreating, "Tend has not reached SQS for this Queue yet")
	}
	if findCondition(q, sqsv1alpha1.ConditionSynced) == nil {
		setSynced(q, metav1.ConditionUnknown, sqsv1alpha1.ReasonPending, "Tend has not reached SQS for this Queue yet")
	}
}

func setReady(q *sqsv1alpha1.Queue, status metav1.ConditionStatus, reason, msg string) {
	setCondition(q, sqsv1alpha1.ConditionReady, status, reason, msg)
}

func setSynced(q *sqsv1alpha1.Queue, status metav1.ConditionStatus, reason, msg string) {
	if msg == "" && status == metav1.ConditionTrue {
		msg = "The last exchange with SQS succeeded"
	}
	setCondition(q, sqsv1alpha1.ConditionSynced, status, reason, msg)
}

func setCondition(q *sqsv1alpha1.Queue, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&q.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: q.Generation,
	})
}

func findCondition(q *sqsv1alpha1.Queue, typ string) *metav1.Condition {
	return meta.FindStatusCondition(q.Status.Conditions, typ)
}

// describe says what went wrong in a form stable across retries: the API's
// code and message, without the request ID that changes every time, so that
// a repeated failure does not rewrite the status.
func describe(err error) string {
	// The limiter's refusal names a wait that differs on every pass.
	var limited *tendaws.RateLimitedError
	if errors.As(err, &limited) {
		return "Tend's own limit of SQS calls to " + limited.Endpoint +
			" is reached (--sqs-qps, --sqs-burst); Tend retries when it allows"
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		var opErr *smithy.OperationError
		op := ""
		if errors.As(err, &opErr) {
			op = opErr.Operation() + ": "
		}
		return op + apiErr.ErrorCode() + ": " + apiErr.ErrorMessage()
	}
	return err.Error()
}

// localRetrySpread spreads the retries of passes that Tend's own limiter
// refused.
const localRetrySpread = 5 * time.Second

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
	case isA[*endpointNotAllowedError](err):
		reason, class = sqsv1alpha1.ReasonEndpointNotAllowed, tendaws.Terminal
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
		// Which call met the throttling changes from pass to pass; the
		// message must not, or every retry would rewrite the status.
		reason, msg = sqsv1alpha1.ReasonThrottled, "SQS is throttling Tend's calls"
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) {
			msg += " (" + apiErr.ErrorCode() + ")"
		}
		msg += "; Tend waits as long as SQS asks, then retries"
	}
	if prev := findCondition(q, sqsv1alpha1.ConditionSynced); class == tendaws.Terminal &&
		(prev == nil || prev.Reason != reason || prev.Message != msg) {
		r.event(q, corev1.EventTypeWarning, reason, "Sync", msg)
	}
	if q.DeletionTimestamp.IsZero() {
		setReady(q, metav1.ConditionFalse, reason, msg)
	} else {
		msg += fmt.Sprintf(". If SQS is gone for good, annotate the Queue with %s=true to finish the deletion without it",
			sqsv1alpha1.AnnotationReleaseFinalizer)
	}
	setSynced(q, metav1.ConditionFalse, reason, msg)
	switch class {
	case tendaws.Terminal:
		// This generation was acted on, and retrying cannot apply it:
		// Stalled, not in progress, for kstatus.
		q.Status.ObservedGeneration = q.Generation
		return ctrl.Result{}, reconcile.TerminalError(err)
	case tendaws.Throttled:
		if after, ok := tendaws.RetryAfter(err); ok {
			return ctrl.Result{RequeueAfter: after}, nil
		}
	}
	return ctrl.Result{}, err
}

// stalledReasons are the Synced reasons that retrying cannot clear: a
// person must change the spec, the credentials, the connection Secret,
// the manager's allowed endpoints, or the queue that holds the name.
var stalledReasons = []string{
	sqsv1alpha1.ReasonInvalidSpec,
	sqsv1alpha1.ReasonCredentialsError,
	sqsv1alpha1.ReasonConnectionError,
	sqsv1alpha1.ReasonEndpointNotAllowed,
	sqsv1alpha1.ReasonQueueExists,
	sqsv1alpha1.ReasonOwnedByAnotherQueue,
}

// queueReadiness is the verdict of the Ready, Reconciling and Stalled
// conditions, from Ready and Synced as the pass set them: a failed
// exchange gives its Synced reason, which says what failed, to all three.
func queueReadiness(q *sqsv1alpha1.Queue) readiness.Summary {
	ready, synced := findCondition(q, sqsv1alpha1.ConditionReady), findCondition(q, sqsv1alpha1.ConditionSynced)
	switch {
	case q.DeletionTimestamp.IsZero() && synced != nil && synced.Reason == sqsv1alpha1.ReasonPaused:
		// Neither working nor stuck: waiting for a person to resume it.
		return readiness.From(readiness.StateNotReady, synced, "")
	case synced != nil && synced.Status == metav1.ConditionFalse && slices.Contains(stalledReasons, synced.Reason):
		return readiness.From(readiness.StateStalled, synced, "")
	case q.DeletionTimestamp.IsZero() && ready != nil && ready.Reason == sqsv1alpha1.ReasonQueueMissing:
		return readiness.From(readiness.StateStalled, ready, "")
	case q.DeletionTimestamp.IsZero() && ready != nil && ready.Status == metav1.ConditionTrue:
		return readiness.From(readiness.StateReady, ready, "")
	case synced != nil && synced.Status == metav1.ConditionFalse:
		return readiness.From(readiness.StateReconciling, synced, "")
	}
	return readiness.From(readiness.StateReconciling, ready, "Tend has not reached SQS for this Queue yet")
}

// patchStatus writes the status when the pass changed it, and only then,
// with the Ready, Reconciling and Stalled conditions of what it changed.
func (r *Reconciler) patchStatus(ctx context.Context, before, q *sqsv1alpha1.Queue) error {
	readiness.Set(&q.Status.Conditions, q.Generation, q.Status.ObservedGeneration, queueReadiness(q))
	if equality.Semantic.DeepEqual(before.Status, q.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, q, client.MergeFrom(before)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing the status: %w", err)
	}
	r.writes.Wrote(q)
	return nil
}

func (r *Reconciler) event(q *sqsv1alpha1.Queue, eventType, reason, action, note string) {
	r.Recorder.Eventf(q, nil, eventType, reason, action, "%s", note)
}

func isA[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}
