package queue

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	g.Expect(findCondition(q, sqsv1alpha1.ConditionSynced).Reason).To(Equal(sqsv1alpha1.ReasonThrottled))
}
