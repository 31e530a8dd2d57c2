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
//   - BenchmarkF2: 100,000 pods under one manager, 1000 PodSets × 100
//     (-f2.sets, -f2.pods), no client limit, 5 workers, three samples
//     (-f2.samples). It is not part of the 17 minutes below: on 2 cores
//     shared with other runs, a sample of 200 × 100 took 10 to 25
//     minutes, and three of 1000 × 100 did not fit in an hour (the raw
//     client alone had not brought its 100,000 pods Ready after 7
//     minutes). Each sample: the raw client creates as many pods as the
//     sets have (128 at a time) and the harness's watch times them to
//     Ready; then tend manager, started with
//     its pprof handlers, brings the PodSets to Ready (timed as B1 times
//     it; the goal is at most 1.1 × the raw client's time), and the
//     settled sets are left idle for -f2.idle (60 s), in which every write
//     but kwok's (pod status, Nodes, Leases: WriterOf) counts against the
//     goal of none. The manager runs with -f2.memory-limit (512Mi) in
//     MEMORY_LIMIT, as the Deployment's Downward API gives it, so with the
//     soft memory limit it would have in such a pod (the peak heap in use
//     while scaling is held to 512 MiB too). The manager's heap is then
//     read from its own /metrics
//     (go_memstats_heap_inuse_bytes, the goal: at most 512 MiB with every
//     pod cached), once as it is and once after a full GC that
//     /debug/pprof/heap?gc=1 forces, beside process_resident_memory_bytes
//     and the peak heap in use read each second while it scaled up. Then
//     the manager is stopped, one Ready pod in each of -f2.stale (100)
//     sets spread over the range is turned unready, so that those sets'
//     status is stale, and the manager is started again. From the new
//     process's start the harness reads its metrics every 200 ms: the
//     first pass is when controller_runtime_reconcile_total of the podset
//     controller is above 0; every set was looked at when that count has
//     reached the number of sets with the podset queue empty
//     (workqueue_depth) and no pass running
//     (controller_runtime_active_workers). That is exact, not a guess from
//     the count alone: controller-runtime starts a controller's workers
//     only once its source's handler has had every object of the first
//     list (the Kind source waits for its registration's HasSynced), so
//     every set's key is queued before the first pass. The restart's writes
//     (until the manager has been quiet for two seconds) are held to no
//     pod write and no more status writes than stale sets, and the sets'
//     resourceVersions, read before and after, to none moved but stale
//     ones: together, at most one status write per stale set. The time
//     goal is judged on the median of each sample's ratio, as B1's are;
//     the heap, the idle writes and the restart's writes on every sample. -profile=DIR also takes CPU profiles of the scale-up and of
//     the restart, and keeps the heap profile. A quick run:
//     -f2.sets=20 -f2.samples=1 -f2.idle=10s -f2.stale=5.
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
// (`-bench 'B1/1x1000/qps20'` for one case; F2 at full size with
// `-bench F2 -timeout 90m`), and change sizes after -args,
// for example -b1.scale=0.1 for a quick B1, -b4.idle=20s, -b6.large=10000;
// `go test ./test/bench/podset -args -h` lists them. The package's unit tests
// (parsing the apiserver's metrics) need none of the parts.
package podset
