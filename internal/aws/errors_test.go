package aws

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	. "github.com/onsi/gomega"
)

// sdkError wraps err as the SDK returns an error that came with an HTTP
// answer: an OperationError around a ResponseError.
func sdkError(status int, header http.Header, err error) error {
	if header == nil {
		header = http.Header{}
	}
	return &smithy.OperationError{ServiceID: "SQS", OperationName: "CreateQueue", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: header}},
			Err:      err,
		},
		RequestID: "request-id",
	}}
}

// api is an error with a code that no SQS shape models.
func api(code string, fault smithy.ErrorFault) error {
	return &smithy.GenericAPIError{Code: code, Message: "message", Fault: fault}
}

// undecodable is the SDK's error for an answer whose body is not JSON.
var undecodable = &smithy.DeserializationError{Err: errors.New("failed to decode response body")}

func TestClassify(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		want      Class
		wantAfter time.Duration // with a hint when non-zero
	}{
		{name: "no error", err: nil, want: None},

		// Local refusals.
		{name: "local limiter", err: &smithy.OperationError{Err: &RateLimitedError{Endpoint: "http://x", RetryAfter: 250 * time.Millisecond}}, want: Throttled, wantAfter: 250 * time.Millisecond},
		{name: "bad configuration", err: fmt.Errorf("%w: no region", ErrInvalidConfig), want: Terminal},
		{name: "no deadline", err: &smithy.OperationError{Err: ErrNoDeadline}, want: Terminal},

		// Not found.
		{name: "QueueDoesNotExist as JSON gives it", err: sdkError(400, nil, &types.QueueDoesNotExist{ErrorCodeOverride: awssdk.String("AWS.SimpleQueueService.NonExistentQueue")}), want: NotFound},
		{name: "QueueDoesNotExist without the query header", err: sdkError(400, nil, &types.QueueDoesNotExist{}), want: NotFound},
		{name: "legacy query code", err: sdkError(400, nil, api("AWS.SimpleQueueService.NonExistentQueue", smithy.FaultClient)), want: NotFound},
		{name: "ResourceNotFoundException", err: sdkError(400, nil, &types.ResourceNotFoundException{}), want: NotFound},
		{name: "S3 NoSuchBucket", err: sdkError(404, nil, api("NoSuchBucket", smithy.FaultClient)), want: NotFound},
		{name: "S3 NoSuchKey", err: sdkError(404, nil, api("NoSuchKey", smithy.FaultClient)), want: NotFound},
		{name: "S3 HEAD of a missing object", err: sdkError(404, nil, api("NotFound", smithy.FaultClient)), want: NotFound},
		{name: "S3 NoSuchUpload: a new upload may go", err: sdkError(404, nil, api("NoSuchUpload", smithy.FaultClient)), want: Transient},
		{name: "S3 PreconditionFailed: another writer won", err: sdkError(412, nil, api("PreconditionFailed", smithy.FaultClient)), want: Transient},
		{name: "S3 BadDigest", err: sdkError(400, nil, api("BadDigest", smithy.FaultClient)), want: Transient},
		{name: "S3 HEAD refused", err: sdkError(403, nil, api("Forbidden", smithy.FaultClient)), want: Terminal},
		{name: "S3 wrong region", err: sdkError(301, nil, api("PermanentRedirect", smithy.FaultClient)), want: Terminal},
		{name: "S3 InvalidBucketName", err: sdkError(400, nil, api("InvalidBucketName", smithy.FaultClient)), want: Terminal},
		{name: "S3 archived object", err: sdkError(403, nil, api("InvalidObjectState", smithy.FaultClient)), want: Terminal},
		{name: "S3 EntityTooLarge", err: sdkError(400, nil, api("EntityTooLarge", smithy.FaultClient)), want: Terminal},

		// Throttled.
		{name: "QueueDeletedRecently waits 60s", err: sdkError(400, nil, &types.QueueDeletedRecently{ErrorCodeOverride: awssdk.String("AWS.SimpleQueueService.QueueDeletedRecently")}), want: Throttled, wantAfter: 60 * time.Second},
		{name: "QueueDeletedRecently by code", err: sdkError(400, nil, api("AWS.SimpleQueueService.QueueDeletedRecently", smithy.FaultClient)), want: Throttled, wantAfter: 60 * time.Second},
		{name: "PurgeQueueInProgress waits 60s", err: sdkError(403, nil, &types.PurgeQueueInProgress{}), want: Throttled, wantAfter: 60 * time.Second},
		{name: "RequestThrottled", err: sdkError(400, nil, &types.RequestThrottled{ErrorCodeOverride: awssdk.String("RequestThrottled")}), want: Throttled},
		{name: "ThrottlingException", err: sdkError(400, nil, api("ThrottlingException", smithy.FaultClient)), want: Throttled},
		{name: "ThrottlingException with Retry-After seconds", err: sdkError(400, http.Header{"Retry-After": {"5"}}, api("ThrottlingException", smithy.FaultClient)), want: Throttled, wantAfter: 5 * time.Second},
		{name: "ThrottlingException with a Retry-After date", err: sdkError(400, http.Header{
			"Retry-After": {"Sun, 22 Nov 2026 03:00:30 GMT"},
			"Date":        {"Sun, 22 Nov 2026 03:00:00 GMT"},
		}, api("ThrottlingException", smithy.FaultClient)), want: Throttled, wantAfter: 30 * time.Second},
		{name: "KMS throttling", err: sdkError(400, nil, &types.KmsThrottled{ErrorCodeOverride: awssdk.String("KMS.ThrottlingException")}), want: Throttled},
		{name: "S3 SlowDown", err: sdkError(503, nil, api("SlowDown", smithy.FaultServer)), want: Throttled},
		{name: "bare 429", err: sdkError(429, nil, undecodable), want: Throttled},

		// Terminal: the spec.
		{name: "QueueNameExists", err: sdkError(400, nil, &types.QueueNameExists{ErrorCodeOverride: awssdk.String("QueueAlreadyExists")}), want: Terminal},
		{name: "InvalidAttributeName", err: sdkError(400, nil, &types.InvalidAttributeName{}), want: Terminal},
		{name: "InvalidAttributeValue", err: sdkError(400, nil, &types.InvalidAttributeValue{}), want: Terminal},
		{name: "InvalidParameterValue", err: sdkError(400, nil, api("InvalidParameterValue", smithy.FaultClient)), want: Terminal},
		{name: "MissingParameter", err: sdkError(400, nil, api("MissingParameter", smithy.FaultClient)), want: Terminal},
		{name: "KMS key disabled", err: sdkError(400, nil, &types.KmsDisabled{ErrorCodeOverride: awssdk.String("KMS.DisabledException")}), want: Terminal},
		{name: "UnsupportedOperation", err: sdkError(400, nil, &types.UnsupportedOperation{ErrorCodeOverride: awssdk.String("AWS.SimpleQueueService.UnsupportedOperation")}), want: Terminal},

		// Terminal: credentials and permissions.
		{name: "InvalidClientTokenId", err: sdkError(403, nil, api("InvalidClientTokenId", smithy.FaultClient)), want: Terminal},
		{name: "UnrecognizedClientException", err: sdkError(400, nil, api("UnrecognizedClientException", smithy.FaultClient)), want: Terminal},
		{name: "SignatureDoesNotMatch", err: sdkError(403, nil, api("SignatureDoesNotMatch", smithy.FaultClient)), want: Terminal},
		{name: "AccessDenied", err: sdkError(403, nil, api("AccessDenied", smithy.FaultClient)), want: Terminal},
		{name: "AccessDeniedException", err: sdkError(400, nil, api("AccessDeniedException", smithy.FaultClient)), want: Terminal},
		{name: "ExpiredToken", err: sdkError(403, nil, api("ExpiredToken", smithy.FaultClient)), want: Terminal},
		{name: "bare 403, as moto sends auth errors", err: sdkError(403, nil, undecodable), want: Terminal},
		{name: "bare 401", err: sdkError(401, nil, undecodable), want: Terminal},

		// Transient.
		{name: "InternalFailure", err: sdkError(500, nil, api("InternalFailure", smithy.FaultServer)), want: Transient},
		{name: "ServiceUnavailable", err: sdkError(503, nil, api("ServiceUnavailable", smithy.FaultServer)), want: Transient},
		{name: "bare 503 from a load balancer", err: sdkError(503, nil, undecodable), want: Transient},
		{name: "bare 503 with Retry-After", err: sdkError(503, http.Header{"Retry-After": {"2"}}, undecodable), want: Transient, wantAfter: 2 * time.Second},
		{name: "bare 502", err: sdkError(502, nil, undecodable), want: Transient},
		{name: "connection refused", err: &smithy.OperationError{Err: &smithyhttp.RequestSendError{Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}}, want: Transient},
		{name: "deadline", err: sdkError(0, nil, &smithy.CanceledError{Err: context.DeadlineExceeded}), want: Transient},
		{name: "cancelled", err: &smithy.OperationError{Err: &smithy.CanceledError{Err: context.Canceled}}, want: Transient},
		{name: "unknown code is not terminal", err: sdkError(400, nil, api("SomethingNew", smithy.FaultClient)), want: Transient},
		{name: "unknown error", err: errors.New("boom"), want: Transient},
		{name: "Retry-After that is no number nor date", err: sdkError(503, http.Header{"Retry-After": {"soon"}}, undecodable), want: Transient},
		{name: "negative Retry-After", err: sdkError(503, http.Header{"Retry-After": {"-3"}}, undecodable), want: Transient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Classify(tt.err)).To(Equal(tt.want))
			after, ok := RetryAfter(tt.err)
			g.Expect(ok).To(Equal(tt.wantAfter != 0), "whether there is a hint")
			g.Expect(after).To(Equal(tt.wantAfter))
		})
	}
}

func TestClassString(t *testing.T) {
	g := NewWithT(t)
	g.Expect([]string{None.String(), NotFound.String(), Terminal.String(), Throttled.String(), Transient.String(), Class(9).String()}).
		To(Equal([]string{"None", "NotFound", "Terminal", "Throttled", "Transient", "Class(9)"}))
}

// TestClassifyMoto proves the classification of what a real SQS emulator
// answers, through the SDK and LoadConfig as the controller will call it.
func TestClassifyMoto(t *testing.T) {
	g := NewWithT(t)
	g.Expect(server.Reset()).To(Succeed())
	ctx := callCtx(t)
	c := direct(t)

	create := func(name string, attrs map[string]string) string {
		out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String(name), Attributes: attrs})
		g.Expect(err).NotTo(HaveOccurred())
		return *out.QueueUrl
	}
	existing := create("existing", map[string]string{"VisibilityTimeout": "30"})
	gone := create("gone", nil)
	_, err := c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: awssdk.String(gone)})
	g.Expect(err).NotTo(HaveOccurred())

	tests := []struct {
		name  string
		call  func() error
		want  Class
		typed func(error) bool // the SDK's typed error, when there is one
		code  string           // the error code, when there is one
	}{
		{
			name: "GetQueueUrl of a missing queue",
			call: func() error {
				_, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: awssdk.String("missing")})
				return err
			},
			want:  NotFound,
			typed: isA[*types.QueueDoesNotExist], code: "AWS.SimpleQueueService.NonExistentQueue",
		},
		{
			name: "GetQueueAttributes of a deleted queue",
			call: func() error {
				_, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: awssdk.String(gone), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
				return err
			},
			want:  NotFound,
			typed: isA[*types.QueueDoesNotExist], code: "AWS.SimpleQueueService.NonExistentQueue",
		},
		{
			name: "DeleteQueue of a deleted queue",
			call: func() error {
				_, err := c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: awssdk.String(gone)})
				return err
			},
			want:  NotFound,
			typed: isA[*types.QueueDoesNotExist],
		},
		{
			name: "SetQueueAttributes of a deleted queue",
			call: func() error {
				_, err := c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: awssdk.String(gone), Attributes: map[string]string{"VisibilityTimeout": "5"}})
				return err
			},
			want: NotFound,
		},
		{
			name: "TagQueue of a deleted queue",
			call: func() error {
				_, err := c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: awssdk.String(gone), Tags: map[string]string{"a": "b"}})
				return err
			},
			want: NotFound,
		},
		{
			name: "CreateQueue of an existing name with other attributes",
			call: func() error {
				_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String("existing"), Attributes: map[string]string{"VisibilityTimeout": "60"}})
				return err
			},
			want:  Terminal,
			typed: isA[*types.QueueNameExists], code: "QueueAlreadyExists",
		},
		{
			name: "CreateQueue of an existing name with the same attributes is idempotent",
			call: func() error {
				_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String("existing"), Attributes: map[string]string{"VisibilityTimeout": "30"}})
				return err
			},
			want: None,
		},
		{
			name: "GetQueueAttributes of an unknown attribute",
			call: func() error {
				_, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: awssdk.String(existing), AttributeNames: []types.QueueAttributeName{"Bogus"}})
				return err
			},
			want:  Terminal,
			typed: isA[*types.InvalidAttributeName], code: "InvalidAttributeName",
		},
		{
			name: "CreateQueue with an out-of-range MaximumMessageSize",
			call: func() error {
				_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String("tiny"), Attributes: map[string]string{"MaximumMessageSize": "1"}})
				return err
			},
			want:  Terminal,
			typed: isA[*types.InvalidAttributeValue], code: "InvalidAttributeValue",
		},
		{
			name: "CreateQueue with an invalid name",
			call: func() error {
				_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String("bad name!")})
				return err
			},
			want:  Terminal,
			typed: isA[*smithy.GenericAPIError], code: "InvalidParameterValue",
		},
		{
			name: "CreateQueue of a FIFO queue without the .fifo suffix",
			call: func() error {
				_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String("plain"), Attributes: map[string]string{"FifoQueue": "true"}})
				return err
			},
			want: Terminal, code: "InvalidParameterValue",
		},
		{
			// Real SQS answers InvalidParameterValue here; moto answers
			// that the dead-letter queue does not exist. Either way, a
			// NotFound from CreateQueue is not about the queue itself.
			name: "CreateQueue whose redrive target is missing",
			call: func() error {
				_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String("redriven"), Attributes: map[string]string{
					"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:missing","maxReceiveCount":"3"}`,
				}})
				return err
			},
			want: NotFound,
		},
		{
			// Real SQS refuses this for 60 seconds (QueueDeletedRecently);
			// moto 5.2.1 does not, so faultproxy's QueueDeletedRecently
			// fault proves that classification instead.
			name: "CreateQueue right after DeleteQueue of the same name",
			call: func() error {
				_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String("gone")})
				return err
			},
			want: None,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tt.call()
			g.Expect(Classify(err)).To(Equal(tt.want), "error: %v", err)
			if tt.typed != nil {
				g.Expect(tt.typed(err)).To(BeTrue(), "error type: %v", err)
			}
			if tt.code != "" {
				var apiErr smithy.APIError
				g.Expect(errors.As(err, &apiErr)).To(BeTrue())
				g.Expect(apiErr.ErrorCode()).To(Equal(tt.code))
			}
		})
	}
}

func TestIsCredentialError(t *testing.T) {
	g := NewWithT(t)
	g.Expect(IsCredentialError(&smithy.GenericAPIError{Code: "InvalidClientTokenId"})).To(BeTrue())
	g.Expect(IsCredentialError(fmt.Errorf("wrapped: %w", &smithy.GenericAPIError{Code: "AccessDenied"}))).To(BeTrue())
	g.Expect(IsCredentialError(&smithy.GenericAPIError{Code: "InvalidAttributeValue"})).To(BeFalse())
	g.Expect(IsCredentialError(errors.New("dial tcp: connection refused"))).To(BeFalse())
	// Every credential code is also Terminal.
	for code := range credentialCodes {
		g.Expect(Classify(&smithy.GenericAPIError{Code: code})).To(Equal(Terminal), code)
	}
}
