package aws

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

const (
	// DefaultQPS is the sustained rate of calls per upstream endpoint.
	DefaultQPS = 10
	// DefaultBurst is how many calls an idle upstream endpoint takes at once.
	DefaultBurst = 20
)

// Outcomes of a call, as counted in RequestsTotal's outcome label.
const (
	OutcomeSuccess     = "success"
	OutcomeNotFound    = "not_found"
	OutcomeTerminal    = "terminal"
	OutcomeThrottled   = "throttled"
	OutcomeTransient   = "transient"
	OutcomeRateLimited = "rate_limited" // refused by the local limiter: never sent
)

// RequestsTotal counts the calls to AWS APIs by endpoint (EndpointKey),
// operation (such as CreateQueue) and outcome (the Outcome constants). Every
// outcome but rate_limited reached the upstream. It is registered on
// controller-runtime's metrics registry as tend_upstream_requests_total.
var RequestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "tend_upstream_requests_total",
	Help: "Calls to upstream AWS APIs by endpoint, operation and outcome; rate_limited calls were refused locally and never sent.",
}, []string{"endpoint", "operation", "outcome"})

func init() {
	metrics.Registry.MustRegister(RequestsTotal)
}

// LimiterOptions configures NewLimiters. Zero fields take the defaults.
type LimiterOptions struct {
	// QPS is the sustained rate per endpoint. Zero means DefaultQPS.
	QPS float64
	// Burst is the bucket's size per endpoint. Zero means DefaultBurst.
	Burst int
	// Clock tells the time. Nil means the real clock. A waiting Limiters
	// (Wait) sleeps on it when it is a clock.Clock, else on the real one.
	Clock clock.PassiveClock
	// Wait makes a call that finds its endpoint's bucket empty wait for a
	// token, for as long as its context allows, instead of failing at once.
	// It is for one-shot agents, which have nothing else to do and must not
	// fail because a bucket was empty for a moment (a backup uploading many
	// parts at once). A controller's worker must never wait: controllers
	// leave it false. A waiting call whose deadline comes before its token
	// could fails at once, with the *RateLimitedError, as without Wait.
	Wait bool
}

// Limiters holds one token bucket per upstream endpoint, shared by every
// worker of the process. It never blocks, unless made with Wait: a call that
// finds the bucket empty is refused with a *RateLimitedError, and a refused
// call takes no token. It is safe for concurrent use.
type Limiters struct {
	qps   rate.Limit
	burst int
	clock clock.PassiveClock
	wait  bool

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	limiter *rate.Limiter
	sent    atomic.Uint64
	refused atomic.Uint64
}

// Stats counts the calls to one endpoint since its first call.
type Stats struct {
	// Sent calls took a token and went to the upstream.
	Sent uint64
	// Refused calls found no token and were not sent. With Wait, a call
	// counts once each time it tried and found none, also when it went
	// later.
	Refused uint64
}

// RateLimitedError is returned for a call that the local limiter refused. The
// call was not sent. Classify calls it Throttled, and RetryAfter returns
// RetryAfter.
type RateLimitedError struct {
	// Endpoint is the bucket's key, as EndpointKey gives it.
	Endpoint string
	// RetryAfter is when the bucket will next hold a token, if no other
	// caller takes it first.
	RetryAfter time.Duration
}

// Error says which endpoint refused the call and when to come back.
func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("rate limited: no token for %s, retry after %s", e.Endpoint, e.RetryAfter)
}

// NewLimiters returns an empty set of buckets. Each endpoint's bucket starts
// full on its first call.
func NewLimiters(o LimiterOptions) (*Limiters, error) {
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
	if o.QPS < 0 || math.IsInf(o.QPS, 0) || math.IsNaN(o.QPS) {
		return nil, fmt.Errorf("limiter QPS must be a positive number, not %v", o.QPS)
	}
	if o.Burst < 0 {
		return nil, fmt.Errorf("limiter burst must be at least 1, not %d", o.Burst)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Limiters{qps: rate.Limit(o.QPS), burst: o.Burst, clock: o.Clock, wait: o.Wait, buckets: map[string]*bucket{}}, nil
}

func (l *Limiters) bucket(endpoint string) *bucket {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[endpoint]
	if !ok {
		b = &bucket{limiter: rate.NewLimiter(l.qps, l.burst)}
		l.buckets[endpoint] = b
	}
	return b
}

// Take takes a token for one call to endpoint. It returns nil when the call
// may go, or a *RateLimitedError, having taken nothing, when it may not. The
// SDK middleware calls it for every request; call it directly only for an
// upstream that is not reached through the SDK.
func (l *Limiters) Take(endpoint string) error { return l.takeN(endpoint, 1) }

// takeN takes n tokens at once for the call about to be sent, or none. A
// group larger than the burst is charged the burst, since more could never
// be granted.
func (l *Limiters) takeN(endpoint string, n int) error {
	b := l.bucket(endpoint)
	n = min(n, l.burst)
	now := l.clock.Now()
	// AllowN changes the bucket only when it grants the tokens.
	if b.limiter.AllowN(now, n) {
		b.sent.Add(1)
		return nil
	}
	b.refused.Add(1)
	missing := float64(n) - b.limiter.TokensAt(now)
	wait := time.Duration(math.Ceil(missing / float64(l.qps) * float64(time.Second)))
	// Round up to the millisecond so that a caller that sleeps, or requeues,
	// for the hint finds a whole token.
	wait = (wait + time.Millisecond - 1).Truncate(time.Millisecond)
	if wait <= 0 {
		wait = time.Millisecond
	}
	return &RateLimitedError{Endpoint: endpoint, RetryAfter: wait}
}

type callGroupKey struct{}

// callGroup is what WithCallGroup's calls have paid for.
type callGroup struct {
	mu       sync.Mutex
	n        int
	endpoint string // where the group's tokens were taken; "" before
	prepaid  int    // tokens taken and not yet used by a call
}

// WithCallGroup returns a context whose next n calls to one endpoint take
// their tokens together: the first takes n tokens at once, or is refused
// and takes none, and the n-1 after it take none. A pass that must make
// several calls to be of any use runs them in such a context, so that it
// either can finish or spends nothing. With a token per call, passes that
// compete for an empty bucket each get their first call through, find no
// token for the next, and retry: the bucket is spent and no pass finishes.
// Calls beyond n, or to another endpoint, take a token each as usual.
func WithCallGroup(ctx context.Context, n int) context.Context {
	if n <= 1 {
		return ctx
	}
	return context.WithValue(ctx, callGroupKey{}, &callGroup{n: n})
}

// take takes what a call in ctx needs from endpoint's bucket, as takeOnce
// does; when l waits, it tries again each time the refusal says that a
// token will be there, until ctx's deadline would pass first.
func (l *Limiters) take(ctx context.Context, endpoint string) error {
	for {
		err := l.takeOnce(ctx, endpoint)
		var limited *RateLimitedError
		if !l.wait || !errors.As(err, &limited) {
			return err
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < limited.RetryAfter {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-l.after(limited.RetryAfter):
		}
	}
}

// after is time.After on l's clock, when it can sleep.
func (l *Limiters) after(d time.Duration) <-chan time.Time {
	if c, ok := l.clock.(clock.Clock); ok {
		return c.After(d)
	}
	return time.After(d)
}

// takeOnce takes what a call in ctx needs from endpoint's bucket: nothing
// when its group has paid for it, the group's tokens when it is the group's
// first call, one token otherwise.
func (l *Limiters) takeOnce(ctx context.Context, endpoint string) error {
	g, ok := ctx.Value(callGroupKey{}).(*callGroup)
	if !ok {
		return l.takeN(endpoint, 1)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.endpoint == "":
		if err := l.takeN(endpoint, g.n); err != nil {
			return err
		}
		g.endpoint, g.prepaid = endpoint, min(g.n, l.burst)-1
		return nil
	case g.endpoint == endpoint && g.prepaid > 0:
		g.prepaid--
		l.bucket(endpoint).sent.Add(1)
		return nil
	}
	return l.takeN(endpoint, 1)
}

// Stats returns the counts for endpoint, zero if it has never been called.
func (l *Limiters) Stats(endpoint string) Stats {
	l.mu.Lock()
	b, ok := l.buckets[endpoint]
	l.mu.Unlock()
	if !ok {
		return Stats{}
	}
	return Stats{Sent: b.sent.Load(), Refused: b.refused.Load()}
}

// EndpointKey names the upstream of a request URL: its scheme and host, with
// the port if the URL has one, such as "https://sqs.us-east-1.amazonaws.com"
// or "http://127.0.0.1:5000".
func EndpointKey(u *url.URL) string {
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
}

// APIOption returns the SDK stack option that puts every call through l.
// LoadConfig adds it to the configuration; add it yourself only to a client
// built from a configuration that LoadConfig did not make.
//
// The middleware is the last Finalize step, after endpoint resolution and
// signing and right before the request is sent, so it sees the endpoint
// really used. It runs once per attempt, and LoadConfig allows one attempt.
func (l *Limiters) APIOption() func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Finalize.Add(&limitMiddleware{limiters: l}, middleware.After)
	}
}

type limitMiddleware struct {
	limiters *Limiters
}

func (*limitMiddleware) ID() string { return "TendUpstreamLimit" }

func (m *limitMiddleware) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	req, ok := in.Request.(*smithyhttp.Request)
	if !ok {
		return middleware.FinalizeOutput{}, middleware.Metadata{}, fmt.Errorf("upstream limit: unexpected request type %T", in.Request)
	}
	endpoint := EndpointKey(req.URL)
	operation := awsmiddleware.GetOperationName(ctx)
	if err := m.limiters.take(ctx, endpoint); err != nil {
		RequestsTotal.WithLabelValues(endpoint, operation, OutcomeRateLimited).Inc()
		return middleware.FinalizeOutput{}, middleware.Metadata{}, err
	}
	out, md, err := next.HandleFinalize(ctx, in)
	RequestsTotal.WithLabelValues(endpoint, operation, outcome(err)).Inc()
	return out, md, err
}

func outcome(err error) string {
	switch Classify(err) {
	case None:
		return OutcomeSuccess
	case NotFound:
		return OutcomeNotFound
	case Terminal:
		return OutcomeTerminal
	case Throttled:
		return OutcomeThrottled
	default:
		return OutcomeTransient
	}
}
