package aws

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/middleware"

	"github.com/tend-dev/tend/internal/fence"
)

// ErrInvalidConfig marks an error of LoadConfig: the Connection or the
// environment cannot make a usable configuration. Classify calls it Terminal.
var ErrInvalidConfig = errors.New("invalid AWS configuration")

// ErrNoDeadline is returned, without any request being sent, by a call whose
// context has no deadline. Every call must carry its timeout in its context,
// so that no worker can wait forever on an upstream. Classify calls it
// Terminal: it is a bug in the caller.
var ErrNoDeadline = errors.New("AWS API call without a deadline on its context")

// Connection says how to reach one upstream. A zero field falls back to the
// SDK's default chain: environment, shared config files, then the platform
// (IRSA, ECS, EC2 instance metadata).
type Connection struct {
	// Region overrides AWS_REGION and the shared config. LoadConfig fails
	// when neither it nor the default chain yields a region.
	Region string
	// EndpointURL, such as "http://127.0.0.1:5000", overrides the endpoint
	// of every service built from the configuration. It wins over
	// AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_<SERVICE> and the services sections
	// of the shared config. When empty, those apply as the SDK defines.
	EndpointURL string
	// Credentials, when set, replace the default credential chain. The
	// operator reads them from a Kubernetes Secret.
	Credentials *StaticCredentials
	// Limiters holds the token buckets that every worker shares. It is
	// required: no call may bypass the per-upstream limit.
	Limiters *Limiters
	// Gate, when set, is passed by every call that may change something
	// upstream (every operation but the reads: Get*, List*, Head*,
	// Describe*) before anything is signed or sent: the manager's check
	// that it still holds its leader-election Lease (manager.GateOf). A
	// refused call returns the Gate's error and sends nothing. Nil lets
	// every call through: the agents, which a Job runs, lead nothing.
	Gate fence.Gate
}

// StaticCredentials are long-lived or session credentials given explicitly.
// Their String and GoString methods redact the secret parts, so that logging
// a Connection never leaks them.
type StaticCredentials struct {
	// AccessKeyID identifies the key; it is not secret.
	AccessKeyID string
	// SecretAccessKey signs the requests.
	SecretAccessKey string
	// SessionToken is set for temporary credentials only.
	SessionToken string
}

// String returns the access key id and hides the secret and the token.
func (c StaticCredentials) String() string {
	token := ""
	if c.SessionToken != "" {
		token = ", SessionToken: <redacted>"
	}
	return fmt.Sprintf("{AccessKeyID: %s, SecretAccessKey: <redacted>%s}", c.AccessKeyID, token)
}

// GoString is String, for the %#v verb.
func (c StaticCredentials) GoString() string { return "aws.StaticCredentials" + c.String() }

// LoadConfig builds an SDK configuration for conn on top of the SDK's default
// chain. Every client built from it (sqs.NewFromConfig and the like):
//   - makes exactly one attempt per call: the retryer is aws.NopRetryer and
//     AWS_MAX_ATTEMPTS and AWS_RETRY_MODE are ignored;
//   - refuses a call whose context has no deadline, with ErrNoDeadline;
//   - passes every call but the reads through conn.Gate, when set, and
//     sends nothing when it refuses;
//   - takes a token from conn.Limiters for the call's endpoint before sending
//     it, and fails at once with a *RateLimitedError when there is none;
//   - counts the call in conn.Limiters and in RequestsTotal.
//
// LoadConfig itself sends nothing: credentials are fetched on the first call.
// Its errors wrap ErrInvalidConfig.
func LoadConfig(ctx context.Context, conn Connection) (awssdk.Config, error) {
	if conn.Limiters == nil {
		return awssdk.Config{}, fmt.Errorf("%w: Connection.Limiters is nil, and every call must go through the shared limiter", ErrInvalidConfig)
	}
	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() awssdk.Retryer { return awssdk.NopRetryer{} }),
	}
	if conn.Region != "" {
		opts = append(opts, config.WithRegion(conn.Region))
	}
	if conn.EndpointURL != "" {
		if err := checkEndpoint(conn.EndpointURL); err != nil {
			return awssdk.Config{}, err
		}
		opts = append(opts, config.WithBaseEndpoint(conn.EndpointURL))
	}
	if c := conn.Credentials; c != nil {
		if c.AccessKeyID == "" || c.SecretAccessKey == "" {
			return awssdk.Config{}, fmt.Errorf("%w: static credentials need both an access key id and a secret access key", ErrInvalidConfig)
		}
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.SessionToken)))
	}

	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return awssdk.Config{}, fmt.Errorf("%w: loading the default chain: %w", ErrInvalidConfig, err)
	}
	if cfg.Region == "" {
		return awssdk.Config{}, fmt.Errorf("%w: no region: set one on the connection or in AWS_REGION", ErrInvalidConfig)
	}
	// The service clients wrap the retryer again when these are set.
	cfg.RetryMaxAttempts = 0
	cfg.RetryMode = ""
	if conn.EndpointURL != "" {
		// A service client reads AWS_ENDPOINT_URL_<SERVICE> and the shared
		// config's services sections from ConfigSources, first match wins,
		// after it has taken cfg.BaseEndpoint. Put the override first.
		cfg.ConfigSources = append([]any{endpointOverride(conn.EndpointURL)}, cfg.ConfigSources...)
	}
	cfg.APIOptions = append(cfg.APIOptions, requireDeadline, conn.Limiters.APIOption())
	if conn.Gate != nil {
		cfg.APIOptions = append(cfg.APIOptions, gateWrites(conn.Gate))
	}
	return cfg, nil
}

func checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: endpoint URL %q: %w", ErrInvalidConfig, raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: endpoint URL %q must be http:// or https:// with a host", ErrInvalidConfig, raw)
	}
	return nil
}

// endpointOverride answers the SDK's lookup of a service-specific endpoint
// (configsources.ServiceBaseEndpointProvider) with the same URL for every
// service.
type endpointOverride string

func (e endpointOverride) GetServiceBaseEndpoint(context.Context, string) (string, bool, error) {
	return string(e), true, nil
}

// isRead tells whether the operation named op (an SDK stack's ID, such as
// "GetQueueAttributes") only reads: its name begins with Get, List, Head or
// Describe, as AWS names its reads. Every other operation may change
// something, and passes Connection.Gate.
func isRead(op string) bool {
	for _, prefix := range []string{"Get", "List", "Head", "Describe"} {
		if strings.HasPrefix(op, prefix) {
			return true
		}
	}
	return false
}

// gateWrites makes every operation but the reads pass g first. It is an
// Initialize step, after the deadline's check: a refused call takes no
// token, fetches no credentials, and signs and sends nothing.
func gateWrites(g fence.Gate) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		if isRead(stack.ID()) {
			return nil
		}
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("TendGate",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				// The SDK's error names the operation.
				if err := g.Allow(ctx); err != nil {
					return middleware.InitializeOutput{}, middleware.Metadata{}, err
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	}
}

// requireDeadline is the first step of every call: it refuses a context
// without a deadline before anything is resolved, signed or sent.
func requireDeadline(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("TendRequireDeadline",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if _, ok := ctx.Deadline(); !ok {
				return middleware.InitializeOutput{}, middleware.Metadata{}, ErrNoDeadline
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}
