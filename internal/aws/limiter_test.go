package aws

import (
	"context"
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

func TestCallGroup(t *testing.T) {
	const a, b = "https://sqs.us-east-1.amazonaws.com", "http://127.0.0.1:5000"
	type call struct {
		group     int // which context of the test case it is made in; 0 for none
		endpoint  string
		wantAfter time.Duration // zero: granted; else refused with this hint
	}
	tests := []struct {
		name      string
		burst     int
		groups    map[int]int // group id to its size
		pre       int         // single calls to a before the test's calls, counted in wantStats
		calls     []call
		wantStats map[string]Stats
	}{
		{
			name: "the first call takes the group's tokens and the next take none",
			// 3 tokens: the group's 2, then one for a call beyond the group.
			burst: 3, groups: map[int]int{1: 2},
			calls: []call{
				{group: 1, endpoint: a}, {group: 1, endpoint: a}, {group: 1, endpoint: a},
				{group: 1, endpoint: a, wantAfter: 100 * time.Millisecond},
			},
			wantStats: map[string]Stats{a: {Sent: 3, Refused: 1}},
		},
		{
			name: "a refused group takes nothing",
			// One token left: not enough for a group of 2, enough for a call.
			burst: 3, pre: 2, groups: map[int]int{1: 2},
			calls: []call{
				{group: 1, endpoint: a, wantAfter: 100 * time.Millisecond},
				{endpoint: a},
			},
			wantStats: map[string]Stats{a: {Sent: 3, Refused: 1}},
		},
		{
			name:  "a group larger than the burst is charged the burst",
			burst: 2, groups: map[int]int{1: 5},
			calls: []call{
				{group: 1, endpoint: a}, {group: 1, endpoint: a},
				{group: 1, endpoint: a, wantAfter: 100 * time.Millisecond},
			},
			wantStats: map[string]Stats{a: {Sent: 2, Refused: 1}},
		},
		{
			name:  "a call to another endpoint takes its own token",
			burst: 2, groups: map[int]int{1: 2},
			calls: []call{
				{group: 1, endpoint: a}, {group: 1, endpoint: b}, {group: 1, endpoint: a},
			},
			wantStats: map[string]Stats{a: {Sent: 2}, b: {Sent: 1}},
		},
		{
			name:  "groups of one are single calls",
			burst: 1, groups: map[int]int{1: 1},
			calls: []call{
				{group: 1, endpoint: a}, {group: 1, endpoint: a, wantAfter: 100 * time.Millisecond},
			},
			wantStats: map[string]Stats{a: {Sent: 1, Refused: 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			// Time stands still: the bucket never refills.
			l, err := NewLimiters(LimiterOptions{QPS: 10, Burst: tt.burst, Clock: clocktesting.NewFakePassiveClock(epoch)})
			g.Expect(err).NotTo(HaveOccurred())
			ctxs := map[int]context.Context{0: context.Background()}
			for id, n := range tt.groups {
				ctxs[id] = WithCallGroup(context.Background(), n)
			}
			for range tt.pre {
				g.Expect(l.Take(a)).To(Succeed())
			}
			for i, c := range tt.calls {
				err := l.take(ctxs[c.group], c.endpoint)
				if c.wantAfter == 0 {
					g.Expect(err).NotTo(HaveOccurred(), "call %d", i)
					continue
				}
				var limited *RateLimitedError
				g.Expect(errors.As(err, &limited)).To(BeTrue(), "call %d: %v", i, err)
				g.Expect(*limited).To(Equal(RateLimitedError{Endpoint: c.endpoint, RetryAfter: c.wantAfter}), "call %d", i)
			}
			for endpoint, want := range tt.wantStats {
				g.Expect(l.Stats(endpoint)).To(Equal(want), endpoint)
			}
		})
	}
}

// TestCallGroupsFinishUnderContention shows why passes of two calls take
// their tokens together. Many passes retry against a bucket that refills
// one token at a time: with a token per call, each new token goes to some
// pass's first call and its second call is refused, so no pass finishes;
// with a group, a pass goes only when both tokens are there, and passes
// finish at half the bucket's rate.
func TestCallGroupsFinishUnderContention(t *testing.T) {
	finished := func(grouped bool) int {
		const endpoint, contenders = "http://127.0.0.1:1", 50
		clock := clocktesting.NewFakePassiveClock(epoch)
		l, err := NewLimiters(LimiterOptions{QPS: 10, Burst: 2, Clock: clock})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		done := map[int]bool{}
		// Every 10ms for 2s, every pass not yet done tries both its calls.
		for step := 0; step <= 200; step++ {
			for c := range contenders {
				if done[c] {
					continue
				}
				ctx := context.Background()
				if grouped {
					ctx = WithCallGroup(ctx, 2)
				}
				// A pass is its two calls, one after the other.
				first := l.take(ctx, endpoint)
				if first == nil && l.take(ctx, endpoint) == nil {
					done[c] = true
				}
			}
			clock.SetTime(clock.Now().Add(10 * time.Millisecond))
		}
		return len(done)
	}
	g := NewWithT(t)
	// The full bucket's two tokens, then one pass every 200ms.
	g.Expect(finished(true)).To(BeNumerically(">=", 10))
	// Only the first pass, on the full bucket, ever finishes.
	g.Expect(finished(false)).To(Equal(1))
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

// TestCallGroupThroughSDK shows that the SDK's calls honour WithCallGroup:
// a group that cannot have all its tokens sends nothing.
func TestCallGroupThroughSDK(t *testing.T) {
	g := NewWithT(t)
	ctx := callCtx(t)
	proxy := faultproxy.Start(t, server.URL)
	proxied, err := url.Parse(proxy.URL())
	g.Expect(err).NotTo(HaveOccurred())
	endpoint := EndpointKey(proxied)
	// Time stands still: 3 tokens, ever.
	l, err := NewLimiters(LimiterOptions{QPS: 1, Burst: 3, Clock: clocktesting.NewFakePassiveClock(epoch)})
	g.Expect(err).NotTo(HaveOccurred())
	c := newSQS(t, Connection{EndpointURL: proxy.URL(), Limiters: l})
	list := func(ctx context.Context) error {
		_, err := c.ListQueues(ctx, &sqs.ListQueuesInput{})
		return err
	}

	pair := WithCallGroup(ctx, 2)
	g.Expect(list(pair)).To(Succeed())
	g.Expect(list(pair)).To(Succeed())
	// One token is left: another pair is refused before its first call.
	g.Expect(Classify(list(WithCallGroup(ctx, 2)))).To(Equal(Throttled))
	g.Expect(proxy.Total()).To(Equal(2))
	// It took nothing: a single call still gets the last token.
	g.Expect(list(ctx)).To(Succeed())
	g.Expect(proxy.Total()).To(Equal(3))
	g.Expect(l.Stats(endpoint)).To(Equal(Stats{Sent: 3, Refused: 1}))
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

// TestLimitersWait shows that a waiting Limiters holds a call until its
// bucket has a token, never past the call's deadline, and gives up when the
// call's context ends.
func TestLimitersWait(t *testing.T) {
	const endpoint = "http://127.0.0.1:1"
	newWaiting := func(t *testing.T, qps float64) (*Limiters, *clocktesting.FakeClock) {
		clock := clocktesting.NewFakeClock(epoch)
		l, err := NewLimiters(LimiterOptions{QPS: qps, Burst: 1, Clock: clock, Wait: true})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(l.take(context.Background(), endpoint)).To(Succeed(), "the full bucket's token")
		return l, clock
	}

	t.Run("a call waits for the next token", func(t *testing.T) {
		g := NewWithT(t)
		l, clock := newWaiting(t, 10)
		done := make(chan error, 1)
		go func() { done <- l.take(callCtx(t), endpoint) }()
		g.Eventually(clock.HasWaiters).Should(BeTrue())
		g.Consistently(done).ShouldNot(Receive(), "no token yet")
		clock.Step(100 * time.Millisecond)
		g.Eventually(done).Should(Receive(BeNil()))
		g.Expect(l.Stats(endpoint)).To(Equal(Stats{Sent: 2, Refused: 1}))
	})

	t.Run("a deadline before the token fails at once", func(t *testing.T) {
		g := NewWithT(t)
		l, _ := newWaiting(t, 0.01) // a token every 100 s
		err := l.take(callCtx(t), endpoint)
		var limited *RateLimitedError
		g.Expect(errors.As(err, &limited)).To(BeTrue(), "%v", err)
		g.Expect(Classify(err)).To(Equal(Throttled))
	})

	t.Run("a cancelled call stops waiting", func(t *testing.T) {
		g := NewWithT(t)
		l, clock := newWaiting(t, 10)
		ctx, cancel := context.WithCancel(callCtx(t))
		done := make(chan error, 1)
		go func() { done <- l.take(ctx, endpoint) }()
		g.Eventually(clock.HasWaiters).Should(BeTrue())
		cancel()
		var err error
		g.Eventually(done).Should(Receive(&err))
		g.Expect(Classify(err)).To(Equal(Throttled))
		// It took nothing: the next token goes to the next call.
		clock.Step(100 * time.Millisecond)
		g.Expect(l.take(callCtx(t), endpoint)).To(Succeed())
	})

	t.Run("a Limiters without Wait still refuses at once", func(t *testing.T) {
		g := NewWithT(t)
		l, err := NewLimiters(LimiterOptions{QPS: 10, Burst: 1, Clock: clocktesting.NewFakeClock(epoch)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(l.take(callCtx(t), endpoint)).To(Succeed())
		g.Expect(Classify(l.take(callCtx(t), endpoint))).To(Equal(Throttled))
	})
}

// TestLimitersWaitThroughSDK: calls of a client on a waiting Limiters all
// go, one after the other, through a bucket that holds one token at a time.
func TestLimitersWaitThroughSDK(t *testing.T) {
	g := NewWithT(t)
	l, err := NewLimiters(LimiterOptions{QPS: 20, Burst: 1, Wait: true})
	g.Expect(err).NotTo(HaveOccurred())
	c := newSQS(t, Connection{EndpointURL: server.URL, Limiters: l})
	for range 4 {
		_, err := c.ListQueues(callCtx(t), &sqs.ListQueuesInput{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	u, err := url.Parse(server.URL)
	g.Expect(err).NotTo(HaveOccurred())
	stats := l.Stats(EndpointKey(u))
	g.Expect(stats.Sent).To(Equal(uint64(4)))
	g.Expect(stats.Refused).To(BeNumerically(">=", 1), "some calls found the bucket empty and waited")
}
