package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
)

// TestDescribeIsStableAcrossRetries shows that a repeated failure reads the
// same, so that it does not rewrite the status on every pass. The local
// limiter's refusal names a different wait each time.
func TestDescribeIsStableAcrossRetries(t *testing.T) {
	g := NewWithT(t)
	refused := func(after time.Duration) error {
		return fmt.Errorf("reading the queue's attributes: %w", &smithy.OperationError{
			ServiceID: "SQS", OperationName: "GetQueueAttributes",
			Err: &tendaws.RateLimitedError{Endpoint: "http://127.0.0.1:5000", RetryAfter: after},
		})
	}
	g.Expect(describe(refused(3 * time.Millisecond))).To(Equal(describe(refused(97 * time.Millisecond))))
	g.Expect(describe(refused(time.Second))).To(And(ContainSubstring("http://127.0.0.1:5000"), ContainSubstring("--sqs-qps")))

	apiErr := func(id string) error {
		return &smithy.OperationError{ServiceID: "SQS", OperationName: "CreateQueue",
			Err: fmt.Errorf("request %s: %w", id, &smithy.GenericAPIError{Code: "InvalidAttributeValue", Message: "bad"})}
	}
	g.Expect(describe(apiErr("a"))).To(Equal("CreateQueue: InvalidAttributeValue: bad"))
	g.Expect(describe(apiErr("b"))).To(Equal(describe(apiErr("a"))))
}

// A pass that Tend's own limiter refused leaves the conditions alone (a
// local wait is no fault of the queue's) and comes back when tokens are due,
// spread over a few seconds.
func TestLocalRefusalKeepsConditions(t *testing.T) {
	g := NewWithT(t)
	q := &sqsv1alpha1.Queue{}
	setReady(q, metav1.ConditionTrue, sqsv1alpha1.ReasonAvailable, "The queue exists and matches the spec")
	setSynced(q, metav1.ConditionTrue, sqsv1alpha1.ReasonSynced, "")
	before := q.DeepCopy()
	refused := fmt.Errorf("reading the queue: %w", &smithy.OperationError{
		ServiceID: "SQS", OperationName: "GetQueueAttributes",
		Err: &tendaws.RateLimitedError{Endpoint: "http://127.0.0.1:5000", RetryAfter: 200 * time.Millisecond},
	})
	r := &Reconciler{}
	for range 20 {
		res, err := r.fail(q, refused)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.RequeueAfter).To(BeNumerically(">=", 200*time.Millisecond))
		g.Expect(res.RequeueAfter).To(BeNumerically("<", 200*time.Millisecond+localRetrySpread))
	}
	g.Expect(q.Status).To(Equal(before.Status))

	// An upstream throttle is another matter: it is reported.
	_, _ = r.fail(q, &smithy.OperationError{ServiceID: "SQS", OperationName: "GetQueueAttributes",
		Err: &smithy.GenericAPIError{Code: "RequestThrottled", Message: "slow down"}})
	throttled := *findCondition(q, sqsv1alpha1.ConditionSynced)
	g.Expect(throttled.Reason).To(Equal(sqsv1alpha1.ReasonThrottled))
	// The next pass may meet the throttle at another call: the status
	// reads the same, so the retries do not rewrite it.
	_, _ = r.fail(q, &smithy.OperationError{ServiceID: "SQS", OperationName: "ListQueueTags",
		Err: &smithy.GenericAPIError{Code: "RequestThrottled", Message: "Request is throttled."}})
	g.Expect(*findCondition(q, sqsv1alpha1.ConditionSynced)).To(Equal(throttled))
	g.Expect(throttled.Message).To(ContainSubstring("RequestThrottled"))
}

// TestFailEndsThePass shows how a failed pass ends, which is what keeps a
// failing upstream from a hot loop: a transient failure returns its error,
// so that the workqueue backs the Queue off (1s doubling to 5m); a throttle
// without a hint does too; a hint is waited for; a terminal error waits for
// a change. No failure ends in an immediate requeue.
func TestFailEndsThePass(t *testing.T) {
	op := func(err error) error {
		return fmt.Errorf("reading the queue's attributes: %w", &smithy.OperationError{
			ServiceID: "SQS", OperationName: "GetQueueAttributes", Err: err})
	}
	tests := []struct {
		name         string
		err          error
		wantBackoff  bool // the error goes back to the workqueue's backoff
		wantTerminal bool
		wantAfter    time.Duration
		wantReason   string
	}{
		{name: "server error", err: op(&smithy.GenericAPIError{Code: "InternalFailure", Message: "We encountered an internal error."}),
			wantBackoff: true, wantReason: sqsv1alpha1.ReasonUpstreamError},
		{name: "hang", err: op(context.DeadlineExceeded), wantBackoff: true, wantReason: sqsv1alpha1.ReasonUpstreamError},
		{name: "throttled, no hint", err: op(&sqstypes.RequestThrottled{Message: awssdk.String("Request is throttled.")}),
			wantBackoff: true, wantReason: sqsv1alpha1.ReasonThrottled},
		{name: "deleted recently: SQS's 60 s", err: op(&sqstypes.QueueDeletedRecently{Message: awssdk.String("wait")}),
			wantAfter: tendaws.RecreateDelay, wantReason: sqsv1alpha1.ReasonQueueDeletedRecently},
		{name: "invalid spec", err: op(&sqstypes.InvalidAttributeValue{Message: awssdk.String("bad")}),
			wantTerminal: true, wantReason: sqsv1alpha1.ReasonInvalidSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			q := &sqsv1alpha1.Queue{}
			r := &Reconciler{Recorder: events.NewFakeRecorder(10)}
			res, err := r.fail(q, tt.err)
			g.Expect(res.RequeueAfter).To(Equal(tt.wantAfter))
			g.Expect(err != nil).To(Equal(tt.wantBackoff || tt.wantTerminal))
			g.Expect(errors.Is(err, reconcile.TerminalError(nil))).To(Equal(tt.wantTerminal))
			g.Expect(findCondition(q, sqsv1alpha1.ConditionSynced).Reason).To(Equal(tt.wantReason))
		})
	}
}

func TestQueueReadiness(t *testing.T) {
	type cond struct{ status, reason string }
	for _, tc := range []struct {
		name          string
		deleting      bool
		ready, synced cond
		want          string // "State/Reason"
	}{
		{name: "in line", ready: cond{"True", "Available"}, synced: cond{"True", "Synced"}, want: "Ready/Available"},
		{name: "first pass", ready: cond{"Unknown", "Creating"}, synced: cond{"Unknown", "Pending"}, want: "Reconciling/Creating"},
		{name: "SQS failed, retried", ready: cond{"False", "UpstreamError"}, synced: cond{"False", "UpstreamError"}, want: "Reconciling/UpstreamError"},
		{name: "throttled", ready: cond{"False", "Throttled"}, synced: cond{"False", "Throttled"}, want: "Reconciling/Throttled"},
		{name: "waiting for the dead-letter queue", ready: cond{"False", "Creating"}, synced: cond{"False", "WaitingForDeadLetterQueue"},
			want: "Reconciling/WaitingForDeadLetterQueue"},
		{name: "refused credentials", ready: cond{"False", "CredentialsError"}, synced: cond{"False", "CredentialsError"}, want: "Stalled/CredentialsError"},
		{name: "invalid spec", ready: cond{"False", "InvalidSpec"}, synced: cond{"False", "InvalidSpec"}, want: "Stalled/InvalidSpec"},
		{name: "a queue no Queue owns", ready: cond{"False", "QueueExists"}, synced: cond{"False", "QueueExists"}, want: "Stalled/QueueExists"},
		{name: "adoption Adopt and no queue", ready: cond{"False", "QueueMissing"}, synced: cond{"True", "Synced"}, want: "Stalled/QueueMissing"},
		{name: "paused", ready: cond{"True", "Available"}, synced: cond{"False", "Paused"}, want: "NotReady/Paused"},
		{name: "deleting", deleting: true, ready: cond{"False", "Deleting"}, synced: cond{"True", "Synced"}, want: "Reconciling/Deleting"},
		{name: "deleting, SQS refuses the credentials", deleting: true, ready: cond{"False", "Deleting"}, synced: cond{"False", "CredentialsError"},
			want: "Stalled/CredentialsError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			q := &sqsv1alpha1.Queue{}
			if tc.deleting {
				q.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			}
			setReady(q, metav1.ConditionStatus(tc.ready.status), tc.ready.reason, "ready says")
			setSynced(q, metav1.ConditionStatus(tc.synced.status), tc.synced.reason, "synced says")
			got := queueReadiness(q)
			g.Expect(got.State.String() + "/" + got.Reason).To(Equal(tc.want))
		})
	}
}
