package aws

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Class says what a caller should do about an error.
type Class int

const (
	// None is the class of a nil error.
	None Class = iota
	// NotFound: the resource does not exist. A delete is done; an observe
	// should create. Beware: moto also answers NotFound (QueueDoesNotExist)
	// to a CreateQueue whose redrive target is missing, so a NotFound from
	// CreateQueue is not about the queue being created.
	NotFound
	// Terminal: retrying cannot help until someone changes something (the
	// spec, the credentials, the permissions). Report it and wait for a
	// change.
	Terminal
	// Throttled: the upstream, or the local limiter, asks us to slow down.
	// Requeue after RetryAfter's hint when there is one, with backoff when
	// there is none. It is not a failure.
	Throttled
	// Transient: a 5xx, a network error, a timeout, or anything unknown.
	// Requeue with backoff.
	Transient
)

// String returns the class's name, such as "NotFound".
func (c Class) String() string {
	switch c {
	case None:
		return "None"
	case NotFound:
		return "NotFound"
	case Terminal:
		return "Terminal"
	case Throttled:
		return "Throttled"
	case Transient:
		return "Transient"
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// RecreateDelay is how long SQS refuses to create a queue under the name of a
// queue deleted before (QueueDeletedRecently). Classify calls that refusal
// Throttled, and RetryAfter returns RecreateDelay for it: nothing is wrong,
// the caller only has to come back later.
const RecreateDelay = 60 * time.Second

// credentialCodes are the codes by which an upstream refuses the caller's
// identity or permissions rather than the request: Terminal, and reported as a
// credentials problem.
var credentialCodes = map[string]bool{
	"InvalidClientTokenId":        true,
	"UnrecognizedClientException": true,
	"SignatureDoesNotMatch":       true,
	"IncompleteSignature":         true,
	"MissingAuthenticationToken":  true,
	"InvalidAccessKeyId":          true,
	"AccessDenied":                true,
	"AccessDeniedException":       true,
	"AuthFailure":                 true,
	"ExpiredToken":                true,
	"ExpiredTokenException":       true,
	"InvalidToken":                true,
	"OptInRequired":               true,
}

func init() {
	for code := range credentialCodes {
		codeClasses[code] = Terminal
	}
}

// IsCredentialError says whether the upstream refused who is calling rather
// than what was asked. Some endpoints (moto among them) answer with a body the
// SDK cannot parse; then a 401 or 403 status is all there is.
func IsCredentialError(err error) bool {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && credentialCodes[apiErr.ErrorCode()] {
		return true
	}
	var respErr *smithyhttp.ResponseError
	return errors.As(err, &respErr) &&
		(respErr.HTTPStatusCode() == http.StatusUnauthorized || respErr.HTTPStatusCode() == http.StatusForbidden)
}

// codeClasses maps the error codes that an APIError carries to their class.
// Through the AWS JSON protocol the SDK returns SQS's typed errors (such as
// *types.QueueDoesNotExist) with the legacy query code as ErrorCode (such as
// AWS.SimpleQueueService.NonExistentQueue), read from the x-amzn-query-error
// header, and the shape name when that header is absent. Both are listed.
// Codes that no SQS shape models come back as *smithy.GenericAPIError.
var codeClasses = map[string]Class{
	// The resource is not there.
	"AWS.SimpleQueueService.NonExistentQueue": NotFound,
	"QueueDoesNotExist":                       NotFound,
	"ResourceNotFoundException":               NotFound,
	"NoSuchBucket":                            NotFound,
	"NoSuchKey":                               NotFound,
	"NotFound":                                NotFound,
	"NoSuchVersion":                           NotFound,

	// Slow down. The SDK's own list (retry.DefaultThrottleErrorCodes), plus
	// SQS's.
	"Throttling":                                  Throttled,
	"ThrottlingException":                         Throttled,
	"ThrottledException":                          Throttled,
	"RequestThrottledException":                   Throttled,
	"TooManyRequestsException":                    Throttled,
	"ProvisionedThroughputExceededException":      Throttled,
	"TransactionInProgressException":              Throttled,
	"RequestLimitExceeded":                        Throttled,
	"BandwidthLimitExceeded":                      Throttled,
	"LimitExceededException":                      Throttled,
	"RequestThrottled":                            Throttled,
	"SlowDown":                                    Throttled,
	"PriorRequestNotComplete":                     Throttled,
	"EC2ThrottledException":                       Throttled,
	"KMS.ThrottlingException":                     Throttled,
	"KmsThrottled":                                Throttled,
	"AWS.SimpleQueueService.QueueDeletedRecently": Throttled,
	"QueueDeletedRecently":                        Throttled,
	"AWS.SimpleQueueService.PurgeQueueInProgress": Throttled,
	"PurgeQueueInProgress":                        Throttled,

	// The request is wrong: the spec must change.
	"QueueAlreadyExists":                          Terminal, // QueueNameExists: same name, other attributes
	"QueueNameExists":                             Terminal,
	"InvalidAttributeName":                        Terminal,
	"InvalidAttributeValue":                       Terminal,
	"InvalidParameterValue":                       Terminal,
	"InvalidParameterCombination":                 Terminal,
	"MissingParameter":                            Terminal,
	"InvalidAddress":                              Terminal,
	"InvalidSecurity":                             Terminal,
	"InvalidIdFormat":                             Terminal,
	"OverLimit":                                   Terminal,
	"AWS.SimpleQueueService.UnsupportedOperation": Terminal,
	"UnsupportedOperation":                        Terminal,
	"ValidationError":                             Terminal,
	"ValidationException":                         Terminal,
	"InvalidAction":                               Terminal,
	"UnknownOperationException":                   Terminal,
	"SerializationException":                      Terminal,
	"KMS.AccessDeniedException":                   Terminal,
	"KmsAccessDenied":                             Terminal,
	"KMS.DisabledException":                       Terminal,
	"KmsDisabled":                                 Terminal,
	"KMS.InvalidKeyUsageException":                Terminal,
	"KmsInvalidKeyUsage":                          Terminal,
	"KMS.InvalidStateException":                   Terminal,
	"KmsInvalidState":                             Terminal,
	"KMS.NotFoundException":                       Terminal,
	"KmsNotFound":                                 Terminal,
	"KMS.OptInRequired":                           Terminal,
	"KmsOptInRequired":                            Terminal,

	// S3: the request or the bucket is wrong, or the store refuses it for
	// good. Forbidden is what a HEAD (no body) refused with 403 carries;
	// PermanentRedirect and AuthorizationHeaderMalformed name the wrong
	// region.
	"Forbidden":                    Terminal,
	"InvalidBucketName":            Terminal,
	"InvalidBucketState":           Terminal,
	"InvalidObjectState":           Terminal,
	"InvalidStorageClass":          Terminal,
	"InvalidArgument":              Terminal,
	"InvalidRequest":               Terminal,
	"InvalidRange":                 Terminal,
	"KeyTooLongError":              Terminal,
	"EntityTooLarge":               Terminal,
	"EntityTooSmall":               Terminal,
	"MetadataTooLarge":             Terminal,
	"MissingContentLength":         Terminal,
	"MethodNotAllowed":             Terminal,
	"NotImplemented":               Terminal,
	"AllAccessDisabled":            Terminal,
	"AccountProblem":               Terminal,
	"PermanentRedirect":            Terminal,
	"AuthorizationHeaderMalformed": Terminal,
	"RequestTimeTooSkewed":         Terminal,

	// The upstream failed; try again.
	"InternalError":           Transient,
	"InternalFailure":         Transient,
	"ServiceUnavailable":      Transient,
	"RequestTimeout":          Transient,
	"RequestTimeoutException": Transient,
	// S3: a multipart upload that someone aborted, parts or bytes damaged
	// on the way, or a conditional write (If-Match, If-None-Match) that lost
	// to another writer: a new attempt starts from the current state.
	"NoSuchUpload":               Transient,
	"InvalidPart":                Transient,
	"InvalidPartOrder":           Transient,
	"BadDigest":                  Transient,
	"InvalidDigest":              Transient,
	"XAmzContentSHA256Mismatch":  Transient,
	"IncompleteBody":             Transient,
	"PreconditionFailed":         Transient,
	"ConditionalRequestConflict": Transient,
	"OperationAborted":           Transient,
}

// Classify says what to do about err, which an SDK call or LoadConfig
// returned. It looks, in order, at:
//   - the local limiter's *RateLimitedError: Throttled;
//   - ErrInvalidConfig and ErrNoDeadline: Terminal;
//   - a cancelled or expired context: Transient;
//   - SQS's typed errors and the APIError's code (see codeClasses);
//   - the HTTP status, for an answer whose body did not parse or whose code
//     is unknown: 429 is Throttled, 401 and 403 are Terminal;
//   - anything else, including every 5xx and network error: Transient.
//
// Unknown errors are Transient, never Terminal, so that an error that this
// table misses costs retries with backoff rather than a stuck resource.
func Classify(err error) Class {
	if err == nil {
		return None
	}
	if isA[*RateLimitedError](err) {
		return Throttled
	}
	if errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrNoDeadline) {
		return Terminal
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || isA[*smithy.CanceledError](err) {
		return Transient
	}
	switch {
	case isA[*types.QueueDoesNotExist](err):
		return NotFound
	case isA[*types.QueueDeletedRecently](err), isA[*types.RequestThrottled](err):
		return Throttled
	case isA[*types.QueueNameExists](err), isA[*types.InvalidAttributeName](err), isA[*types.InvalidAttributeValue](err):
		return Terminal
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		if c, ok := codeClasses[apiErr.ErrorCode()]; ok {
			return c
		}
	}
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) {
		switch respErr.HTTPStatusCode() {
		case http.StatusTooManyRequests:
			return Throttled
		case http.StatusUnauthorized, http.StatusForbidden:
			return Terminal
		}
	}
	return Transient
}

// RetryAfter returns the upstream's, or the limiter's, hint of when to try
// again, and whether there is one:
//   - a *RateLimitedError's RetryAfter;
//   - RecreateDelay for QueueDeletedRecently and PurgeQueueInProgress, the
//     two SQS refusals that last 60 seconds;
//   - the Retry-After header of the HTTP answer, in seconds or as a date,
//     which is taken relative to the answer's Date header.
func RetryAfter(err error) (time.Duration, bool) {
	if err == nil {
		return 0, false
	}
	var limited *RateLimitedError
	if errors.As(err, &limited) {
		return limited.RetryAfter, true
	}
	if isA[*types.QueueDeletedRecently](err) || isA[*types.PurgeQueueInProgress](err) {
		return RecreateDelay, true
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "AWS.SimpleQueueService.QueueDeletedRecently", "QueueDeletedRecently",
			"AWS.SimpleQueueService.PurgeQueueInProgress", "PurgeQueueInProgress":
			return RecreateDelay, true
		}
	}
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) && respErr.Response != nil && respErr.Response.Response != nil {
		return parseRetryAfter(respErr.Response.Header)
	}
	return 0, false
}

func parseRetryAfter(h http.Header) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.Atoi(v); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(secs) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	// Measure against the upstream's own clock, not ours.
	date, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		return 0, false
	}
	if d := at.Sub(date); d > 0 {
		return d, true
	}
	return 0, true
}

// isA reports whether err's chain holds an error of type T.
func isA[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}
