package queue

import (
	"errors"

	"github.com/aws/smithy-go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
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
