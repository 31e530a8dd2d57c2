// Package queue benchmarks the Queue operator (issue 5, Q1) with real parts
// only: a kube-apiserver and etcd (internal/testenv), a moto_server on
// 127.0.0.1 (internal/testing/moto), and the real Reconciler of
// internal/controller/queue in a controller-runtime manager in this process,
// reaching moto through the counting proxy of internal/testing/faultproxy.
//
// BenchmarkQ1 creates 1000 Queues polling every 30s (the CRD's floor, so
// that a few minutes span several polls), then runs the same Reconciler two
// ways over them, one after the other, each from a manager start:
//
//   - Tend: ±10% jitter and one token bucket for the endpoint, sized to the
//     steady demand (1000 × 2 calls / 30s) times 1.5, with twice that burst;
//   - naive: no jitter (every poll exactly 30s) and a bucket of 10⁶ QPS,
//     that is, no limit.
//
// For each it reports SQS calls per queue-hour at steady state and by
// operation (the goal: one observe per poll, nothing else), calls per second
// (mean, p99, peak) and the burst that Tend's bucket would need to let them
// through (the goal: never above the bucket), Kubernetes writes at steady
// state (the goal: none), and the time until a queue deleted out of band in
// moto exists again, p50 to max (the goal: within the poll interval + 10%).
// It also reports moto's own ceiling, and what the default settings (5m
// polls, 10 QPS, burst 20) imply. The figures go to b.ReportMetric and, as a
// Markdown table, to the benchmark's log; docs/benchmarks.md holds a run's.
//
// Both variants start from a manager start over the same Ready Queues,
// since a start is when every Queue is due at once. The steady window begins
// once a whole poll period has passed without the limiter refusing a call.
// The out-of-band deletes are spread over one poll period, since real ones
// come at any moment and not in step with the polls. Calls are counted where
// they reach moto (the proxy), sampled every 100ms; Kubernetes writes are
// counted by the apiserver itself (apiserver_request_total).
//
// It never fails on time. It fails on real errors: a Queue that never
// becomes Ready, a deleted queue that is not back after three polls, an
// apiserver or moto that cannot be read. It talks only to the servers that
// it starts on 127.0.0.1, and nothing imports it.
//
// Run it alone (it takes about 7 minutes on 2 cores, close to go test's
// default 10m timeout, hence the flag):
//
//	KUBEBUILDER_ASSETS=$(hack/toolchain.sh --envtest) \
//	  go test ./test/bench/queue -run '^$' -bench Q1 -benchtime 1x -timeout 30m
//
// and change its size after -args: -q1.queues, -q1.periods (poll periods
// measured per variant), -q1.victims (queues deleted out of band). The
// package's unit tests (the statistics) need none of the real parts.
package queue
