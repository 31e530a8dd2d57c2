package queue

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
)

// Keys of a Queue's connection Secret.
const (
	keyAccessKeyID     = "AWS_ACCESS_KEY_ID"
	keySecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	keySessionToken    = "AWS_SESSION_TOKEN"
	keyRegion          = "AWS_REGION"
	keyEndpointSQS     = "AWS_ENDPOINT_URL_SQS"
)

// Connector hands out SQS clients: one built from the manager's settings,
// shared by every Queue without a connection Secret, and one per Secret
// version for the others. Every client goes through the same Limiters.
type Connector struct {
	// Reader reads connection Secrets: the manager's APIReader, since the
	// manager's cache holds no user's Secret (only Tend's, and every
	// Secret's metadata). A Get through the cached client would start a
	// cache of every Secret in the cluster when no other controller
	// narrows it.
	Reader client.Reader
	// Default is the manager's own connection (flags, then the SDK's
	// chain). Its Limiters and its Gate (which SetupWithManager sets to the
	// manager's, when nil) serve every client, a Secret's too.
	Default tendaws.Connection
	// AllowedEndpoints are the endpoints that a connection Secret may set;
	// the zero list allows none.
	AllowedEndpoints EndpointAllowList

	mu       sync.Mutex
	byRegion map[string]*sqs.Client // the manager's connection, per region
	bySecret map[types.UID]secretClient
}

type secretClient struct {
	resourceVersion string
	client          *sqs.Client
}

// connectionError says that the connection settings cannot be used; only the
// user can fix it, and a change to the Secret starts a new pass.
type connectionError struct{ err error }

func (e *connectionError) Error() string { return e.err.Error() }
func (e *connectionError) Unwrap() error { return e.err }

// endpointNotAllowedError says that a connection Secret names an endpoint
// that --sqs-allowed-endpoints does not allow. Nothing was sent to it.
type endpointNotAllowedError struct {
	secret   string
	endpoint string // as the message may show it: without user info
}

func (e *endpointNotAllowedError) Error() string {
	return fmt.Sprintf("the connection Secret %s sets %s to %s, which the manager does not allow, so Tend sent nothing there: "+
		"a cluster admin can add it to the manager's --sqs-allowed-endpoints flag, or remove %s from the Secret to use the manager's own endpoint",
		e.secret, keyEndpointSQS, e.endpoint, keyEndpointSQS)
}

// shownEndpoint is an endpoint as a status message may show it: a URL
// without its user info, or nothing of a value that is not a URL.
func shownEndpoint(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "a value that is not a URL"
	}
	u.User = nil
	return strconv.Quote(u.String())
}

// Client returns the SQS client for q.
func (c *Connector) Client(ctx context.Context, q *sqsv1alpha1.Queue) (*sqs.Client, error) {
	conn := q.Spec.Connection
	if conn == nil || conn.SecretRef == nil {
		return c.sharedClient(ctx, conn)
	}
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: q.Namespace, Name: conn.SecretRef.Name}
	if err := c.Reader.Get(ctx, key, secret); err != nil {
		return nil, &connectionError{fmt.Errorf("reading the connection Secret %s: %w", key.Name, err)}
	}
	// Checked on every pass, before the cache: no client is ever built for
	// an endpoint that the list does not allow.
	if v := string(secret.Data[keyEndpointSQS]); v != "" && !c.AllowedEndpoints.Allows(v) {
		return nil, &endpointNotAllowedError{secret: key.Name, endpoint: shownEndpoint(v)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cached, ok := c.bySecret[secret.UID]; ok && cached.resourceVersion == secret.ResourceVersion {
		return cached.client, nil
	}
	id, secretKey := string(secret.Data[keyAccessKeyID]), string(secret.Data[keySecretAccessKey])
	if id == "" || secretKey == "" {
		return nil, &connectionError{fmt.Errorf("the connection Secret %s needs the keys %s and %s", key.Name, keyAccessKeyID, keySecretAccessKey)}
	}
	settings := c.Default
	settings.Credentials = &tendaws.StaticCredentials{
		AccessKeyID: id, SecretAccessKey: secretKey, SessionToken: string(secret.Data[keySessionToken]),
	}
	if v := string(secret.Data[keyRegion]); v != "" {
		settings.Region = v
	}
	if conn.Region != "" {
		settings.Region = conn.Region
	}
	if v := string(secret.Data[keyEndpointSQS]); v != "" {
		settings.EndpointURL = v
	}
	cfg, err := tendaws.LoadConfig(ctx, settings)
	if err != nil {
		return nil, &connectionError{fmt.Errorf("the connection Secret %s: %w", key.Name, err)}
	}
	if c.bySecret == nil {
		c.bySecret = map[types.UID]secretClient{}
	}
	sc := sqs.NewFromConfig(cfg)
	c.bySecret[secret.UID] = secretClient{resourceVersion: secret.ResourceVersion, client: sc}
	return sc, nil
}

// sharedClient returns the client of the manager's own connection, in the
// Queue's region when it overrides it. Clients are kept, so that their
// credential caches are too (with IRSA, a fresh one would cost an STS call).
func (c *Connector) sharedClient(ctx context.Context, conn *sqsv1alpha1.Connection) (*sqs.Client, error) {
	settings := c.Default
	if conn != nil && conn.Region != "" {
		settings.Region = conn.Region
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if sc, ok := c.byRegion[settings.Region]; ok {
		return sc, nil
	}
	cfg, err := tendaws.LoadConfig(ctx, settings)
	if err != nil {
		return nil, &connectionError{fmt.Errorf("the manager's AWS settings: %w", err)}
	}
	if c.byRegion == nil {
		c.byRegion = map[string]*sqs.Client{}
	}
	sc := sqs.NewFromConfig(cfg)
	c.byRegion[settings.Region] = sc
	return sc, nil
}
