//go:build e2e

package etcd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/tend-dev/tend/internal/etcd"
	"github.com/tend-dev/tend/internal/testing/etcdserver"
)

var (
	flagChecksSamples = flag.Int("f1.check-samples", 3, "F1 checks: samples of each variant")
	flagChecksOps     = flag.Int("f1.check-ops", 300, "F1 checks: operations per sample (passes, connections or scrapes)")
	flagChecksIdle    = flag.Duration("f1.check-idle", 10*time.Second, "F1 checks: the idle window before each sample that sets the members' idle CPU rate")
	flagCheckInterval = flag.Duration("f1.check-interval", time.Minute,
		"F1 checks: how often Tend checks an idle cluster (the EtcdCluster controller's idle requeue)")
)

// BenchmarkF1Checks measures what Tend's health check of an idle
// EtcdCluster costs the members, against what a Prometheus scrape of each
// member costs: F1's goal is that the checks cost no more. The members are
// three etcd processes on this machine (internal/testing/etcdserver), with
// TLS on the client and peer ports and certificates of the same kind as an
// EtcdCluster's (ECDSA P-256), and metrics on a plain HTTP port, as an
// EtcdCluster's members have them.
//
// Variants, in turns within each sample:
//
//   - Tend's pass: what each idle pass of the EtcdCluster controller asks
//     of etcd. It opens a client to every member (etcd.New, as the
//     controller's connectMembers does), reads every member's status and
//     health (Client.Status: the member list, then each member's Status and
//     a linearizable read, each on a connection of its own), and closes.
//   - its requests on kept connections: the same requests (the member list
//     once, each member's Status and one-key linearizable read), on one
//     client per member opened once for the whole run: what a pass would
//     cost without opening its TLS connections.
//   - a scrape: GET /metrics of each member over one kept-alive connection,
//     gzip accepted, as Prometheus does.
//
// The members' CPU comes from /proc (utime+stime, all their threads) and
// the idle rate measured just before each sample is subtracted; the bytes
// are counted on the caller's connections; the gRPC requests come from the
// members' grpc_server_started_total, read before and after.
func BenchmarkF1Checks(b *testing.B) {
	cluster := etcdserver.Start(b, etcdserver.Options{Members: 3, TLS: true})
	var f *checkFigures
	measureOnce(b, "members=3", func(b *testing.B) {
		f = measureChecks(b, cluster)
	}, func() map[string]float64 { return f.metrics() })
	printTable(b, "F1 checks", f.write)
}

func measureChecks(b *testing.B, cluster *etcdserver.Cluster) *checkFigures {
	members := cluster.Members()
	perMinute := float64(time.Minute) / float64(*flagCheckInterval)
	pass := &checkVariant{Name: fmt.Sprintf("Tend's pass (every %s)", *flagCheckInterval), PerMinute: perMinute}
	keptConns := &checkVariant{Name: "its requests on kept connections", PerMinute: perMinute}
	scrape30 := &checkVariant{Name: "scrape (every 30s)", PerMinute: 2}
	scrape60 := &checkVariant{Name: "scrape (every 1m, Prometheus's default)", PerMinute: 1}

	var wire atomic.Int64
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countedConn{Conn: conn, n: &wire}, nil
	}
	cfg := etcd.Config{
		Endpoints: cluster.ClientURLs(),
		TLS:       cluster.PKI.ClientTLS(),
		Dial:      func(ctx context.Context, addr string) (net.Conn, error) { return dial(ctx, "tcp", addr) },
	}
	scraper := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, DialContext: dial, MaxIdleConnsPerHost: 1}}
	defer scraper.CloseIdleConnections()

	onePass := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		cli, err := etcd.New(ctx, cfg)
		if err != nil {
			return err
		}
		defer func() { _ = cli.Close() }()
		statuses, err := cli.Status(ctx)
		if err != nil {
			return err
		}
		for _, s := range statuses {
			if !s.Healthy {
				return fmt.Errorf("member %s is not healthy: %w", s.Name, s.Err)
			}
		}
		return nil
	}
	// The same requests as a pass, on one client per member kept open
	// across operations: what the pass would cost without its TLS
	// connections.
	kept := make([]*clientv3.Client, len(members))
	for i, m := range members {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   []string{m.ClientURL},
			TLS:         cluster.PKI.ClientTLS(),
			DialTimeout: 10 * time.Second,
			DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return dial(ctx, "tcp", addr) })},
			Logger:      zap.NewNop(),
		})
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = cli.Close() }()
		kept[i] = cli
	}
	oneKept := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := kept[0].MemberList(ctx, clientv3.WithSerializable()); err != nil {
			return err
		}
		for i, cli := range kept {
			if _, err := cli.Status(ctx, members[i].ClientURL); err != nil {
				return err
			}
			if _, err := cli.Get(ctx, "tend-health", clientv3.WithKeysOnly(), clientv3.WithLimit(1)); err != nil {
				return err
			}
		}
		return nil
	}
	oneScrape := func(ctx context.Context) error {
		for _, m := range members {
			if err := getMetrics(ctx, scraper, m, io.Discard); err != nil {
				return err
			}
		}
		return nil
	}

	for i := range *flagChecksSamples {
		for _, run := range []struct {
			v  *checkVariant
			op func(context.Context) error
		}{{pass, onePass}, {keptConns, oneKept}, {scrape30, oneScrape}} {
			s, err := checkSampleOf(b.Context(), members, &wire, run.op)
			if err != nil {
				b.Fatalf("F1 checks, %s, sample %d: %v", run.v.Name, i+1, err)
			}
			run.v.Samples = append(run.v.Samples, s)
			logNow(b, "F1 checks", "sample %d, %s: %d operations in %s, members' CPU %s (idle %.3f s/s), caller's %s, %d bytes",
				i+1, run.v.Name, s.Ops, s.Elapsed.Round(time.Millisecond), s.MemberCPU, s.IdleCPU, s.CallerCPU, s.Bytes)
		}
	}
	scrape60.Samples = scrape30.Samples
	return &checkFigures{Members: len(members), Variants: []*checkVariant{pass, keptConns, scrape30, scrape60}}
}

// checkSampleOf measures the members' idle CPU rate, then runs op
// -f1.check-ops times and returns what it cost.
func checkSampleOf(ctx context.Context, members []*etcdserver.Member, wire *atomic.Int64, op func(context.Context) error) (checkSample, error) {
	s := checkSample{Ops: *flagChecksOps, Members: len(members)}
	idle0, err := membersCPU(members)
	if err != nil {
		return s, err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return s, ctx.Err()
	case <-time.After(*flagChecksIdle):
	}
	idle1, err := membersCPU(members)
	if err != nil {
		return s, err
	}
	s.IdleCPU = (idle1 - idle0).Seconds() / time.Since(start).Seconds()

	before, err := membersRPCs(ctx, members)
	if err != nil {
		return s, err
	}
	cpu0, err := membersCPU(members)
	if err != nil {
		return s, err
	}
	self0 := selfCPU()
	bytes0 := wire.Load()
	start = time.Now()
	for range s.Ops {
		if err := op(ctx); err != nil {
			return s, err
		}
	}
	s.Elapsed = time.Since(start)
	s.CallerCPU = selfCPU() - self0
	s.Bytes = wire.Load() - bytes0
	cpu1, err := membersCPU(members)
	if err != nil {
		return s, err
	}
	s.MemberCPU = cpu1 - cpu0
	after, err := membersRPCs(ctx, members)
	if err != nil {
		return s, err
	}
	s.RPCs = map[string]float64{}
	for m, n := range after {
		if d := n - before[m]; d > 0 {
			s.RPCs[m] = d
		}
	}
	return s, nil
}

// membersCPU is the CPU time that the members' processes used so far, all
// threads, user and system, from /proc/<pid>/stat (in the kernel's clock
// ticks, 100 a second).
func membersCPU(members []*etcdserver.Member) (time.Duration, error) {
	var total time.Duration
	for _, m := range members {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.PID()))
		if err != nil {
			return 0, fmt.Errorf("member %s: %w", m.Name, err)
		}
		// The command name, in parentheses, may hold spaces: count from
		// after it. utime and stime are fields 14 and 15.
		i := strings.LastIndexByte(string(data), ')')
		fields := strings.Fields(string(data[i+1:]))
		if len(fields) < 13 {
			return 0, fmt.Errorf("member %s: short /proc stat %q", m.Name, data)
		}
		for _, f := range fields[11:13] {
			ticks, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("member %s: /proc stat: %w", m.Name, err)
			}
			total += time.Duration(ticks) * 10 * time.Millisecond
		}
	}
	return total, nil
}

// membersRPCs sums the gRPC requests that the members started, by method.
func membersRPCs(ctx context.Context, members []*etcdserver.Member) (map[string]float64, error) {
	out := map[string]float64{}
	for _, m := range members {
		var text strings.Builder
		if err := getMetrics(ctx, http.DefaultClient, m, &text); err != nil {
			return nil, err
		}
		by, err := promSum(text.String(), "grpc_server_started_total", nil, "grpc_method")
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", m.Name, err)
		}
		for k, v := range by {
			out[k] += v
		}
	}
	return out, nil
}

// getMetrics copies member m's /metrics page to w.
func getMetrics(ctx context.Context, hc *http.Client, m *etcdserver.Member, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.MetricsURL+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s/metrics: %s", m.MetricsURL, resp.Status)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

// selfCPU is this process's CPU time so far, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// countedConn counts the bytes that go through it, both ways.
type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
}
