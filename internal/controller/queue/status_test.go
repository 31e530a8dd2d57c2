package queue

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	. "github.com/onsi/gomega"

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
