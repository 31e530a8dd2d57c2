package queue

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
	queuecontroller "github.com/tend-dev/tend/internal/controller/queue"
	"github.com/tend-dev/tend/internal/scheme"
	"github.com/tend-dev/tend/internal/testenv"
	"github.com/tend-dev/tend/internal/testing/faultproxy"
	"github.com/tend-dev/tend/internal/testing/moto"
)

// rig is the real parts of a run: a kube-apiserver and etcd, a moto_server,
// the counting proxy that the controller reaches moto through, and a client
// that reaches moto directly, for what happens "out of band".
type rig struct {
	kube  *testenv.Env
	moto  *moto.Server
	proxy *faultproxy.Proxy
	// endpoint is the proxy's key in the limiter's buckets.
	endpoint string
	// direct talks to moto without the proxy, so that the deletes and the
	// probes of the repair measure are not counted as the controller's calls.
	direct *sqs.Client
	// ctx carries the deadline that every SQS call must have.
	ctx context.Context
}

// newRig starts the real parts for the benchmark and stops them when it ends.
// They start here rather than in TestMain, so that "go test ./..." runs the
// package's unit tests without them.
func newRig(b *testing.B) *rig {
	b.Helper()
	globalLogger.Do(func() { ctrl.SetLogger(zap.New(zap.WriteTo(stderrWarnings{}), zap.ConsoleEncoder())) })
	kube := testenv.New()
	if err := kube.Start(); err != nil {
		b.Fatalf("starting the apiserver: %v", err)
	}
	b.Cleanup(func() {
		if err := kube.Stop(); err != nil {
			b.Errorf("%v", err)
		}
	})
	server := moto.Start(b)
	proxy := faultproxy.Start(b, server.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	b.Cleanup(cancel)
	u, err := url.Parse(proxy.URL())
	if err != nil {
		b.Fatal(err)
	}
	r := &rig{kube: kube, moto: server, proxy: proxy, endpoint: tendaws.EndpointKey(u), ctx: ctx}
	r.direct = r.sqsClient(b, server.URL, unlimited(b))
	return r
}

// unlimited returns a bucket that never refuses: 10⁶ calls a second, and as
// many at once. NewLimiters takes no infinity, and needs none.
func unlimited(b *testing.B) *tendaws.Limiters {
	l, err := tendaws.NewLimiters(tendaws.LimiterOptions{QPS: 1e6, Burst: 1e6})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// connection reaches moto at endpoint as the fixed test identity.
func connection(endpoint string, limiters *tendaws.Limiters) tendaws.Connection {
	return tendaws.Connection{
		Region: moto.Region, EndpointURL: endpoint, Limiters: limiters,
		Credentials: &tendaws.StaticCredentials{AccessKeyID: moto.AccessKeyID, SecretAccessKey: moto.SecretAccessKey},
	}
}

func (r *rig) sqsClient(b *testing.B, endpoint string, limiters *tendaws.Limiters) *sqs.Client {
	cfg, err := tendaws.LoadConfig(r.ctx, connection(endpoint, limiters))
	if err != nil {
		b.Fatalf("SQS client for %s: %v", endpoint, err)
	}
	return sqs.NewFromConfig(cfg)
}

// variant is one way of running the real Reconciler.
type variant struct {
	name string
	// qps and burst size the SQS bucket.
	qps   float64
	burst int
	// jitter spreads the poll interval; nil keeps the Reconciler's ±10%.
	jitter func(time.Duration) time.Duration
	// workers reconcile at once; zero means the manager's default.
	workers int
}

// startManager runs the real Queue Reconciler, configured as v says, in a
// controller-runtime manager of its own that watches ns alone and sends
// every SQS call through the proxy and limiters. stop ends the manager and
// waits until its workers have returned.
func (r *rig) startManager(b *testing.B, ns string, v variant, limiters *tendaws.Limiters) (stop func()) {
	b.Helper()
	logs := &testLog{b: b, prefix: v.name + ": "}
	logger := zap.New(zap.WriteTo(logs), zap.ConsoleEncoder())
	mgr, err := ctrl.NewManager(r.kube.Config, ctrl.Options{
		Scheme:                 scheme.Scheme,
		Logger:                 logger,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		// Each variant starts a manager with the same controller name.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		b.Fatalf("creating the %s manager: %v", v.name, err)
	}
	rec := &queuecontroller.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("tend-queue"),
		Connector: &queuecontroller.Connector{
			Reader:  mgr.GetClient(),
			Default: connection(r.proxy.URL(), limiters),
		},
		Jitter: v.jitter,
	}
	workers := v.workers
	if workers == 0 {
		workers = queuecontroller.DefaultOptions().Workers
	}
	if err := rec.SetupWithManager(mgr, workers); err != nil {
		b.Fatalf("setting up the %s controller: %v", v.name, err)
	}
	// The informers log through the context's logger; without one they
	// would use controller-runtime's global logger, which is never set here.
	ctx, cancel := context.WithCancel(ctrl.LoggerInto(context.Background(), logger))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			// Passes cut short by the stop log "context canceled": expected,
			// and nothing to show.
			logs.close()
			cancel()
			if err := <-done; err != nil {
				b.Errorf("the %s manager: %v", v.name, err)
			}
		})
	}
	b.Cleanup(stop)
	return stop
}

// testLog hands the manager's warnings and errors to the benchmark's logger,
// until close: a line logged after the benchmark ended would panic. Info
// lines (controllers starting and stopping) are dropped, so that what a
// failed run prints is what went wrong.
type testLog struct {
	b      *testing.B
	prefix string
	mu     sync.Mutex
	closed bool
}

func (l *testLog) Write(p []byte) (int, error) {
	if isInfo(p) {
		return len(p), nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.b.Log(l.prefix + strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// isInfo tells an info or debug line of zap's console encoder.
func isInfo(line []byte) bool {
	s := string(line)
	return strings.Contains(s, "\tINFO\t") || strings.Contains(s, "\tDEBUG\t")
}

// stderrWarnings writes the warnings and errors of controller-runtime's
// global logger to standard error. client-go's informers log through it
// when they stop; without it, controller-runtime prints a complaint with a
// stack trace instead.
type stderrWarnings struct{}

func (stderrWarnings) Write(p []byte) (int, error) {
	if !isInfo(p) {
		return os.Stderr.Write(p)
	}
	return len(p), nil
}

var globalLogger sync.Once

func (l *testLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
}

// newQueues returns n Queues in ns that poll every poll, with SQS names
// that start with ns (SQS names are global to moto's account).
func newQueues(ns string, n int, poll time.Duration) []*sqsv1alpha1.Queue {
	qs := make([]*sqsv1alpha1.Queue, n)
	for i := range qs {
		qs[i] = &sqsv1alpha1.Queue{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("q-%04d", i)},
			Spec: sqsv1alpha1.QueueSpec{
				QueueName:    fmt.Sprintf("%s-%04d", ns, i),
				PollInterval: &metav1.Duration{Duration: poll},
			},
		}
	}
	return qs
}

// createAll creates the Queues, a few at a time.
func (r *rig) createAll(qs []*sqsv1alpha1.Queue) error {
	return parallel(len(qs), 8, func(i int) error {
		return r.kube.Client.Create(r.ctx, qs[i])
	})
}

// parallel runs f for 0..n-1 on workers goroutines and returns the first
// error.
func parallel(n, workers int, f func(i int) error) error {
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					errs <- err
					for range next { // drain, so the feeder ends
					}
					return
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs
}

// readyCount returns how many Queues of ns are Ready for their current spec.
func (r *rig) readyCount(ns string) (int, error) {
	var list sqsv1alpha1.QueueList
	if err := r.kube.Client.List(r.ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	n := 0
	for _, q := range list.Items {
		if meta.IsStatusConditionTrue(q.Status.Conditions, sqsv1alpha1.ConditionReady) && q.Status.ObservedGeneration == q.Generation {
			n++
		}
	}
	return n, nil
}

// waitReady waits until all n Queues of ns are Ready, or fails the benchmark
// after limit: a Queue that never becomes Ready is a real error, not a slow
// figure.
func (r *rig) waitReady(b *testing.B, ns string, n int, limit time.Duration) time.Duration {
	b.Helper()
	start := time.Now()
	for {
		ready, err := r.readyCount(ns)
		if err != nil {
			b.Fatalf("listing Queues: %v", err)
		}
		if ready == n {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			b.Fatalf("only %d of %d Queues became Ready within %s", ready, n, limit)
		}
		time.Sleep(time.Second)
	}
}
