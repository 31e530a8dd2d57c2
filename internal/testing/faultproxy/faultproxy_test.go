package faultproxy

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	. "github.com/onsi/gomega"

	tendaws "github.com/tend-dev/tend/internal/aws"
	"github.com/tend-dev/tend/internal/testing/moto"
)

// server is the moto_server behind this package's proxies.
var server = moto.New()

func TestMain(m *testing.M) { os.Exit(server.Run(m)) }

// client returns an SQS client through LoadConfig, as the controller makes
// one, that reaches the upstream through p.
func client(t *testing.T, p *Proxy) *sqs.Client {
	t.Helper()
	limiters, err := tendaws.NewLimiters(tendaws.LimiterOptions{QPS: 1000, Burst: 1000})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := tendaws.LoadConfig(ctx, tendaws.Connection{EndpointURL: p.URL(), Limiters: limiters})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return sqs.NewFromConfig(cfg)
}

// TestModesThroughSDK sends CreateQueue through the proxy in each mode and
// shows what the SDK makes of the answer and how tendaws.Classify files it.
func TestModesThroughSDK(t *testing.T) {
	tests := []struct {
		name      string
		set       func(*Proxy)
		timeout   time.Duration
		want      tendaws.Class
		wantAfter time.Duration // with a hint when non-zero
		check     func(g Gomega, err error)
	}{
		{
			name: "pass-through reaches moto",
			set:  func(p *Proxy) { p.SetMode(PassThrough) },
			want: tendaws.None,
		},
		{
			name: "throttle gives SQS's typed RequestThrottled",
			set:  func(p *Proxy) { p.SetMode(Throttle) },
			want: tendaws.Throttled,
			check: func(g Gomega, err error) {
				var typed *types.RequestThrottled
				g.Expect(errors.As(err, &typed)).To(BeTrue())
				g.Expect(typed.ErrorCode()).To(Equal("RequestThrottled"))
				g.Expect(typed.ErrorFault()).To(Equal(smithy.FaultClient))
			},
		},
		{
			name: "ThrottlingException gives a generic API error",
			set:  func(p *Proxy) { p.SetFault(ThrottlingException) },
			want: tendaws.Throttled,
			check: func(g Gomega, err error) {
				var generic *smithy.GenericAPIError
				g.Expect(errors.As(err, &generic)).To(BeTrue())
				g.Expect(generic.Code).To(Equal("ThrottlingException"))
				g.Expect(generic.Fault).To(Equal(smithy.FaultClient))
			},
		},
		{
			name: "a Retry-After header is a hint",
			set: func(p *Proxy) {
				f := ThrottlingException
				f.RetryAfter = "7"
				p.SetFault(f)
			},
			want:      tendaws.Throttled,
			wantAfter: 7 * time.Second,
		},
		{
			name:      "QueueDeletedRecently asks for 60 seconds",
			set:       func(p *Proxy) { p.SetFault(QueueDeletedRecently) },
			want:      tendaws.Throttled,
			wantAfter: tendaws.RecreateDelay,
			check: func(g Gomega, err error) {
				var typed *types.QueueDeletedRecently
				g.Expect(errors.As(err, &typed)).To(BeTrue())
				g.Expect(typed.ErrorCode()).To(Equal("AWS.SimpleQueueService.QueueDeletedRecently"))
			},
		},
		{
			name: "server error is a 500 with a code",
			set:  func(p *Proxy) { p.SetMode(ServerError) },
			want: tendaws.Transient,
			check: func(g Gomega, err error) {
				var generic *smithy.GenericAPIError
				g.Expect(errors.As(err, &generic)).To(BeTrue())
				g.Expect(generic.Code).To(Equal("InternalFailure"))
				g.Expect(generic.Fault).To(Equal(smithy.FaultServer))
			},
		},
		{
			name: "unavailable is a bare 503",
			set:  func(p *Proxy) { p.SetMode(Unavailable) },
			want: tendaws.Transient,
			check: func(g Gomega, err error) {
				var apiErr smithy.APIError
				g.Expect(errors.As(err, &apiErr)).To(BeFalse(), "a bare 503 carries no code")
				g.Expect(err.Error()).To(ContainSubstring("StatusCode: 503"))
			},
		},
		{
			name:    "hang ends with the caller's deadline",
			set:     func(p *Proxy) { p.SetMode(Hang) },
			timeout: 200 * time.Millisecond,
			want:    tendaws.Transient,
			check: func(g Gomega, err error) {
				g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue(), "error: %v", err)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := Start(t, server.URL)
			tt.set(p)
			mode := p.Mode()
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 30 * time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			name := "modes-" + strings.ToLower(string(mode))
			_, err := client(t, p).CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name})

			g.Expect(tendaws.Classify(err)).To(Equal(tt.want), "error: %v", err)
			after, ok := tendaws.RetryAfter(err)
			g.Expect(ok).To(Equal(tt.wantAfter != 0), "whether there is a hint")
			g.Expect(after).To(Equal(tt.wantAfter))
			if tt.check != nil {
				tt.check(g, err)
			}
			g.Expect(p.Count(mode)).To(Equal(1))
			g.Expect(p.Total()).To(Equal(1))
			g.Expect(p.CountOperation("CreateQueue")).To(Equal(1))

			// Only a request passed through creates the queue.
			observe, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p.SetMode(PassThrough)
			_, err = client(t, p).GetQueueUrl(observe, &sqs.GetQueueUrlInput{QueueName: &name})
			if mode == PassThrough {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(tendaws.Classify(err)).To(Equal(tendaws.NotFound))
			}
		})
	}
}

// TestPassThroughKeepsHost shows that moto sees the Host that the client
// signed, so the queue URLs it hands out point back at the proxy.
func TestPassThroughKeepsHost(t *testing.T) {
	g := NewWithT(t)
	p := Start(t, server.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := client(t, p).CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String("host")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*out.QueueUrl).To(Equal(p.URL() + "/" + moto.AccountID + "/host"))
}

// TestCounts shows the counts by mode and by operation, as a controller test
// reads them to tell a hot loop from a backoff.
func TestCounts(t *testing.T) {
	g := NewWithT(t)
	p := Start(t, server.URL)
	c := client(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list := func(n int) {
		for range n {
			_, _ = c.ListQueues(ctx, &sqs.ListQueuesInput{})
		}
	}

	list(2)
	p.SetMode(Throttle)
	list(3)
	p.SetMode(ServerError)
	list(1)
	_, _ = c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: awssdk.String("q")})

	g.Expect(p.Mode()).To(Equal(ServerError))
	g.Expect([]int{p.Count(PassThrough), p.Count(Throttle), p.Count(ServerError), p.Count(Hang)}).To(Equal([]int{2, 3, 2, 0}))
	g.Expect(p.Total()).To(Equal(7))
	g.Expect(p.CountOperation("ListQueues")).To(Equal(6))
	g.Expect(p.CountOperation("GetQueueUrl")).To(Equal(1))

	p.ResetCounts()
	g.Expect(p.Total()).To(Equal(0))
	g.Expect(p.CountOperation("ListQueues")).To(Equal(0))
}

// TestCloseReleasesHang shows that Close answers no held request and leaves
// none behind.
func TestCloseReleasesHang(t *testing.T) {
	g := NewWithT(t)
	p, err := New(server.URL)
	g.Expect(err).NotTo(HaveOccurred())
	p.SetMode(Hang)

	type result struct {
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		// No timeout: only Close can end this request.
		resp, err := http.Post(p.URL(), "application/x-amz-json-1.0", strings.NewReader("{}"))
		if err != nil {
			done <- result{err: err}
			return
		}
		resp.Body.Close()
		done <- result{status: resp.StatusCode}
	}()
	g.Eventually(func() int { return p.Count(Hang) }).Should(Equal(1))
	g.Consistently(done).ShouldNot(Receive())

	g.Expect(p.Close()).To(Succeed())
	var r result
	g.Eventually(done).Should(Receive(&r))
	g.Expect(r.err).To(HaveOccurred(), "a held request gets no answer, got status %d", r.status)
	g.Expect(p.Close()).To(Succeed(), "Close is idempotent")
}

func TestNewRejectsTarget(t *testing.T) {
	for _, target := range []string{"", "127.0.0.1:5000", "http://[::1"} {
		t.Run(target, func(t *testing.T) {
			_, err := New(target)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring("is not a URL with a host")))
		})
	}
}
