package etcd

import (
	"math"
	"strings"
	"testing"
	"time"
)

const f1TestUser = "system:serviceaccount:tend-system:tend-manager"

func TestReadAuditCountsEachRequestOnce(t *testing.T) {
	log := strings.Join([]string{
		// A list: received (not recorded by the policy), then complete.
		`{"stage":"ResponseComplete","verb":"list","stageTimestamp":"2026-11-27T21:00:01Z","user":{"username":"` + f1TestUser + `"},"objectRef":{"resource":"pods"}}`,
		// A watch: counted when it starts, not again when it ends.
		`{"stage":"ResponseStarted","verb":"watch","stageTimestamp":"2026-11-27T21:00:02Z","user":{"username":"` + f1TestUser + `"},"objectRef":{"resource":"etcdclusters"}}`,
		`{"stage":"ResponseComplete","verb":"watch","stageTimestamp":"2026-11-27T21:05:02Z","user":{"username":"` + f1TestUser + `"},"objectRef":{"resource":"etcdclusters"}}`,
		// A status patch in the fleet's namespace, one in another
		// namespace, and someone else's.
		`{"stage":"ResponseComplete","verb":"patch","stageTimestamp":"2026-11-27T21:00:03Z","user":{"username":"` + f1TestUser + `"},"objectRef":{"resource":"etcdclusters","subresource":"status","namespace":"fleet"}}`,
		`{"stage":"ResponseComplete","verb":"patch","stageTimestamp":"2026-11-27T21:00:03Z","user":{"username":"` + f1TestUser + `"},"objectRef":{"resource":"etcdclusters","subresource":"status","namespace":"other"}}`,
		// The review of a scrape's token.
		`{"stage":"ResponseComplete","verb":"create","stageTimestamp":"2026-11-27T21:00:03Z","user":{"username":"` + f1TestUser + `"},"objectRef":{"resource":"tokenreviews"}}`,
		`{"stage":"ResponseComplete","verb":"patch","stageTimestamp":"2026-11-27T21:00:03Z","user":{"username":"system:node:tend-node"},"objectRef":{"resource":"pods","subresource":"status"}}`,
		// The leader election's renewal, and a Lease the manager writes
		// for another reason.
		`{"stage":"ResponseComplete","verb":"update","stageTimestamp":"2026-11-27T21:00:04Z","user":{"username":"` + f1TestUser + `"},"userAgent":"tend/v0.0.0 (linux/amd64) kubernetes/$Format/leader-election","objectRef":{"resource":"leases"}}`,
		`{"stage":"ResponseComplete","verb":"update","stageTimestamp":"2026-11-27T21:00:05Z","user":{"username":"` + f1TestUser + `"},"userAgent":"tend/v0.0.0 (linux/amd64) kubernetes/$Format","objectRef":{"resource":"leases"}}`,
		// Discovery has no object.
		`{"stage":"ResponseComplete","verb":"get","stageTimestamp":"2026-11-27T21:00:06Z","user":{"username":"` + f1TestUser + `"}}`,
	}, "\n")
	reqs, err := readAudit(strings.NewReader(log), f1TestUser)
	if err != nil {
		t.Fatal(err)
	}
	at := func(s int) time.Time { return time.Date(2026, 11, 27, 21, 0, s, 0, time.UTC) }
	c := countRequests(reqs, "fleet", at(0), at(10))
	want := map[string]int{"list pods": 1, "watch etcdclusters": 1, "patch etcdclusters/status": 1, "update leases": 1, "get (no object)": 1}
	if len(c.byKey) != len(want) {
		t.Errorf("counted %v; want %v", c.byKey, want)
	}
	for k, n := range want {
		if c.byKey[k] != n {
			t.Errorf("%s: %d; want %d (all: %v)", k, c.byKey[k], n, c.byKey)
		}
	}
	if c.all != 5 || c.writes != 2 || c.lease != 1 || c.scraped != 1 {
		t.Errorf("all %d, writes %d, leader election %d, scrapes %d; want 5, 2, 1, 1", c.all, c.writes, c.lease, c.scraped)
	}
	// The window is half-open, and the watch's end does not count.
	if c := countRequests(reqs, "fleet", at(2), at(3)); c.all != 1 || c.byKey["watch etcdclusters"] != 1 {
		t.Errorf("in [2s, 3s): %+v; want the watch alone", c)
	}
	if _, err := readAudit(strings.NewReader("{not json"), f1TestUser); err == nil {
		t.Error("a line that is not JSON was read")
	}
}

func TestPromSum(t *testing.T) {
	text := `# HELP grpc_server_started_total Total number of RPCs started on the server.
# TYPE grpc_server_started_total counter
grpc_server_started_total{grpc_method="MemberList",grpc_service="etcdserverpb.Cluster",grpc_type="unary"} 12
grpc_server_started_total{grpc_method="Status",grpc_service="etcdserverpb.Maintenance",grpc_type="unary"} 30
grpc_server_started_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 5 1700000000000
grpc_server_started_total_other 99
controller_runtime_reconcile_total{controller="etcdcluster",result="success"} 40
controller_runtime_reconcile_total{controller="etcdcluster",result="requeue_after"} 2
controller_runtime_reconcile_total{controller="podset",result="success"} 7
process_cpu_seconds_total 1.5
`
	by, err := promSum(text, "grpc_server_started_total", nil, "grpc_method")
	if err != nil {
		t.Fatal(err)
	}
	if by["MemberList"] != 12 || by["Status"] != 30 || by["Range"] != 5 || len(by) != 3 {
		t.Errorf("by method: %v", by)
	}
	passes, err := promSum(text, "controller_runtime_reconcile_total", map[string]string{"controller": "etcdcluster"}, "")
	if err != nil || passes[""] != 42 {
		t.Errorf("etcdcluster reconciles: %v, %v; want 42", passes, err)
	}
	cpu, err := promSum(text, "process_cpu_seconds_total", nil, "")
	if err != nil || cpu[""] != 1.5 {
		t.Errorf("CPU: %v, %v", cpu, err)
	}
	if _, err := promSum("x{a=\"b\"} notanumber", "x", nil, ""); err == nil {
		t.Error("a sample that is not a number was read")
	}
}

func TestSlope(t *testing.T) {
	if got := slope([]float64{1, 10, 30}, []float64{2, 2, 2}); got != 0 {
		t.Errorf("a flat figure has slope %v", got)
	}
	if got := slope([]float64{1, 10, 30}, []float64{3, 21, 61}); math.Abs(got-2) > 1e-9 {
		t.Errorf("2x+1 has slope %v", got)
	}
	if got := slope([]float64{5}, []float64{1}); !math.IsNaN(got) {
		t.Errorf("one point has slope %v", got)
	}
}

func TestF1TablePerClusterAndPerMember(t *testing.T) {
	window := func(minutes float64, all, writes, lease int, rpcs float64) f1Window {
		return f1Window{minutes: minutes, api: requestCounts{all: all, writes: writes, lease: lease, byKey: map[string]int{"get secrets": all}},
			rpcs: rpcs, byMethod: map[string]float64{"Status": rpcs}, passes: float64(all), cpu: 0.5 * minutes}
	}
	f := &f1Figures{idle: 4 * time.Minute, window: 2 * time.Minute, took: time.Hour, sizes: []*f1Size{
		{clusters: 1, members: 1, create: 20 * time.Second, perCluster: []float64{20}, createRequests: 50, heapMiB: 30, change: 30 * time.Second,
			windows: []f1Window{window(2, 8, 0, 60, 4), window(2, 8, 0, 60, 4)}},
		{clusters: 10, members: 20, create: 60 * time.Second, perCluster: []float64{20, 40, 60}, createRequests: 500, heapMiB: 40, change: 90 * time.Second,
			windows: []f1Window{window(2, 80, 0, 60, 80), window(2, 84, 2, 60, 80)}},
	}}
	var sb strings.Builder
	f.write(&sb)
	out := sb.String()
	for _, want := range []string{
		"| 1 clusters (1 members) | 10 clusters (20 members) | slope per added cluster |",
		// 8 requests in 2 minutes for 1 cluster; 80 and 84 for 10.
		"| **idle**: manager requests per cluster per minute | 4.00 / 4.00 / 4.00 | 4.00 / 4.10 / 4.20 | 0.011 |",
		"| … of them writes | 0 / 0 / 0 | 0 / 0.050 / 0.100 | 0.006 |",
		// 4 RPCs in 2 minutes for 1 member; 80 for 20.
		"| idle: etcd gRPC requests per member per minute | 2.00 / 2.00 / 2.00 | 2.00 / 2.00 / 2.00 | 0 |",
		"| idle: leader election requests per minute (the manager's, not per cluster) | 30.0 / 30.0 / 30.0 | 30.0 / 30.0 / 30.0 |  |",
		"| … each cluster's own, s: least / median / greatest | 20.0 | 20.0 / 40.0 / 60.0 |  |",
		"The fleet of 10 against 1 alone: create 3.00×, change 3.00×.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	m := f.metrics()
	if m["idle_writes_per_cluster_min"] != 0.05 || m["create_s"] != 60 {
		t.Errorf("metrics: %v", m)
	}
}
