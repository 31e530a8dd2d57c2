package etcdserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tend-dev/tend/internal/testing/logtail"
)

const (
	// readyTimeout bounds how long a member may take to serve after it
	// starts: long, for two shared cores under a parallel build.
	readyTimeout = 60 * time.Second
	// startAttempts is how many sets of ports a new cluster tries, in case
	// another process binds one of them between our probe and etcd's bind.
	startAttempts = 3
	// logTail is how much of each member's output is kept, and failureTail
	// how much of it a failed test prints.
	logTail     = 64 << 10
	failureTail = 12 << 10
)

// Options shape a new cluster.
type Options struct {
	// Members is the number of voting members to start with; 0 means 1.
	Members int
	// TLS makes the client and peer ports https, with client-certificate
	// authentication on both, from a fresh PKI.
	TLS bool
	// QuotaBackendBytes is --quota-backend-bytes; 0 keeps etcd's default.
	// A small quota lets a test fill the database until etcd raises
	// NOSPACE.
	QuotaBackendBytes int64
}

// Cluster is a set of etcd members on 127.0.0.1.
type Cluster struct {
	// PKI holds the certificates when the cluster speaks TLS; nil otherwise.
	PKI *PKI
	// Bin are the programs that the members run.
	Bin Binaries

	dir   string
	token string
	http  *http.Client
	quota int64

	mu      sync.Mutex
	members []*Member
	next    int // the number in the next member's name
}

// Member is one etcd process, running or not.
type Member struct {
	// Name is the member's --name, m0, m1 and so on.
	Name string
	// ClientURL and PeerURL are where the member listens and what it
	// advertises.
	ClientURL, PeerURL string
	// MetricsURL serves /metrics and the health endpoints over plain HTTP,
	// as a member of an EtcdCluster does on its metrics port.
	MetricsURL string
	// DataDir is the member's --data-dir.
	DataDir string

	c    *Cluster
	log  *logtail.Buffer
	mu   sync.Mutex
	args []string // set by the first start, reused by Restart
	proc *process // the latest process; nil before the first start
}

// Start starts a cluster of opts.Members voting members, waits until every
// one of them serves linearizable reads (/readyz), and kills them all when
// the test ends. The test fails at once when the cluster cannot start.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	c, err := newCluster(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("etcdserver: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range c.Members() {
				out := m.Log()
				if len(out) > failureTail {
					out = "…" + out[len(out)-failureTail:]
				}
				t.Logf("etcd member %s (%s), the end of its output:\n%s", m.Name, m.ClientURL, out)
			}
		}
		c.kill()
	})
	if err := c.start(opts.Members); err != nil {
		t.Fatalf("etcdserver: %v", err)
	}
	return c
}

func newCluster(dir string, opts Options) (*Cluster, error) {
	bin, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Bin: bin, dir: dir, token: "tend-test-" + strconv.FormatUint(rand.Uint64(), 36), quota: opts.QuotaBackendBytes}
	transport := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	if opts.TLS {
		if c.PKI, err = NewPKI(filepath.Join(dir, "pki")); err != nil {
			return nil, fmt.Errorf("making the PKI: %w", err)
		}
		transport.TLSClientConfig = c.PKI.ClientTLS()
	}
	c.http = &http.Client{Timeout: 5 * time.Second, Transport: transport}
	return c, nil
}

// start launches n members as a new cluster and waits until each one is
// ready, trying fresh ports when one was taken under etcd's feet.
func (c *Cluster) start(n int) error {
	if n <= 0 {
		n = 1
	}
	for attempt := 1; ; attempt++ {
		err := c.startOnce(n)
		if err == nil {
			return nil
		}
		c.kill()
		c.mu.Lock()
		c.members, c.next = nil, 0
		c.mu.Unlock()
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			return err
		}
	}
}

var errPortTaken = errors.New("a port was taken")

func (c *Cluster) startOnce(n int) error {
	var initial []string
	members := make([]*Member, n)
	for i := range members {
		m, err := c.newMember()
		if err != nil {
			return err
		}
		members[i] = m
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	for _, m := range members {
		if err := m.launch(strings.Join(initial, ","), "new"); err != nil {
			return err
		}
	}
	for _, m := range members {
		if err := m.waitServing("/readyz"); err != nil {
			return err
		}
	}
	return nil
}

// NewMember reserves the ports and the data directory of a member that is
// not started: add it to the cluster first (it needs its PeerURL), then Join.
func (c *Cluster) NewMember(t testing.TB) *Member {
	t.Helper()
	m, err := c.newMember()
	if err != nil {
		t.Fatalf("etcdserver: %v", err)
	}
	return m
}

func (c *Cluster) newMember() (*Member, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	scheme := "http"
	if c.PKI != nil {
		scheme = "https"
	}
	clientPort, err := reservePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := reservePort()
	if err != nil {
		return nil, err
	}
	metricsPort, err := reservePort()
	if err != nil {
		return nil, err
	}
	name := "m" + strconv.Itoa(c.next)
	c.next++
	m := &Member{
		Name:       name,
		ClientURL:  scheme + "://127.0.0.1:" + strconv.Itoa(clientPort),
		PeerURL:    scheme + "://127.0.0.1:" + strconv.Itoa(peerPort),
		MetricsURL: "http://127.0.0.1:" + strconv.Itoa(metricsPort),
		DataDir:    filepath.Join(c.dir, name),
		c:          c,
		log:        logtail.New(logTail),
	}
	c.members = append(c.members, m)
	return m, nil
}

// Members returns every member that NewMember made, started or not, in the
// order of their names.
func (c *Cluster) Members() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Member(nil), c.members...)
}

// ClientURLs returns the client URL of every member, running or not.
func (c *Cluster) ClientURLs() []string {
	var urls []string
	for _, m := range c.Members() {
		urls = append(urls, m.ClientURL)
	}
	return urls
}

// kill kills every member.
func (c *Cluster) kill() {
	for _, m := range c.Members() {
		m.kill()
	}
}

// Join starts m as a member of the running cluster
// (--initial-cluster-state=existing). initialCluster is the name=peerURL list
// of every member, m included, as etcd's member add prints it. Join returns
// once m serves serializable reads (/livez): a learner never serves
// linearizable ones.
func (m *Member) Join(t testing.TB, initialCluster string) {
	t.Helper()
	if err := m.launch(initialCluster, "existing"); err != nil {
		t.Fatalf("etcdserver: %v", err)
	}
	if err := m.waitServing("/livez"); err != nil {
		t.Fatalf("etcdserver: %v", err)
	}
}

// Kill kills m with SIGKILL, as a crash would, and waits until it is gone.
// Its data stays, for Restart.
func (m *Member) Kill() { m.kill() }

// Restart starts m again on its data directory, with the flags of its first
// start, and returns once it serves serializable reads (/livez).
func (m *Member) Restart(t testing.TB) {
	t.Helper()
	m.mu.Lock()
	args := m.args
	m.mu.Unlock()
	if args == nil {
		t.Fatalf("etcdserver: member %s was never started", m.Name)
	}
	if err := m.run(args); err != nil {
		t.Fatalf("etcdserver: %v", err)
	}
	if err := m.waitServing("/livez"); err != nil {
		t.Fatalf("etcdserver: %v", err)
	}
}

// Running tells whether m's process is alive. A member that the cluster
// removed exits by itself.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc != nil && m.proc.running()
}

// Log returns the end of m's output, over all its starts.
// PID is the process ID of m's latest process, 0 before the first start.
func (m *Member) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return 0
	}
	return m.proc.cmd.Process.Pid
}

func (m *Member) Log() string { return m.log.String() }

func (m *Member) launch(initialCluster, state string) error {
	args := []string{
		"--name=" + m.Name,
		"--data-dir=" + m.DataDir,
		"--listen-client-urls=" + m.ClientURL,
		"--advertise-client-urls=" + m.ClientURL,
		"--listen-peer-urls=" + m.PeerURL,
		"--initial-advertise-peer-urls=" + m.PeerURL,
		"--listen-metrics-urls=" + m.MetricsURL,
		"--initial-cluster=" + initialCluster,
		"--initial-cluster-state=" + state,
		"--initial-cluster-token=" + m.c.token,
		// Tests do not survive power loss; they do run on busy disks.
		"--unsafe-no-fsync=true",
		"--log-level=info",
	}
	if m.c.quota > 0 {
		args = append(args, "--quota-backend-bytes="+strconv.FormatInt(m.c.quota, 10))
	}
	if p := m.c.PKI; p != nil {
		args = append(args,
			"--cert-file="+p.ServerCertFile, "--key-file="+p.ServerKeyFile,
			"--trusted-ca-file="+p.CAFile, "--client-cert-auth=true",
			"--peer-cert-file="+p.ServerCertFile, "--peer-key-file="+p.ServerKeyFile,
			"--peer-trusted-ca-file="+p.CAFile, "--peer-client-cert-auth=true",
		)
	}
	m.mu.Lock()
	m.args = args
	m.mu.Unlock()
	return m.run(args)
}

func (m *Member) run(args []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc != nil && m.proc.running() {
		return fmt.Errorf("member %s is already running", m.Name)
	}
	p, err := startProcess(m.c.Bin.Etcd, args, m.log)
	if err != nil {
		return err
	}
	m.proc = p
	return nil
}

func (m *Member) kill() {
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// waitServing polls m's health endpoint path until it answers 200, and fails
// when m exits first or takes longer than readyTimeout.
func (m *Member) waitServing(path string) error {
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	deadline := time.Now().Add(readyTimeout)
	var last string
	for {
		ok, why := m.answers(path)
		if ok {
			return nil
		}
		last = why
		select {
		case <-p.exited:
			err := fmt.Errorf("etcd member %s exited before serving %s (%s); the end of its output:\n%s", m.Name, path, p.exitReason(), m.Log())
			if strings.Contains(m.Log(), "address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd member %s did not serve %s%s within %s (last answer: %s); the end of its output:\n%s",
				m.Name, m.ClientURL, path, readyTimeout, last, m.Log())
		}
	}
}

func (m *Member) answers(path string) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.ClientURL+path, nil)
	if err != nil {
		return false, err.Error()
	}
	resp, err := m.c.http.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return true, ""
}

var (
	portsMu sync.Mutex
	ports   = map[int]bool{}
)

// reservePort returns a port that is free on 127.0.0.1 and that no other
// member of this process was given. It picks below the kernel's ephemeral
// range, so that no outgoing connection can take the port before etcd binds
// it; only another listener can.
func reservePort() (int, error) {
	low, high := 10000, ephemeralLow()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		port := low + rand.IntN(high-low)
		if ports[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		_ = l.Close()
		ports[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("found no free port on 127.0.0.1 between %d and %d", low, high)
}

// ephemeralLow returns the bottom of the kernel's ephemeral port range.
func ephemeralLow() int {
	const fallback = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return fallback
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return fallback
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= 11000 {
		return fallback
	}
	return low
}

// Freeze stops m with SIGSTOP, and returns once every thread of it has
// stopped: it keeps its connections and accepts new ones, but answers
// nothing, as a member that hangs would. Thaw resumes it.
func (m *Member) Freeze(t testing.TB) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil || !m.proc.running() {
		t.Fatalf("etcdserver: member %s is not running", m.Name)
	}
	pid := m.proc.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("etcdserver: stopping member %s: %v", m.Name, err)
	}
	// The signal is delivered to each thread when it next runs: until then,
	// a thread that is on a CPU may still answer.
	deadline := time.Now().Add(readyTimeout)
	for !allStopped(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("etcdserver: member %s did not stop within %s", m.Name, readyTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// Thaw resumes a member that Freeze stopped.
func (m *Member) Thaw() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc != nil && m.proc.running() {
		_ = syscall.Kill(m.proc.cmd.Process.Pid, syscall.SIGCONT)
	}
}

// allStopped tells whether every thread of process pid is stopped: state T
// in /proc/pid/task/*/stat.
func allStopped(pid int) bool {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return false
	}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		// The state follows the command, which is in parentheses and may
		// hold spaces: "pid (comm) S ...".
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}
