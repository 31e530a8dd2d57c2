package queue

import (
	"context"
	"fmt"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
)

// redrivePoll is how often a pass checks a running message move: sooner
// than the poll interval, and only while one runs.
const redrivePoll = 10 * time.Second

// Message move task states, as SQS spells them, and Tend's own for a move
// that SQS refused to start.
const (
	moveRunning    = "RUNNING"
	moveCancelling = "CANCELLING"
	moveRefused    = "Failed"
	moveUnknown    = "Unknown"
)

// redriveRequest is the move that the annotation asks for and status has
// not answered yet, or "".
func redriveRequest(q *sqsv1alpha1.Queue) string {
	req := q.Annotations[sqsv1alpha1.AnnotationRedrive]
	if req == "" || (q.Status.Redrive != nil && q.Status.Redrive.Request == req) {
		return ""
	}
	return req
}

// moveInProgress says whether status records a task that SQS still runs.
func moveInProgress(st *sqsv1alpha1.RedriveStatus) bool {
	return st != nil && (st.State == moveRunning || st.State == moveCancelling)
}

// redrive carries out kubectl tend queue redrive on this (dead-letter)
// queue: a new request starts an SQS message move task back to the
// messages' source queues, and a running task's progress is read into
// status. It reports whether a task still runs, so that the pass comes back
// sooner. Without a request or a running task it makes no call. A start
// that SQS refuses for good is recorded as Failed, with a Warning Event,
// and not retried; other errors fail the pass, which retries.
func (r *Reconciler) redrive(ctx context.Context, api *sqs.Client, q *sqsv1alpha1.Queue) (bool, error) {
	if req := redriveRequest(q); req != "" && !moveInProgress(q.Status.Redrive) {
		out, err := api.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: awssdk.String(q.Status.QueueARN)})
		switch class := tendaws.Classify(err); {
		case err == nil:
			now := metav1.NewTime(r.Clock.Now())
			q.Status.Redrive = &sqsv1alpha1.RedriveStatus{Request: req, TaskHandle: awssdk.ToString(out.TaskHandle), State: moveRunning, StartTime: &now}
			r.event(q, corev1.EventTypeNormal, "RedriveStarted", "Redrive", "Started moving the messages of this dead-letter queue back to their source queues")
			return true, nil
		case class == tendaws.Terminal || class == tendaws.NotFound:
			msg := "SQS refused to start the message move: " + describe(err)
			q.Status.Redrive = &sqsv1alpha1.RedriveStatus{Request: req, State: moveRefused, Message: msg}
			r.event(q, corev1.EventTypeWarning, "RedriveFailed", "Redrive", msg)
			return false, nil
		default:
			return false, fmt.Errorf("starting the message move: %w", err)
		}
	}
	if !moveInProgress(q.Status.Redrive) {
		return false, nil
	}
	out, err := api.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: awssdk.String(q.Status.QueueARN), MaxResults: awssdk.Int32(1)})
	if err != nil {
		return true, fmt.Errorf("reading the message move's progress: %w", err)
	}
	st := q.Status.Redrive.DeepCopy()
	if len(out.Results) > 0 {
		applyMoveTask(st, out.Results[0])
	} else {
		// Nothing to follow: end the wait rather than poll for ever.
		st.State, st.Message = moveUnknown, "SQS lists no message move task for this queue"
	}
	if !moveInProgress(st) {
		eventType, reason := corev1.EventTypeNormal, "RedriveFinished"
		if st.State != "COMPLETED" {
			eventType, reason = corev1.EventTypeWarning, "RedriveFailed"
		}
		r.event(q, eventType, reason, "Redrive", fmt.Sprintf("The message move ended %s after moving %d messages%s", st.State, st.MessagesMoved, messageSuffix(st.Message)))
	}
	q.Status.Redrive = st
	return moveInProgress(st), nil
}

// refuseRedrive answers a new redrive request without a call, with msg.
func (r *Reconciler) refuseRedrive(q *sqsv1alpha1.Queue, msg string) {
	if req := redriveRequest(q); req != "" {
		q.Status.Redrive = &sqsv1alpha1.RedriveStatus{Request: req, State: moveRefused, Message: msg}
		r.event(q, corev1.EventTypeWarning, "RedriveFailed", "Redrive", "Refused the message move: "+msg)
	}
}

// applyMoveTask copies SQS's view of the newest task into st.
func applyMoveTask(st *sqsv1alpha1.RedriveStatus, t sqstypes.ListMessageMoveTasksResultEntry) {
	st.State = awssdk.ToString(t.Status)
	st.MessagesMoved = t.ApproximateNumberOfMessagesMoved
	st.MessagesToMove = awssdk.ToInt64(t.ApproximateNumberOfMessagesToMove)
	st.Message = awssdk.ToString(t.FailureReason)
	if t.StartedTimestamp > 0 {
		started := metav1.NewTime(time.UnixMilli(t.StartedTimestamp))
		st.StartTime = &started
	}
}

func messageSuffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}
