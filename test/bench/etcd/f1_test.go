//go:build e2e

package etcd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// F1's settings. Pass them after -args when running this package alone.
var (
	flagF1Sizes = flag.String("f1.sizes", "1,10,30",
		"F1: fleet sizes in EtcdClusters, measured one after the other; clusters alternate 1 and 3 members, starting with 1")
	flagF1Idle    = flag.Duration("f1.idle", 10*time.Minute, "F1: how long each fleet is left idle before its change")
	flagF1Windows = flag.Int("f1.windows", 3, "F1: windows the idle time is split into: the samples of each idle figure")
	flagF1Settle  = flag.Duration("f1.settle", time.Minute,
		"F1: the wait after every cluster has settled and before the idle windows, for the start's last passes")
	flagF1Timeout = flag.Duration("f1.timeout", 20*time.Minute, "F1: the longest wait for a fleet to be created or to settle after its change")
)

const (
	// f1User is the manager's user as config/local and the chart deploy it:
	// the one that hack/cluster/config/audit-policy.yaml records.
	f1User = "system:serviceaccount:" + framework.OperatorNamespace + ":tend-manager"
	// f1MetricsReader is the ClusterRole whose holders may read the
	// manager's metrics.
	f1MetricsReader = "tend-metrics-reader"
	// f1Poll is how often F1 lists the fleet while it waits: the
	// resolution of its times.
	f1Poll = time.Second
)

// BenchmarkF1 measures what one manager costs per EtcdCluster as the fleet
// grows: for each size of -f1.sizes, a fleet of EtcdClusters created
// together in a namespace of its own, left idle, then changed once each,
// then deleted. See the package documentation.
func BenchmarkF1(b *testing.B) {
	var sizes []int
	for s := range strings.SplitSeq(*flagF1Sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			b.Fatalf("-f1.sizes %q: %q is not a fleet size", *flagF1Sizes, s)
		}
		sizes = append(sizes, n)
	}
	if *flagF1Windows < 1 || *flagF1Idle < time.Duration(*flagF1Windows)*time.Minute {
		b.Fatal("-f1.windows must be at least 1 and -f1.idle at least a minute per window")
	}
	start := time.Now()
	r := getRig(b)
	if _, err := os.Stat(filepath.Join(r.cluster.Settings.LogDir, "audit.log")); err != nil {
		b.Fatalf("F1 counts the manager's requests in the apiserver's audit log, and the local cluster's apiserver writes none (%v): "+
			"it was started before hack/cluster/config/audit-policy.yaml existed; restart it with make cluster-down cluster-up", err)
	}
	f := &f1Figures{idle: *flagF1Idle, window: *flagF1Idle / time.Duration(*flagF1Windows)}
	measureOnce(b, "fleet", func(b *testing.B) {
		r.setManagerArgs(b, r.baseArgs)
		m := r.f1Manager(b)
		for _, n := range sizes {
			f.sizes = append(f.sizes, r.f1Measure(b, m, n))
		}
	}, f.metrics)
	f.took = time.Since(start)
	printTable(b, "F1, EtcdCluster fleets on the local cluster (test/bench/etcd)", f.write)
}

func f1Logf(b *testing.B, format string, args ...any) {
	b.Helper()
	logNow(b, "f1", format, args...)
}

// f1Cluster is the i-th cluster of a fleet: small requests, the defaults
// otherwise, and deleted without a final backup.
func f1Cluster(ns string, i int) *etcdv1alpha1.EtcdCluster {
	members := int32(1)
	if i%2 == 1 {
		members = 3
	}
	return &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("f1-%02d", i)},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To(members),
			DeletionPolicy: etcdv1alpha1.DeletionDelete,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("10m"),
				corev1.ResourceMemory: resource.MustParse("64Mi"),
			}},
		},
	}
}

// f1Measure creates a fleet of n clusters, waits until each is Available,
// leaves it idle, changes each once, and deletes it.
func (r *rig) f1Measure(b *testing.B, m *f1ManagerMetrics, n int) *f1Size {
	b.Helper()
	ctx := b.Context()
	ns := r.cluster.Namespace(b)
	s := &f1Size{clusters: n}
	clusters := make([]*etcdv1alpha1.EtcdCluster, n)
	for i := range n {
		clusters[i] = f1Cluster(ns, i)
		s.members += int(*clusters[i].Spec.Replicas)
	}
	f1Logf(b, "%d clusters (%d members) in %s", n, s.members, ns)

	t0 := time.Now()
	for _, ec := range clusters {
		if err := r.cluster.Client.Create(ctx, ec); err != nil {
			b.Fatalf("creating the EtcdCluster %s: %v", ec.Name, err)
		}
	}
	firstAvailable := map[string]time.Duration{}
	r.f1Wait(b, ns, n, "every cluster to be Available", func(ec *etcdv1alpha1.EtcdCluster) bool {
		if _, seen := firstAvailable[ec.Name]; !seen && available(&ec.Status) {
			firstAvailable[ec.Name] = time.Since(t0)
		}
		_, seen := firstAvailable[ec.Name]
		return seen
	})
	allAvailable := time.Now()
	s.create = allAvailable.Sub(t0)
	for _, d := range firstAvailable {
		s.perCluster = append(s.perCluster, d.Seconds())
	}
	f1Logf(b, "%d clusters Available %.1f s after the first create", n, s.create.Seconds())
	r.f1Wait(b, ns, n, "every cluster to settle", func(ec *etcdv1alpha1.EtcdCluster) bool {
		o := observation{generation: ec.Generation, status: ec.Status}
		return stable(&o, int(*ec.Spec.Replicas), ec.Generation)
	})
	time.Sleep(*flagF1Settle)

	// The idle windows: the counters are read at each boundary.
	window := *flagF1Idle / time.Duration(*flagF1Windows)
	prev := r.f1Snapshot(b, m, ns)
	bounds := []time.Time{prev.at}
	var snaps []f1Snap
	for w := range *flagF1Windows {
		time.Sleep(time.Until(prev.at.Add(window)))
		next := r.f1Snapshot(b, m, ns)
		d, err := next.since(prev)
		if err != nil {
			b.Fatalf("idle window %d of %d clusters: %v", w+1, n, err)
		}
		snaps = append(snaps, d)
		bounds = append(bounds, next.at)
		prev = next
	}
	s.heapMiB = prev.heap / (1 << 20)
	reqs := r.f1Audit(b)
	s.createRequests = countRequests(reqs, ns, t0, allAvailable).all
	for i, d := range snaps {
		s.windows = append(s.windows, f1Window{
			minutes:  bounds[i+1].Sub(bounds[i]).Minutes(),
			api:      countRequests(reqs, ns, bounds[i], bounds[i+1]),
			rpcs:     d.rpcs,
			byMethod: d.byMethod,
			passes:   d.passes,
			cpu:      d.cpu,
		})
		w := s.windows[i]
		f1Logf(b, "%d clusters, idle window %d (%.1f min): %d requests (%d writes), %d of the leader election, %d reviewing the scrapes' tokens, %.0f passes, %.0f etcd RPCs, %.2f CPU s",
			n, i+1, w.minutes, w.api.all, w.api.writes, w.api.lease, w.api.scraped, w.passes, w.rpcs, w.cpu)
	}

	// One change each: the members' memory request, which rolls them.
	t1 := time.Now()
	for _, ec := range clusters {
		patch := []byte(`{"spec":{"resources":{"requests":{"memory":"72Mi"}}}}`)
		if err := r.cluster.Client.Patch(ctx, ec, client.RawPatch("application/merge-patch+json", patch)); err != nil {
			b.Fatalf("changing the EtcdCluster %s: %v", ec.Name, err)
		}
	}
	r.f1Wait(b, ns, n, "every cluster to settle after its change", func(ec *etcdv1alpha1.EtcdCluster) bool {
		o := observation{generation: ec.Generation, status: ec.Status}
		return ec.Generation > 1 && stable(&o, int(*ec.Spec.Replicas), ec.Generation)
	})
	s.change = time.Since(t1)
	f1Logf(b, "%d clusters settled %.1f s after their change", n, s.change.Seconds())
	r.deleteNamespace(b, ns)
	return s
}

// f1Wait lists the fleet in ns every f1Poll until done holds for each of
// its n clusters, for at most -f1.timeout. done sees every listed cluster
// at every poll.
func (r *rig) f1Wait(b *testing.B, ns string, n int, what string, done func(*etcdv1alpha1.EtcdCluster) bool) {
	b.Helper()
	deadline := time.Now().Add(*flagF1Timeout)
	for {
		list := &etcdv1alpha1.EtcdClusterList{}
		if err := r.cluster.Client.List(b.Context(), list, client.InNamespace(ns)); err != nil {
			b.Fatalf("listing the fleet: %v", err)
		}
		var waiting []string
		for i := range list.Items {
			if ec := &list.Items[i]; !done(ec) {
				o := observation{generation: ec.Generation, status: ec.Status}
				waiting = append(waiting, ec.Name+": "+summary(&o))
			}
		}
		if len(list.Items) == n && len(waiting) == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("waited %s for %s; %d of %d listed, still waiting for: %s", *flagF1Timeout, what, len(list.Items), n, strings.Join(waiting, "; "))
		}
		time.Sleep(f1Poll)
	}
}

// f1ManagerMetrics reads the manager's metrics endpoint with a token that
// tend-metrics-reader allows.
type f1ManagerMetrics struct {
	url, token string
}

// f1Manager makes a ServiceAccount bound to tend-metrics-reader, in a
// namespace of its own, and returns a reader of the one manager pod's
// metrics.
func (r *rig) f1Manager(b *testing.B) *f1ManagerMetrics {
	b.Helper()
	ctx := b.Context()
	ns := r.cluster.Namespace(b)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scraper"}}
	if err := r.cluster.Client.Create(ctx, sa); err != nil {
		b.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: f1MetricsReader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}},
	}
	if err := r.cluster.Client.Create(ctx, binding); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.cluster.Client.Delete(context.Background(), binding) })
	tr, err := r.cluster.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](4 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		b.Fatalf("a token for the manager's metrics: %v", err)
	}
	var pods corev1.PodList
	if err := r.cluster.Client.List(ctx, &pods, client.InNamespace(framework.OperatorNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": "tend", "app.kubernetes.io/component": "manager"}); err != nil {
		b.Fatal(err)
	}
	var running []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			running = append(running, p)
		}
	}
	if len(running) != 1 {
		b.Fatalf("F1 reads one manager's process; %d manager pods run", len(running))
	}
	return &f1ManagerMetrics{url: "https://" + net.JoinHostPort(running[0].Status.PodIP, "8443") + "/metrics", token: tr.Status.Token}
}

// f1Snap is the counters at one moment, or (since) their rise over a
// window.
type f1Snap struct {
	at   time.Time
	heap float64
	// cpu and passes are the manager's; rpcs the members' (by member, and
	// summed by method).
	cpu, passes float64
	byMember    map[string]float64
	rpcs        float64
	byMethod    map[string]float64
}

func (s f1Snap) since(prev f1Snap) (f1Snap, error) {
	d := f1Snap{at: s.at, heap: s.heap, cpu: s.cpu - prev.cpu, passes: s.passes - prev.passes, rpcs: s.rpcs - prev.rpcs, byMethod: map[string]float64{}}
	for m, v := range s.byMember {
		if p, ok := prev.byMember[m]; !ok || v < p {
			return d, fmt.Errorf("member %s restarted or appeared during the idle window", m)
		}
	}
	if len(s.byMember) != len(prev.byMember) || d.cpu < 0 {
		return d, errors.New("a member or the manager restarted during the idle window")
	}
	for k, v := range s.byMethod {
		d.byMethod[k] = v - prev.byMethod[k]
	}
	return d, nil
}

// f1Snapshot reads the manager's CPU time, heap and reconciles, and every
// member's gRPC requests, from their metrics endpoints.
func (r *rig) f1Snapshot(b *testing.B, m *f1ManagerMetrics, ns string) f1Snap {
	b.Helper()
	s := f1Snap{at: time.Now(), byMember: map[string]float64{}, byMethod: map[string]float64{}}
	text, err := framework.Scrape(m.url, m.token)
	if err != nil {
		b.Fatalf("the manager's metrics: %v", err)
	}
	for family, into := range map[string]*float64{"process_cpu_seconds_total": &s.cpu, "go_memstats_heap_inuse_bytes": &s.heap} {
		v, err := promSum(text, family, nil, "")
		if err != nil || len(v) == 0 {
			b.Fatalf("the manager's %s: %v (none served)", family, err)
		}
		*into = v[""]
	}
	passes, err := promSum(text, "controller_runtime_reconcile_total", map[string]string{"controller": "etcdcluster"}, "")
	if err != nil {
		b.Fatal(err)
	}
	s.passes = passes[""]

	var pods corev1.PodList
	if err := r.cluster.Client.List(b.Context(), &pods, client.InNamespace(ns), client.HasLabels{framework.EtcdClusterLabel}); err != nil {
		b.Fatal(err)
	}
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.Kind != "StatefulSet" || p.Status.PodIP == "" {
			continue // a Job's pod
		}
		text, err := framework.Scrape("http://"+net.JoinHostPort(p.Status.PodIP, "2381")+"/metrics", "")
		if err != nil {
			b.Fatalf("member %s's metrics: %v", p.Name, err)
		}
		byMethod, err := promSum(text, "grpc_server_started_total", nil, "grpc_method")
		if err != nil {
			b.Fatalf("member %s's metrics: %v", p.Name, err)
		}
		for method, v := range byMethod {
			s.byMethod[method] += v
			s.byMember[p.Name] += v
			s.rpcs += v
		}
	}
	return s
}

// f1Audit reads the manager's requests from the apiserver's audit log and
// the one it rotated last.
func (r *rig) f1Audit(b *testing.B) []apiRequest {
	b.Helper()
	files, _ := filepath.Glob(filepath.Join(r.cluster.Settings.LogDir, "audit*.log"))
	var all []apiRequest
	for _, name := range files {
		fh, err := os.Open(name)
		if err != nil {
			b.Fatal(err)
		}
		reqs, err := readAudit(fh, f1User)
		_ = fh.Close()
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		all = append(all, reqs...)
	}
	return all
}
