// Package podset benchmarks the PodSet controller (issue 4) against
// kube-controller-manager's ReplicaSet controller, with real parts only:
//
//   - one kube-apiserver and etcd for the whole run (internal/testenv), read
//     and written by every phase one after the other;
//   - kwok (hack/toolchain.sh kwok) as the kubelets of fake Nodes, which it
//     marks Ready, and whose pods it turns Running and Ready in one status
//     write (testdata/kwok.yaml);
//   - PodSet: the real `tend manager --controllers=podset`, built from this
//     tree and run as a child process, so that it has the real flags, cache
//     (labelled pods only, managedFields stripped) and a process of its own,
//     as kube-controller-manager has. B6 alone runs it in this process,
//     through internal/manager.New, to read its heap;
//   - ReplicaSet: kube-controller-manager from the toolchain with
//     --controllers=replicaset-controller, no leader election, no serving.
//
// Both controllers get the same budget through their own flags: client QPS
// and burst (--kube-api-qps, --kube-api-burst) and workers
// (--podset-workers, --concurrent-replicaset-syncs). Each phase starts its
// controller, waits until it has brought a one-pod set to Ready (so that no
// clock counts a process start or a cache's first sync), measures, stops
// it, and deletes the sets and pods. Only one controller runs at a time.
//
// Pods are bound by the template's nodeName, for both controllers and the
// raw client alike: no scheduler takes part, so what is timed is the
// controller, the apiserver and kwok, not a scheduler's throughput. No
// garbage collector runs either: the harness deletes a phase's sets in the
// background and then their pods itself.
//
// Writes are the apiserver's own counts (apiserver_request_total, by verb,
// resource and code) read before and after each phase, so every write is
// counted where it is served, conflicts included. The counter has no client
// label; within a phase each resource has one writer, so the resource tells
// them apart: pod creates, the set's status and Events are the controller's;
// pod status, Nodes and Leases are kwok's (or B3's churn); the sets' own
// creates are the harness's and are subtracted.
//
// The benchmarks, each printing its rows of the summary table (Markdown,
// also printed at the end of the run, with PodSet/ReplicaSet ratios), and
// reporting the same figures through b.ReportMetric:
//
//   - BenchmarkB1: 0 → 1000 pods in one set, and 100 sets × 100 pods:
//     seconds until the harness's pod watch sees every pod Ready, API writes
//     per pod, and each controller's CPU time. 1 × 1000 runs at
//     kube-controller-manager's default budget (QPS 20, burst 30, 5 workers)
//     and with no client limit; 100 × 100 with no client limit only, since
//     at QPS 20 it takes at least 500 s per controller (-b1.full adds it).
//     With no client limit, a raw client first creates pods from 128
//     goroutines (-raw.workers), as many as the shape has but at most 3000
//     (-raw.pods): the apiserver's create rate, against which both
//     controllers' create rates are given in percent. Each case takes three
//     samples (-b1.samples), each raw, PodSet, ReplicaSet in turn; a cell
//     is the median with the range, a ratio the median (with the range) of
//     each sample's own ratio, and a goal is judged on the median.
//     -b1.workers=N gives both controllers N workers instead of 5, to see
//     what concurrency bounds (it departs from the equal default budget).
//     -profile=DIR writes CPU profiles of the apiserver and of tend per
//     phase, and tend's allocations (-profile.seconds from the sets'
//     creation).
//   - BenchmarkB3: 20 sets × 50 pods at size, 5 workers, no client limit;
//     for 10 s, status writes at 100 a second flip random Running pods'
//     Ready condition and fail one pod in ten (phase Failed), which the
//     controller must replace. The harness then makes the flipped pods
//     Ready again and waits for every set to be back at size. Its pod watch
//     keeps the most live pods that any set had above its desired count,
//     over the whole phase.
//   - BenchmarkB4: 1000 PodSets of one pod, converged, left idle for 30 s
//     (-b4.idle): the controller's writes per minute, and its passes from
//     tend's own metrics.
//   - BenchmarkB6: heap per cached pod in Tend's manager (runtime.ReadMemStats
//     after full GCs; its cache keeps of a pod only the fields the podset
//     controller reads), from 1000 to 5000 pods, with 1000 unlabelled pods
//     beside them; and, for comparison, per pod in caches of every pod:
//     plain (managedFields kept), and stripped of managedFields.
//
// They never fail on time. They fail on real errors: a part that will not
// start, a controller that exits or never brings its pods Ready, an
// apiserver that cannot be read.
//
// The run takes about 17 minutes on 2 cores (B1 about 12 of them), more
// than go test's default timeout of 10: `make bench` gives it 30. Run one
// alone with, for example:
//
//	KUBEBUILDER_ASSETS=$(hack/toolchain.sh --envtest) \
//	  go test ./test/bench/podset -run '^$' -bench B1 -benchtime 1x -timeout 30m
//
// (`-bench 'B1/1x1000/qps20'` for one case), and change sizes after -args,
// for example -b1.scale=0.1 for a quick B1, -b4.idle=20s, -b6.large=10000;
// `go test ./test/bench/podset -args -h` lists them. The package's unit tests
// (parsing the apiserver's metrics) need none of the parts.
package podset
