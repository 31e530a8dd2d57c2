package faultproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Mode is how the proxy answers the requests that it receives.
type Mode string

const (
	// PassThrough forwards every request to the target and its answer back.
	PassThrough Mode = "PassThrough"
	// Throttle answers every request with the RequestThrottled fault.
	Throttle Mode = "Throttle"
	// ServerError answers every request with the InternalFailure fault: a
	// 500 with a JSON body, as SQS sends it.
	ServerError Mode = "ServerError"
	// Unavailable answers every request with a bare 503 and a plain-text
	// body, as a load balancer in front of the service would: the SDK finds
	// no error code in it, only the status.
	Unavailable Mode = "Unavailable"
	// Hang never answers: it holds each request until the client gives up
	// (its context ends and it drops the connection) or the proxy closes,
	// then drops the connection without a response.
	Hang Mode = "Hang"
	// Fail answers every request with the fault that SetFault gave.
	Fail Mode = "Fail"
)

// Fault is an error answer in the shape of the AWS JSON 1.0 protocol that SQS
// speaks, which the SDK decodes as follows (smithy-go's awsjson protocol):
// the code is the X-Amzn-ErrorType header if present, else the body's
// "__type" with any "namespace#" prefix cut; a code that names a modelled SQS
// error (such as RequestThrottled) gives its typed error (*types.RequestThrottled),
// any other a *smithy.GenericAPIError; and because SQS is marked
// awsQueryCompatible, the code part of the x-amzn-query-error header
// ("code;Sender" or "code;Receiver") becomes the error's ErrorCode and the
// second part its fault. The proxy sends no X-Amzn-ErrorType, so the body is
// what the SDK reads; moto sends both.
type Fault struct {
	// Status is the HTTP status, 400 for a client fault.
	Status int
	// Type is the body's "__type", such as "com.amazonaws.sqs#RequestThrottled".
	Type string
	// QueryError is the x-amzn-query-error header; empty for none.
	QueryError string
	// Message is the body's "message".
	Message string
	// RetryAfter is the Retry-After header; empty for none.
	RetryAfter string
}

// The faults that SQS sends, as the proxy sends them.
var (
	// RequestThrottled is SQS's own throttling error, typed by the SDK as
	// *types.RequestThrottled.
	RequestThrottled = Fault{
		Status: http.StatusBadRequest, Type: "com.amazonaws.sqs#RequestThrottled",
		QueryError: "RequestThrottled;Sender", Message: "Request is throttled.",
	}
	// ThrottlingException is the generic AWS throttling error, which the SDK
	// returns as a *smithy.GenericAPIError.
	ThrottlingException = Fault{
		Status: http.StatusBadRequest, Type: "ThrottlingException",
		QueryError: "ThrottlingException;Sender", Message: "Rate exceeded",
	}
	// QueueDeletedRecently is SQS's refusal to create a queue within 60
	// seconds of deleting one of the same name, which moto does not enforce.
	QueueDeletedRecently = Fault{
		Status: http.StatusBadRequest, Type: "com.amazonaws.sqs#QueueDeletedRecently",
		QueryError: "AWS.SimpleQueueService.QueueDeletedRecently;Sender",
		Message:    "You must wait 60 seconds after deleting a queue before you can create another queue with the same name.",
	}
	// InternalFailure is SQS's 500.
	InternalFailure = Fault{
		Status: http.StatusInternalServerError, Type: "InternalFailure",
		QueryError: "InternalFailure;Receiver", Message: "We encountered an internal error. Please try again.",
	}
)

// Proxy is a reverse proxy on 127.0.0.1 in front of one target. It is safe
// for concurrent use.
type Proxy struct {
	url     string
	server  *http.Server
	forward *httputil.ReverseProxy
	closing chan struct{}
	once    sync.Once

	mu         sync.Mutex
	mode       Mode
	fault      Fault
	counts     map[Mode]int
	operations map[string]int
}

// New starts a proxy in PassThrough mode in front of target, such as a
// moto_server URL. Close stops it.
func New(target string) (*Proxy, error) {
	to, err := url.Parse(target)
	if err != nil || to.Host == "" {
		return nil, fmt.Errorf("proxy target %q is not a URL with a host", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening on 127.0.0.1: %w", err)
	}
	p := &Proxy{
		url:        "http://" + ln.Addr().String(),
		closing:    make(chan struct{}),
		mode:       PassThrough,
		fault:      RequestThrottled,
		counts:     map[Mode]int{},
		operations: map[string]int{},
	}
	p.forward = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(to)
			// Keep the Host that the client signed, so that the SigV4
			// signature still holds at the target, and so that moto writes
			// queue URLs that point at the proxy.
			r.Out.Host = r.In.Host
		},
		Transport: &http.Transport{Proxy: nil},
	}
	p.server = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.server.Serve(ln) }()
	return p, nil
}

// Start starts a proxy in front of target for the calling test and closes it
// when the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatalf("faultproxy: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("faultproxy: %v", err)
		}
	})
	return p
}

// URL is the proxy's address, such as "http://127.0.0.1:40123": the
// endpoint URL to give the SDK.
func (p *Proxy) URL() string { return p.url }

// SetMode switches how the proxy answers from the next request on. Requests
// already held by Hang stay held.
func (p *Proxy) SetMode(m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = m
}

// SetFault makes the proxy answer every request with f (mode Fail).
func (p *Proxy) SetFault(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.fault = Fail, f
}

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Count returns how many requests arrived while the proxy was in mode m.
func (p *Proxy) Count(m Mode) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[m]
}

// Total returns how many requests arrived, in every mode.
func (p *Proxy) Total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.counts {
		n += c
	}
	return n
}

// CountOperation returns how many requests for an operation, such as
// "CreateQueue", arrived in every mode. The operation is read from the AWS
// JSON protocol's X-Amz-Target header ("AmazonSQS.CreateQueue").
func (p *Proxy) CountOperation(operation string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.operations[operation]
}

// ResetCounts sets every count to zero.
func (p *Proxy) ResetCounts() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts = map[Mode]int{}
	p.operations = map[string]int{}
}

// Close stops the proxy: it releases the requests that Hang holds, without an
// answer, and closes every connection.
func (p *Proxy) Close() error {
	var err error
	p.once.Do(func() {
		close(p.closing)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err = p.server.Shutdown(ctx); err != nil {
			err = errors.Join(err, p.server.Close())
		}
	})
	return err
}

// ServeHTTP counts the request and answers it as the mode says.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	operation := target[strings.LastIndex(target, ".")+1:]
	p.mu.Lock()
	mode, fault := p.mode, p.fault
	p.counts[mode]++
	if operation != "" {
		p.operations[operation]++
	}
	p.mu.Unlock()

	switch mode {
	case PassThrough:
		p.forward.ServeHTTP(w, r)
	case Throttle:
		writeFault(w, RequestThrottled)
	case ServerError:
		writeFault(w, InternalFailure)
	case Unavailable:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "Service Unavailable\n")
	case Hang:
		select {
		case <-r.Context().Done():
		case <-p.closing:
		}
		// Drop the connection without a response.
		panic(http.ErrAbortHandler)
	case Fail:
		writeFault(w, fault)
	default:
		http.Error(w, fmt.Sprintf("faultproxy: unknown mode %q", mode), http.StatusInternalServerError)
	}
}

func writeFault(w http.ResponseWriter, f Fault) {
	body, _ := json.Marshal(map[string]string{"__type": f.Type, "message": f.Message})
	h := w.Header()
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("X-Amzn-RequestId", "faultproxy")
	if f.QueryError != "" {
		h.Set("X-Amzn-Query-Error", f.QueryError)
	}
	if f.RetryAfter != "" {
		h.Set("Retry-After", f.RetryAfter)
	}
	w.WriteHeader(f.Status)
	_, _ = w.Write(body)
}
