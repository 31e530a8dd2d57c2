package aws

import (
	"errors"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/tend-dev/tend/internal/testing/faultproxy"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestNewLimiters(t *testing.T) {
	tests := []struct {
		name      string
		opts      LimiterOptions
		wantErr   string
		wantQPS   float64
		wantBurst int
	}{
		{name: "defaults", opts: LimiterOptions{}, wantQPS: DefaultQPS, wantBurst: DefaultBurst},
		{name: "explicit", opts: LimiterOptions{QPS: 0.5, Burst: 3}, wantQPS: 0.5, wantBurst: 3},
		{name: "negative QPS", opts: LimiterOptions{QPS: -1}, wantErr: "QPS must be a positive number"},
		{name: "negative burst", opts: LimiterOptions{Burst: -1}, wantErr: "burst must be at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			l, err := NewLimiters(tt.opts)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(float64(l.qps)).To(Equal(tt.wantQPS))
			g.Expect(l.burst).To(Equal(tt.wantBurst))
		})
	}
}

func TestLimitersTake(t *testing.T) {
	const a, b = "https://sqs.us-east-1.amazonaws.com", "http://127.0.0.1:5000"
	type step struct {
		advance   time.Duration // before taking
		endpoint  string
		wantAfter time.Duration // zero: granted; else refused with this hint
	}
	tests := []struct {
		name      string
		qps       float64
		burst     int
		steps     []step
		wantStats map[string]Stats
	}{
		{
			name: "a full bucket grants its burst, then refuses until a token drips in",
			qps:  10, burst: 3,
			steps: []step{
				{endpoint: a}, {endpoint: a}, {endpoint: a},
				{endpoint: a, wantAfter: 100 * time.Millisecond},
				{advance: 40 * time.Millisecond, endpoint: a, wantAfter: 60 * time.Millisecond},
				{advance: 60 * time.Millisecond, endpoint: a},
			},
			wantStats: map[string]Stats{a: {Sent: 4, Refused: 2}},
		},
		{
			name: "refused calls take no token",
			qps:  10, burst: 1,
			steps: []step{
				{endpoint: a},
				{endpoint: a, wantAfter: 100 * time.Millisecond},
				{endpoint: a, wantAfter: 100 * time.Millisecond},
				{endpoint: a, wantAfter: 100 * time.Millisecond},
				{endpoint: a, wantAfter: 100 * time.Millisecond},
				// One interval later there is exactly one token, as if
				// the four refusals had never happened.
				{advance: 100 * time.Millisecond, endpoint: a},
				{endpoint: a, wantAfter: 100 * time.Millisecond},
			},
			wantStats: map[string]Stats{a: {Sent: 2, Refused: 5}},
		},
		{
			name: "each endpoint has its own bucket",
			qps:  1, burst: 1,
			steps: []step{
				{endpoint: a},
				{endpoint: a, wantAfter: time.Second},
				{endpoint: b},
				{endpoint: b, wantAfter: time.Second},
			},
			wantStats: map[string]Stats{a: {Sent: 1, Refused: 1}, b: {Sent: 1, Refused: 1}, "http://never": {}},
		},
		{
			name: "the hint rounds up to the millisecond",
			qps:  3, burst: 1,
			steps: []step{
				{endpoint: a},
				{endpoint: a, wantAfter: 334 * time.Millisecond},
			},
			wantStats: map[string]Stats{a: {Sent: 1, Refused: 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			clock := clocktesting.NewFakePassiveClock(epoch)
			l, err := NewLimiters(LimiterOptions{QPS: tt.qps, Burst: tt.burst, Clock: clock})
			g.Expect(err).NotTo(HaveOccurred())
			for i, s := range tt.steps {
				clock.SetTime(clock.Now().Add(s.advance))
				err := l.Take(s.endpoint)
				if s.wantAfter == 0 {
					g.Expect(err).NotTo(HaveOccurred(), "step %d", i)
					continue
				}
				var limited *RateLimitedError
				g.Expect(errors.As(err, &limited)).To(BeTrue(), "step %d: %v", i, err)
				g.Expect(*limited).To(Equal(RateLimitedError{Endpoint: s.endpoint, RetryAfter: s.wantAfter}), "step %d", i)
			}
			for endpoint, want := range tt.wantStats {
				g.Expect(l.Stats(endpoint)).To(Equal(want), endpoint)
			}
		})
	}
}

// TestLimitersConcurrent shows that workers racing for one bucket get
// exactly its tokens, no more and no fewer.
func TestLimitersConcurrent(t *testing.T) {
	g := NewWithT(t)
	const endpoint, burst, workers = "http://127.0.0.1:1", 10, 64
	l, err := NewLimiters(LimiterOptions{QPS: 1, Burst: burst, Clock: clocktesting.NewFakePassiveClock(epoch)})
	g.Expect(err).NotTo(HaveOccurred())
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range workers {
		wg.Go(func() {
			if l.Take(endpoint) == nil {
				mu.Lock()
				granted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	g.Expect(granted).To(Equal(burst))
	g.Expect(l.Stats(endpoint)).To(Equal(Stats{Sent: burst, Refused: workers - burst}))
}

func TestEndpointKey(t *testing.T) {
	tests := []struct {
		url  string
		want string
	}{
		{url: "https://sqs.us-east-1.amazonaws.com/", want: "https://sqs.us-east-1.amazonaws.com"},
		{url: "http://127.0.0.1:5000/123456789012/q?x=y", want: "http://127.0.0.1:5000"},
		{url: "HTTPS://SQS.EU-WEST-1.AMAZONAWS.COM:443/path", want: "https://sqs.eu-west-1.amazonaws.com:443"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			g := NewWithT(t)
			u, err := url.Parse(tt.url)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(EndpointKey(u)).To(Equal(tt.want))
		})
	}
}

// TestLimitersThroughSDK shows that every SQS call of every client built by
// LoadConfig goes through the shared bucket of its endpoint: refused calls
// never reach the upstream, and the counts say so.
func TestLimitersThroughSDK(t *testing.T) {
	g := NewWithT(t)
	ctx := callCtx(t)
	proxy := faultproxy.Start(t, server.URL)
	proxied, err := url.Parse(proxy.URL())
	g.Expect(err).NotTo(HaveOccurred())
	endpoint := EndpointKey(proxied)

	// Time stands still: the buckets never refill.
	l, err := NewLimiters(LimiterOptions{QPS: 1, Burst: 2, Clock: clocktesting.NewFakePassiveClock(epoch)})
	g.Expect(err).NotTo(HaveOccurred())
	conn := Connection{EndpointURL: proxy.URL(), Limiters: l}
	worker1, worker2 := newSQS(t, conn), newSQS(t, conn)

	_, err = worker1.ListQueues(ctx, &sqs.ListQueuesInput{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = worker1.ListQueues(ctx, &sqs.ListQueuesInput{})
	g.Expect(err).NotTo(HaveOccurred())
	// Another client with the same Limiters shares the empty bucket.
	_, err = worker2.ListQueues(ctx, &sqs.ListQueuesInput{})
	g.Expect(Classify(err)).To(Equal(Throttled))
	var limited *RateLimitedError
	g.Expect(errors.As(err, &limited)).To(BeTrue())
	g.Expect(limited.Endpoint).To(Equal(endpoint))
	after, ok := RetryAfter(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(after).To(Equal(time.Second))

	g.Expect(proxy.Total()).To(Equal(2), "the refused call must not reach the upstream")
	g.Expect(l.Stats(endpoint)).To(Equal(Stats{Sent: 2, Refused: 1}))
	g.Expect(testutil.ToFloat64(RequestsTotal.WithLabelValues(endpoint, "ListQueues", OutcomeSuccess))).To(Equal(2.0))
	g.Expect(testutil.ToFloat64(RequestsTotal.WithLabelValues(endpoint, "ListQueues", OutcomeRateLimited))).To(Equal(1.0))

	// Another endpoint has its own full bucket.
	other := newSQS(t, Connection{EndpointURL: server.URL, Limiters: l})
	_, err = other.ListQueues(ctx, &sqs.ListQueuesInput{})
	g.Expect(err).NotTo(HaveOccurred())
	otherURL, err := url.Parse(server.URL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.Stats(EndpointKey(otherURL))).To(Equal(Stats{Sent: 1}))
}

// TestRequestsTotalOutcomes shows that the counter tells the upstream's
// answers apart, for a benchmark that reads the call rate.
func TestRequestsTotalOutcomes(t *testing.T) {
	g := NewWithT(t)
	ctx := callCtx(t)
	proxy := faultproxy.Start(t, server.URL)
	proxied, err := url.Parse(proxy.URL())
	g.Expect(err).NotTo(HaveOccurred())
	endpoint := EndpointKey(proxied)
	c := newSQS(t, Connection{EndpointURL: proxy.URL(), Limiters: newLimiters(t)})

	missing := "missing"
	get := func() { _, _ = c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &missing}) }
	get()
	proxy.SetMode(faultproxy.Throttle)
	get()
	proxy.SetMode(faultproxy.ServerError)
	get()
	get()

	count := func(outcome string) float64 {
		return testutil.ToFloat64(RequestsTotal.WithLabelValues(endpoint, "GetQueueUrl", outcome))
	}
	g.Expect([]float64{count(OutcomeSuccess), count(OutcomeNotFound), count(OutcomeThrottled), count(OutcomeTransient)}).
		To(Equal([]float64{0, 1, 1, 2}))
}
