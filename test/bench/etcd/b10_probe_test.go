//go:build e2e

package etcd

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// How B10 watches a sample's cluster from this machine: its member pods
// through an informer, a writer, and a poll of every member's status.
const (
	// b10KeyPrefix holds the writer's keys.
	b10KeyPrefix = "b10/writes/"
	// b10PollEvery is how often every member's status is read, for the
	// timeline of terms and leaders; the figures read the term at the
	// patch and at the end as well.
	b10PollEvery = 500 * time.Millisecond
	// b10CallTimeout bounds a status poll or another call of the
	// benchmark's own (not the writer's).
	b10CallTimeout = 2 * time.Second
)

// b10WatchPods follows the pods in ns with labels sel until ctx ends.
func (r *rig) b10WatchPods(ctx context.Context, b *testing.B, ns string, sel map[string]string) *b10Pods {
	b.Helper()
	t := newB10Pods(b10Members)
	factory := informers.NewSharedInformerFactoryWithOptions(r.cluster.Clientset, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = labels.SelectorFromSet(sel).String() }))
	inf := factory.Core().V1().Pods().Informer()
	record := func(obj any, gone bool) {
		now := time.Now()
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			t.update(p, gone, now)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { record(obj, false) },
		UpdateFunc: func(_, obj any) { record(obj, false) },
		DeleteFunc: func(obj any) { record(obj, true) },
	}); err != nil {
		b.Fatalf("watching the pods of %s: %v", ns, err)
	}
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		b.Fatalf("the watch of the pods of %s did not start within a minute", ns)
	}
	return t
}

// waitPods waits until every member's pod runs image and is Ready, and
// returns that moment; a pod that crashes or a timeout fails b, with the
// pods' states.
func (r *rig) b10WaitPods(b *testing.B, ns string, pods *b10Pods, image string, timeout time.Duration) time.Time {
	b.Helper()
	deadline := time.After(timeout)
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		done, changed := pods.Done()
		if !done.IsZero() {
			return done
		}
		select {
		case <-changed:
		case <-tick.C:
			if msg := r.b10Crashed(b, ns); msg != "" {
				b.Fatalf("waiting for every member on %s: %s", image, msg)
			}
		case <-deadline:
			b.Fatalf("waiting for every member on %s, Ready: not within %s (-b10.timeout); pods: %s", image, timeout, r.b10PodStates(b, ns))
		}
	}
}

// b10Crashed describes the member pods whose etcd container has restarted,
// with the end of its previous log, or "".
func (r *rig) b10Crashed(b *testing.B, ns string) string {
	pods, err := r.cluster.Clientset.CoreV1().Pods(ns).List(b.Context(), metav1.ListOptions{})
	if err != nil {
		return ""
	}
	var out []string
	for i := range pods.Items {
		p := &pods.Items[i]
		for _, st := range p.Status.ContainerStatuses {
			if st.Name != "etcd" || st.RestartCount < 2 {
				continue
			}
			log, _ := r.cluster.Clientset.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: "etcd", Previous: true, TailLines: ptr.To[int64](20)}).DoRaw(b.Context())
			out = append(out, fmt.Sprintf("pod %s: etcd restarted %d times (%s); its previous log's end:\n%s", p.Name, st.RestartCount, st.Image, log))
		}
	}
	return strings.Join(out, "\n")
}

// b10PodStates says each pod's phase, readiness and containers' states.
func (r *rig) b10PodStates(b *testing.B, ns string) string {
	pods, err := r.cluster.Clientset.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for i := range pods.Items {
		p := &pods.Items[i]
		s := fmt.Sprintf("%s %s ready=%t", p.Name, p.Status.Phase, b10PodReady(p))
		if p.DeletionTimestamp != nil {
			s += " deleting"
		}
		for _, st := range p.Status.ContainerStatuses {
			s += fmt.Sprintf(" [%s %s restarts %d", st.Name, st.Image, st.RestartCount)
			if w := st.State.Waiting; w != nil {
				s += " waiting " + w.Reason
			}
			s += "]"
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

// b10Probe is a sample's view of its members from this machine: a writer
// and a poll of every member's status, each through its own clients, which
// dial each member at the IP its live pod has now.
type b10Probe struct {
	ns       string
	pods     *b10Pods
	writer   *clientv3.Client
	members  map[string]*clientv3.Client
	interval time.Duration
	timeout  time.Duration

	mu     sync.Mutex
	writes []b10Write
	terms  []b10TermSample
	names  map[uint64]string

	stopWriter, stopPolls context.CancelFunc
	writerDone, pollsDone chan struct{}
}

// b10NewClient is an etcd client of endpoints (the members' client URLs,
// by name) that dials each member at its live pod's IP, with TLS when
// tlsConfig is set. gRPC waits at most a second between its tries to
// reach a member, so that the client does not lag far behind a member
// that is back.
func b10NewClient(ns string, pods *b10Pods, tlsConfig *tls.Config, endpoints ...string) (*clientv3.Client, error) {
	var dialer net.Dialer
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err == nil {
			if member := b10MemberOfHost(ns, host); member != "" {
				ip := pods.IP(member)
				if ip == "" {
					return nil, fmt.Errorf("member %s has no live pod with an IP", member)
				}
				addr = net.JoinHostPort(ip, port)
			}
		}
		return dialer.DialContext(ctx, "tcp", addr)
	}
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		TLS:         tlsConfig,
		DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{
			grpc.WithContextDialer(dial),
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
				MinConnectTimeout: 2 * time.Second,
			}),
		},
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
	})
}

// b10StartProbe makes the clients and starts the status polls (not the
// writer); stop ends everything it started.
func (r *rig) b10StartProbe(b *testing.B, ns string, pods *b10Pods, tlsConfig *tls.Config) *b10Probe {
	b.Helper()
	p := &b10Probe{ns: ns, pods: pods, members: map[string]*clientv3.Client{}, names: map[uint64]string{},
		interval: *flagB10Interval, timeout: *flagB10WriteTimeout}
	endpoints := b10ClientEndpoints(ns, tlsConfig != nil)
	var err error
	if p.writer, err = b10NewClient(ns, pods, tlsConfig, endpoints...); err != nil {
		b.Fatalf("the writer's etcd client: %v", err)
	}
	for i, ep := range endpoints {
		if p.members[b10MemberName(i)], err = b10NewClient(ns, pods, tlsConfig, ep); err != nil {
			p.close()
			b.Fatalf("an etcd client of %s: %v", ep, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.stopPolls, p.pollsDone = cancel, make(chan struct{})
	go p.poll(ctx)
	return p
}

// status reads member's status, and records it.
func (p *b10Probe) status(ctx context.Context, member string) b10TermSample {
	ctx, cancel := context.WithTimeout(ctx, b10CallTimeout)
	defer cancel()
	s := b10TermSample{member: member}
	resp, err := pb.NewMaintenanceClient(p.members[member].ActiveConnection()).Status(ctx, &pb.StatusRequest{})
	s.at = time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err != nil:
		s.err = err
	case len(resp.Errors) > 0:
		s.err = fmt.Errorf("etcd reports %s", strings.Join(resp.Errors, "; "))
	}
	if resp != nil && resp.Header != nil {
		p.names[resp.Header.MemberId] = member
		s.term, s.version = resp.Header.RaftTerm, resp.Version
		if resp.Leader != 0 {
			s.leader = p.names[resp.Leader]
			if s.leader == "" {
				s.leader = fmt.Sprintf("%x", resp.Leader)
			}
		}
	}
	p.terms = append(p.terms, s)
	return s
}

// statusAll reads every member's status at once.
func (p *b10Probe) statusAll(ctx context.Context) []b10TermSample {
	out := make([]b10TermSample, b10Members)
	var wg sync.WaitGroup
	for i := range b10Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = p.status(ctx, b10MemberName(i))
		}()
	}
	wg.Wait()
	return out
}

func (p *b10Probe) poll(ctx context.Context) {
	defer close(p.pollsDone)
	tick := time.NewTicker(b10PollEvery)
	defer tick.Stop()
	for {
		p.statusAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// b10Healthy says how the members' statuses fall short of a healthy
// cluster on version, all agreeing on a leader, or nil; term is the
// highest they report.
func b10Healthy(statuses []b10TermSample, version string) (term uint64, err error) {
	leader := ""
	for _, s := range statuses {
		switch {
		case s.err != nil:
			return 0, fmt.Errorf("member %s: %w", s.member, s.err)
		case s.version != strings.TrimPrefix(version, "v"):
			return 0, fmt.Errorf("member %s runs %s, want %s", s.member, s.version, version)
		case s.leader == "":
			return 0, fmt.Errorf("member %s has no leader", s.member)
		case leader != "" && s.leader != leader:
			return 0, fmt.Errorf("members disagree on the leader: %s and %s", leader, s.leader)
		}
		leader = s.leader
		term = max(term, s.term)
	}
	return term, nil
}

// waitHealthy waits until every member answers on version, all with the
// same leader, and returns the highest raft term they report.
func (p *b10Probe) waitHealthy(b *testing.B, version string, timeout time.Duration) uint64 {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		term, err := b10Healthy(p.statusAll(b.Context()), version)
		if err == nil {
			return term
		}
		if time.Now().After(deadline) {
			b.Fatalf("waiting for every member healthy on %s: not within %s: %v", version, timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// startWriter starts the writer, and waits until it has had a second of
// acknowledged writes.
func (p *b10Probe) startWriter(b *testing.B) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p.stopWriter, p.writerDone = cancel, make(chan struct{})
	go p.write(ctx)
	deadline := time.Now().Add(time.Minute)
	for {
		p.mu.Lock()
		acked, n := b10Acked(p.writes), len(p.writes)
		var last error
		if n > 0 {
			last = p.writes[n-1].err
		}
		p.mu.Unlock()
		if time.Duration(acked)*p.interval >= time.Second {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the writer had %d of %d writes acknowledged within a minute; the last error: %v", acked, n, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// write puts a new key every interval, each with its own timeout, one at
// a time: a put that takes longer than interval is followed by the next at
// once. A put that the stop cuts short is not recorded.
func (p *b10Probe) write(ctx context.Context) {
	defer close(p.writerDone)
	next := time.Now()
	for i := 0; ctx.Err() == nil; i++ {
		w := b10Write{key: fmt.Sprintf("%s%07d", b10KeyPrefix, i), value: fmt.Sprintf("%d-%016x", i, rand.Uint64()), start: time.Now()}
		callCtx, cancel := context.WithTimeout(ctx, p.timeout)
		_, w.err = p.writer.Put(callCtx, w.key, w.value)
		cancel()
		w.end = time.Now()
		if w.err != nil && ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		p.writes = append(p.writes, w)
		p.mu.Unlock()
		if next = next.Add(p.interval); next.Before(w.end) {
			next = w.end
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(next)):
		}
	}
}

// stopWrites stops the writer and returns its writes.
func (p *b10Probe) stopWrites() []b10Write {
	if p.stopWriter != nil {
		p.stopWriter()
		<-p.writerDone
		p.stopWriter = nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]b10Write(nil), p.writes...)
}

// termSamples returns the polls so far.
func (p *b10Probe) termSamples() []b10TermSample {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]b10TermSample(nil), p.terms...)
}

// readBack reads every key the writer may have put, with a linearizable
// read.
func (p *b10Probe) readBack(b *testing.B) map[string]string {
	b.Helper()
	var err error
	for range 5 {
		ctx, cancel := context.WithTimeout(b.Context(), 10*time.Second)
		var resp *clientv3.GetResponse
		resp, err = p.writer.Get(ctx, b10KeyPrefix, clientv3.WithPrefix())
		cancel()
		if err == nil {
			held := make(map[string]string, len(resp.Kvs))
			for _, kv := range resp.Kvs {
				held[string(kv.Key)] = string(kv.Value)
			}
			return held
		}
		time.Sleep(time.Second)
	}
	b.Fatalf("reading the writer's keys back: %v", err)
	return nil
}

// close stops the writer and the polls and closes the clients.
func (p *b10Probe) close() {
	p.stopWrites()
	if p.stopPolls != nil {
		p.stopPolls()
		<-p.pollsDone
		p.stopPolls = nil
	}
	// A client's Close reports only that its context ended.
	for _, c := range p.members {
		_ = c.Close()
	}
	if p.writer != nil {
		_ = p.writer.Close()
	}
}
