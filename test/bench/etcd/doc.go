// Package etcd benchmarks the EtcdCluster controller (issue 6, B8) and the
// data path of etcd backups and restores (B9, below) on the local cluster
// (hack/cluster, docs/cluster.md): real etcd members in real pods on the
// node, with volumes of the default StorageClass, and Tend's manager
// deployed in-cluster from an image built from this work tree, as the e2e
// tests have it (test/e2e/framework). envtest cannot run them: pods never
// start there.
//
// BenchmarkB8 measures, each in seconds, on a cluster that it creates for
// the purpose (3 members, ephemeral: false, default storage,
// spec.memberReplacement.unhealthyFor 10s, everything else the defaults):
//
//   - create: from the create call to the first status with Available=True;
//     and, on the side, to the first with 3 healthy voters;
//   - scale 3 → 5: from the patch of spec.replicas to the first status
//     with 5 members, all healthy voters (no learner), and Available=True;
//   - replace a failed member: member <name>-1 loses its data. Its volume
//     claim is deleted first, without waiting (it stays Terminating while
//     its pod lives), then its pod. The figure runs to the first status in
//     which <name>-1 is back with an ID other than its old one, among 5
//     healthy voters, Available=True. It is split into three parts. Notice:
//     until the first status after the delete in which the member is not a
//     healthy voter with its old ID. Threshold: until the first sign that
//     Tend acted, which is a ReplacingMember or MemberRemoved Event, or a
//     status without the member or with another ID. A member that lost its
//     data is replaced without waiting for unhealthyFor, so that part is
//     the old pod's termination and the new claim's creation. Rest:
//     removal, re-add as a learner, a new pod on an empty volume, catch-up
//     and promotion.
//
// Each step starts once the previous one has settled: every member a
// healthy voter, Available, and Progressing=False for the current
// generation. The moments come from two watches, of the EtcdCluster and of
// its Events, stamped on receipt. So a state that lasted less than any poll
// interval still counts, and no poll interval is added to a figure. Each
// measurement logs its timeline: every status, Event and action, as
// seconds after the create. -b8.timeline=false turns that off.
//
// It runs two variants, one after the other, in one run:
//
//   - tend: the manager as deployed (config/local: member changes as soon as
//     the cluster allows);
//   - anchor: the same manager with --etcdcluster-member-change-interval=10s
//     added to the args of the tend-manager Deployment in tend-system. That
//     is the anchor design: the membership is looked at once per 10 s, on a
//     fixed requeue, with at most one change (or a wait) per look, as
//     etcd-io/etcd-operator does; passes in between change nothing.
//
// Before each variant the benchmark sets the manager's args. It waits for
// the rollout and for a new pod to hold the leader Lease. A manager that
// crashes with the args fails the run, with its log. After the anchor
// variant, and after a failure, it sets the deployed args back. Its changes
// have their own field manager, so the next hack/cluster/deploy.sh (which
// every e2e and benchmark run starts with) takes them back even after a
// crash. Each measurement has a namespace of its own. The namespace is
// deleted, and the benchmark waits until it is gone, so that the next
// measurement does not share the node with a teardown. A failed
// measurement leaves its artifacts, as the e2e tests do.
//
// The floor of every figure is etcd's election timeout: 1000 ms by default
// (heartbeat 100 ms), or what the members' StatefulSet sets. A membership
// change cannot take effect faster than a leader can be elected when one
// is lost. The table gives each figure as a multiple of it, and tend over
// anchor.
//
// Figures go to b.ReportMetric, per variant (create_s, create_all_s,
// scale_s, replace_s, replace_notice_s, replace_threshold_s,
// replace_rest_s, each the mean over the variant's samples). As a Markdown
// table, with both variants side by side, they go to the benchmark's log
// and to standard output. docs/benchmarks.md holds a run's.
//
// It never fails on time. It fails on real errors: no local cluster, or not
// root; no EtcdCluster CRD; a manager that crashes or never leads; no
// status from any controller within 2 minutes; a step not done within
// -b8.timeout (10m); a replaced member that rejoins with its old ID; a
// namespace that is never deleted.
//
// It needs the local cluster and root, like the e2e tests, and shares their
// build tag. So `make bench` (no tags) does not run it. Run it with:
//
//	go test -tags e2e ./test/bench/etcd -run '^$' -bench B8 -benchtime 1x -timeout 60m
//
// A cold machine first builds the node's images, hence the timeout.
// -benchtime 3x takes three samples per variant. -bench B8/tend runs one
// variant; the table then leaves the other column empty. After -args:
// -b8.anchor-interval, -b8.unhealthy-for, -b8.timeout, -b8.timeline.
//
// Do not run it while the e2e tests run: it restarts the manager they use,
// twice. The package's unit tests (status predicates, the timeline's split,
// the manager's args, the table) need no cluster. They run with and without
// the tag.
//
// # B9: backup, verification and restore
//
// BenchmarkB9 (b9_*.go) measures Tend's data path for backups (issue 6,
// B9) on the same rig, in one run, at each size of -b9.sizes (100MB and
// 1GB of values by default; one sub-benchmark each). In one namespace it
// makes a source EtcdCluster of one member (storage 4Gi, quotaBackendBytes
// 3Gi, deletionPolicy Delete) and a bucket in moto, and fills the member
// from this machine up to each size, with values of 32 KiB that are half
// random bytes and half text like Kubernetes' JSON objects (so that
// compression has something to do, but not everything). Nothing writes to
// it while a size is measured. A first, untimed etcdctl snapshot reads the
// database into the page cache (and gives the snapshot's size). Then
// -b9.samples rounds (3) each run every variant once, in an order that
// rotates from round to round, so that drift and caches hit all of them
// alike; each sample starts after a sync(2) of the node, so that none pays
// for the writeback of the one before:
//
//   - anchor: a pod of the etcd image runs etcdctl snapshot save from the
//     member (its client certificate, its endpoint from the connection
//     ConfigMap) to a file on an emptyDir, then etcdutl snapshot status,
//     for the snapshot's size. The time is etcdctl's own "took", from the
//     snapshot request through the file's fsync.
//   - tend backup --compression=None|Gzip|Zstd to moto's S3, as the
//     contract's backup step: stream, compress, SHA-256, multipart upload,
//     then read back and check. The time is its Result's durationSeconds
//     (the agent's own work, not the pod's start); the stream alone comes
//     from its log line "Stored the snapshot".
//   - two variants that say where a shortfall comes from: tend backup
//     --compression=None to a file on an emptyDir, as etcdctl writes (the
//     agent without S3); and moto's own ceiling, a multipart upload from
//     this machine of as many random bytes, with the agent's part size and
//     concurrency, and its download.
//
// MB/s is the snapshot's uncompressed size (10^6 bytes) over that time.
// The table gives each variant's least, median and greatest, and its
// median over etcdctl's, against the goal of 0.90.
//
// The None backup's pod also holds the contract's verify steps (tend
// fetch, etcdutl snapshot restore, a throwaway etcd as a native sidecar,
// tend verify), as an EtcdBackup with verify on would run them. The
// verification time runs from the backup step's Result line to the verify
// step's, by the kubelet's stamps of the two logs; beside it are the
// agent's own Verification.durationSeconds (whole seconds) and the parts:
// fetch and verify (their Results' durationSeconds) and etcdutl (from its
// "restoring snapshot" to its "restored snapshot" line, by the kubelet's
// stamps, as etcdutl stamps whole seconds).
//
// With -b9.restore (on), -b9.samples rounds then alternate, from the last
// None backup:
//
//   - anchor: a pod fetches the file (not timed), then runs etcdutl
//     snapshot restore for each of the -b9.restore-members (3) members'
//     data at once, with the flags of Tend's restore Jobs (bump-revision,
//     mark-compacted): the work a restore cannot skip on this one node.
//     The time runs from the first "restoring snapshot" line to the last
//     "restored snapshot" line.
//   - Tend: a new EtcdCluster of 3 members with
//     spec.bootstrap.restore.source naming the object and its SHA-256.
//     The time runs from the create call to the first status with
//     Available=True, as a watch received it; beside it, the create to
//     Restored=True, each restore Job's fetch, etcdutl and install, and
//     Restored to Available. The cluster is then deleted, and the
//     benchmark waits until its volumes are gone.
//
// B9 never fails on time. It fails on real errors: a pod that fails, a
// verification that does not match, a restore that fails, a step not done
// within -b9.timeout (10m). It prints its tables to standard output and
// reports each median as a b.ReportMetric unit (etcdctl_MB/s,
// tend_none_MB/s, ..., tend_file_MB/s, moto_put_MB/s, verify_s, etcdutl_s,
// restore_s) with the ratios to the anchor (tend_none_ratio, ...,
// restore_ratio). Its samples are taken once per
// run: -benchtime does not change their number; -b9.samples does. Run it
// alone with:
//
//	go test -tags e2e ./test/bench/etcd -run '^$' -bench B9 -benchtime 1x -timeout 60m
//
// After -args: -b9.sizes, -b9.samples, -b9.restore, -b9.restore-members,
// -b9.timeout. Its pure parts (distributions, ratios, the tables, the log
// timings) are tested without the tag.
//
// # B10: an upgrade under a writer
//
// BenchmarkB10 (b10_*.go) measures a 3-member upgrade from the previous
// etcd minor version to the current one (hack/cluster/settings.sh:
// ETCD_UPGRADE_FROM_VERSION → ETCD_VERSION, v3.5.35 → v3.6.16) under a
// steady writer (issue 6, B10), in one run, for two variants:
//
//   - tend: an EtcdCluster of 3 members (deletionPolicy Delete, the rest
//     the defaults) whose spec.version is patched. Tend takes its verified
//     pre-upgrade EtcdBackup, then restarts the members one at a time,
//     followers first, the leader last after one MoveLeader, then runs its
//     check Job and clears status.update;
//   - anchor: the design that etcd-io/etcd-operator and etcd-druid roll
//     with, made by the benchmark itself with no Tend involved: a
//     StatefulSet of 3 members with updateStrategy RollingUpdate (pods
//     started in parallel, as a new etcd cluster needs) and a headless
//     Service with publishNotReadyAddresses, whose template's image is
//     moved to the new version. The StatefulSet controller rolls it,
//     highest ordinal first, each pod once the one before is Ready, with
//     no regard for the leader. Its members run etcd as Tend's do
//     (internal/controller/etcdcluster/builders.go, copied setting by
//     setting): the same environment, etcd's default heartbeat and election
//     timeout, TLS with client and peer certificates (certificates the
//     benchmark issues; -b10.anchor-tls=false for plain http), the
//     readiness probe on /readyz of the metrics port, the grace period,
//     security contexts and a 1Gi volume of the default StorageClass.
//
// Each sample has a namespace and a cluster of its own, deleted (and
// waited for) afterwards; -b10.samples rounds (3) each run every variant
// once, in an order that rotates from round to round. Once the cluster is
// healthy, a writer on this machine puts a new key every
// -b10.write-interval (50ms), one call at a time, each with a
// -b10.write-timeout (2s) timeout; a call that fails is counted and the
// writer goes on with the next key. Its client, like kube-apiserver's,
// names every member's client URL (<member>.b10-peer.<ns>.svc.cluster.local,
// which the members' certificates name) and dials each at the IP of its
// live pod now, as an informer on the pods gives it (this machine cannot
// resolve cluster names, and routes pod IPs); gRPC waits at most a second
// between its tries to reach a member. A poll reads every member's status
// (raft term, leader, version) every 500ms for the timeline. Per sample:
//
//   - roll, s: from the first restart (the first member pod seen going,
//     by the informer's receipt; for tend, also its first MemberRestarted
//     Event, whichever came first) to the first moment every member's pod
//     runs the new image and is Ready; then every member must answer on
//     the new version with one leader;
//   - elections: the highest raft term any member reported after the roll
//     less the highest reported before the first restart. Every election,
//     and every MoveLeader (as etcd's leader transfer on a graceful stop),
//     adds one;
//   - longest write gap, ms: the longest time between two consecutive
//     acknowledged writes during the roll (from the last before the first
//     restart to the first after the end);
//   - failed writes: calls that returned an error, over the writer's whole
//     run (for tend, its backup and check Job too); lost writes:
//     acknowledged writes that a linearizable read of every key does not
//     find with their value at the end (must be 0: the benchmark fails
//     otherwise); acked writes;
//   - member restart, s: each member's old pod going → its new pod Ready,
//     the sample's median;
//   - for tend, backup wait, s: the spec's patch → the first restart (the
//     pre-upgrade EtcdBackup, excluded from the roll), and → UpdateComplete,
//     s: the first restart → status.update cleared with currentVersion the
//     new version (after the check Job).
//
// The table (Markdown, to standard output and the benchmark's log) has a
// row per sample and each variant's least, median and greatest, with the
// issue's goals in its header and each sample's verdict: one election; a
// longest write gap no longer than the members' election timeout (1000 ms
// by default) plus one restart, the anchor's median member restart as
// measured in the same run (tend's when the anchor did not run); no lost
// writes. b.ReportMetric gets each variant's medians (tend_roll_s,
// tend_backup_s, tend_complete_s, tend_elections, tend_gap_ms,
// tend_failed_writes, tend_lost_writes, and anchor_...). On standard error
// go each sample's timeline (pods, terms and leaders, runs of failed
// writes, and tend's statuses and Events, as seconds after the patch)
// and, when the longest gap passed twice the election timeout, what the
// members that run at the end logged about raft and their peers around
// it.
//
// B10 never fails on time. It fails on real errors: a member that crashes,
// a roll not done within -b10.timeout (10m), Tend's Degraded reasons
// UpgradeBlocked, UpdateStalled or UpdateCheckFailed, members that do not
// agree on a leader on the new version, lost writes. Its samples are taken
// once per run: -benchtime does not change their number; -b10.samples
// does. Run it alone with:
//
//	go test -tags e2e ./test/bench/etcd -run '^$' -bench B10 -benchtime 1x -timeout 60m
//
// After -args: -b10.samples, -b10.variants (tend,anchor; one of them to
// run it alone), -b10.timeout, -b10.write-interval, -b10.write-timeout,
// -b10.anchor-tls, -b10.timeline. Its pure parts (the gap, the terms, the
// pods' moments, the anchor's objects and certificates, the table) are
// tested without the tag.
//
// # B11: disaster recovery
//
// BenchmarkB11 measures, on the same rig, how long an EtcdCluster of 3
// members takes to come back, in one run, with -b11.samples (3) samples
// of each figure. In one namespace it makes a cluster b11 (3 members,
// deletionPolicy Delete, spec.quorumLoss Auto after -b11.after, 10s, the
// rest the defaults), writes -b11.keys (1000) keys of 1 KiB from this
// machine, and takes one EtcdBackup of it to a volume claim, Complete and
// Verified. Then -b11.samples rounds each run every variant once on that
// cluster, in an order that rotates from round to round; each starts once
// the cluster has settled (3 healthy voters, Available, Progressing=False,
// no recovery running) and after a sync(2) of the node:
//
//   - (i) quorum loss: two members (the leader among them) lose their
//     volume claims (deleted without waiting) and then their pods. From the
//     first delete call to the first status, as the watch received it,
//     with Available=False; with a new status.recovery (Tend acted, after
//     -b11.after); with Available=True again (the survivor alone, made a
//     one-member cluster); with that recovery Complete; and with 3 healthy
//     voters, Available (the lost members added back as learners and
//     promoted): the figure.
//   - (ii) in-place restore: an EtcdRestore of the cluster from the
//     backup, confirmOverwrite true. From its create to the first state of
//     the EtcdRestore with Complete=True, and to the first status of the
//     cluster with that restore's status.recovery Complete and 3 healthy
//     voters, Available.
//   - (iii) the anchor, what one does without an in-place restore: delete
//     the EtcdCluster (deletionPolicy Delete), wait until it and its volume
//     claims are gone (polled every 200 ms), and create it anew with
//     spec.bootstrap.restore.backupRef naming the same backup. From the
//     delete to the first status of the new cluster with 3 healthy
//     voters, Available.
//
// Each variant leaves a cluster of 3 members that the next one starts
// from; after (i) and (iii) the benchmark waits, untimed, until the
// volumes of the deleted claims are gone. The table (Markdown, to standard
// output and the benchmark's log) gives each figure's least, median and
// greatest, and the ratio (ii)/(iii) of the medians; b.ReportMetric gets
// the medians (quorum_loss_s, quorum_loss_available_s,
// restore_complete_s, restore_s, anchor_s) and the ratios
// (restore_complete_ratio, restore_ratio). Each sample logs its timeline
// (statuses, Events and the benchmark's actions; -b8.timeline).
//
// B11 never fails on time. It fails on real errors: a step not done
// within -b11.timeout (10m), a recovery or restore that fails, a quorum
// loss recovered from a backup rather than the survivor. Its samples are
// taken once per run: -benchtime does not change their number; -b11.samples
// does. Run it alone with:
//
//	go test -tags e2e ./test/bench/etcd -run '^$' -bench B11 -benchtime 1x -timeout 60m
//
// After -args: -b11.samples, -b11.after, -b11.keys, -b11.timeout. Its
// table is tested without the tag.
//
// # B12: storage maintenance
//
// BenchmarkB12 (b12_test.go, where its comment says what each figure
// runs from and to) measures a defragmentation of a 3-member cluster by
// Tend against the anchor, etcdctl defrag --cluster (each member in turn
// from this machine), under a steady writer: elections, the longest gap
// between acknowledged writes, the total time and the sizes; and the time
// from a write refused with NOSPACE to one accepted again. Every sample is
// a new cluster, -b12.samples (3) rounds in an order that rotates. Run it
// alone with:
//
//	go test -tags e2e ./test/bench/etcd -run '^$' -bench B12 -benchtime 1x -timeout 60m
//
// After -args: -b12.samples, -b12.size (256 MiB written, half of it
// history), -b12.quota, -b12.timeout. Its table and goals are tested
// without the tag.
//
// # B13: restore to a point
//
// BenchmarkB13Restore (b13_test.go) measures the controller's restore to a
// point: a 1-member source cluster archived to moto takes -b13.revisions
// (100,000) writes after its archive's base and is deleted; then, in
// -b13.samples (3) rounds, a new 3-member cluster starts from the base
// alone and one from the base with the archive replayed to the last
// write (bootstrap.restore's archive and target), from the create to
// Restored and to Available. The archive's own figures (RPO, cost, one
// member's replay rate) are BenchmarkB13Archive's, in internal/agent. Run
// it alone with:
//
//	go test -tags e2e ./test/bench/etcd -run '^$' -bench B13 -benchtime 1x -timeout 90m
//
// After -args: -b13.samples, -b13.revisions, -b13.timeout. Its table is
// tested without the tag.
//
// # F1: a fleet of EtcdClusters
//
// BenchmarkF1 (f1_test.go, f1_figures.go) measures what one manager costs
// per EtcdCluster as the fleet grows. For each size of -f1.sizes (1, 10
// and 30), in a namespace of its own, it creates that many clusters at
// once (alternately 1 and 3 members, requests of 10m CPU and 64Mi, the
// rest the defaults), waits until each is Available (listing them every
// second: the times' resolution) and settled, waits -f1.settle more, and
// leaves them idle for -f1.idle (10m) in -f1.windows (3) windows: the
// samples of each idle figure. It then changes each cluster's memory
// request, which rolls its members, and times the fleet until every
// cluster has settled again; then it deletes the namespace. Per size:
//
//   - the manager's requests by verb and resource, from the local
//     apiserver's audit log (hack/cluster/config/audit-policy.yaml records
//     the manager's ServiceAccount's requests, without bodies: a watch when
//     it starts, any other request when it ends). The apiserver's own
//     metrics cannot tell the manager's requests from the kubelet's or
//     kube-controller-manager's. The leader election's Lease is counted on
//     its own: it is the manager's cost, not the fleet's;
//   - the members' gRPC requests (grpc_server_started_total, by method,
//     from each member's metrics port), per member;
//   - the manager's CPU seconds, heap in use and etcdcluster reconciles,
//     from its metrics endpoint (a ServiceAccount bound to
//     tend-metrics-reader reads it).
//
// The table has a column per size and the least-squares slope of each
// figure's medians over the fleet size: what one more cluster adds. A
// flat per-cluster cost has a slope within the spread of its windows. F1
// never fails on time; it fails on real errors: a fleet that is not
// Available or settled within -f1.timeout (20m), a member or the manager
// that restarts during an idle window, an apiserver without an audit log
// (one started before the policy existed: make cluster-down cluster-up).
// It takes about 45 minutes at the default sizes. Run it alone with:
//
//	go test -tags e2e ./test/bench/etcd -run '^$' -bench F1 -benchtime 1x -timeout 120m
//
// After -args: -f1.sizes, -f1.idle, -f1.windows, -f1.settle, -f1.timeout.
// Its table is tested without the tag.
//
// BenchmarkF1Checks (f1_checks_test.go, f1_checks_figures.go) measures
// F1's health-check goal in cost rather than in requests: what Tend's idle
// pass costs each member of a 3-member cluster, against a Prometheus
// scrape of the member, in the members' CPU (from /proc, less their idle
// rate measured just before) and the bytes on the wire. Its members are
// etcd processes on this machine (internal/testing/etcdserver, TLS as an
// EtcdCluster's), so it needs no cluster; -bench F1 runs it with F1. A
// third variant makes the pass's requests on connections kept open, to
// show what opening the TLS connections adds. After -args:
// -f1.check-samples (3), -f1.check-ops (300 per sample), -f1.check-idle,
// -f1.check-interval (1m, the controller's requeue of an idle cluster).
package etcd
