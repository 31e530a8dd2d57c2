package agent

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/tend-dev/tend/internal/agentapi"
)

// clusterDNS is a DNS server on 127.0.0.1 that behaves as the cluster's
// CoreDNS does for a headless Service's pod names: NXDOMAIN until a name
// is published, then NOERROR (no records for a type it does not serve),
// and a cache, keyed by name and type, that hands out a negative answer
// for ttl after it gave it. rcode, when set, is its answer to everything.
type clusterDNS struct {
	addr  string
	ttl   time.Duration
	rcode dnsmessage.RCode

	mu        sync.Mutex
	published map[string]bool
	negative  map[dnsmessage.Question]time.Time
	asked     []dnsmessage.Question
}

func startClusterDNS(t *testing.T, rcode dnsmessage.RCode) *clusterDNS {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	d := &clusterDNS{addr: conn.LocalAddr().String(), ttl: 30 * time.Second, rcode: rcode,
		published: map[string]bool{}, negative: map[dnsmessage.Question]time.Time{}}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			answer := dnsmessage.Message{
				Header:    dnsmessage.Header{ID: h.ID, Response: true, RCode: d.answer(q)},
				Questions: []dnsmessage.Question{q},
			}
			packet, err := answer.Pack()
			if err == nil {
				_, _ = conn.WriteTo(packet, from)
			}
		}
	}()
	return d
}

func (d *clusterDNS) answer(q dnsmessage.Question) dnsmessage.RCode {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, q)
	if d.rcode != 0 {
		return d.rcode
	}
	if at, ok := d.negative[q]; ok && time.Since(at) < d.ttl {
		return dnsmessage.RCodeNameError
	}
	if d.published[strings.TrimSuffix(q.Name.String(), ".")] {
		return dnsmessage.RCodeSuccess
	}
	d.negative[q] = time.Now()
	return dnsmessage.RCodeNameError
}

func (d *clusterDNS) publish(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.published[name] = true
}

func (d *clusterDNS) questions() []dnsmessage.Question {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]dnsmessage.Question(nil), d.asked...)
}

const (
	dnsM0 = "main-0.main-peer.db.svc.cluster.local"
	dnsM1 = "main-1.main-peer.db.svc.cluster.local"
	dnsM2 = "main-2.main-peer.db.svc.cluster.local"
)

// newClusterOptions are the join check's options for member main-1 of a
// new three-member cluster, asking dns.
func newClusterOptions(t *testing.T, dns *clusterDNS, wait time.Duration) JoinCheckOptions {
	return JoinCheckOptions{
		DataDir: filepath.Join(t.TempDir(), "etcd"), Name: "main-1",
		PeerURL:        "http://" + dnsM1 + ":2380",
		InitialCluster: "main-0=http://" + dnsM0 + ":2380,main-1=http://" + dnsM1 + ":2380,main-2=http://" + dnsM2 + ":2380",
		State:          "new", PublishWait: wait, DNSServers: []string{dns.addr},
		Log: funcr.New(func(prefix, args string) { t.Log(prefix, args) }, funcr.Options{}),
	}
}

// TestJoinCheckWaitsUntilTheDNSHasEveryMember: a new member starts only
// once the DNS has every member's name, and its questions leave nothing
// in the DNS's negative cache that etcd's address lookups would be given:
// after the wait, an A question for each name is answered.
func TestJoinCheckWaitsUntilTheDNSHasEveryMember(t *testing.T) {
	g := NewWithT(t)
	dns := startClusterDNS(t, 0)
	dns.publish(dnsM1)
	time.AfterFunc(300*time.Millisecond, func() { dns.publish(dnsM0) })
	time.AfterFunc(700*time.Millisecond, func() { dns.publish(dnsM2) })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	r, err := JoinCheck(ctx, newClusterOptions(t, dns, 10*time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.JoinCheck).To(Equal(&agentapi.JoinCheckResult{Decision: JoinNewCluster}))
	g.Expect(time.Since(start)).To(BeNumerically(">=", 700*time.Millisecond))

	asked := dns.questions()
	g.Expect(len(asked)).To(BeNumerically(">", 3), "the names were asked for again until they were published")
	for _, q := range asked {
		g.Expect(int(q.Type)).To(And(BeNumerically(">=", privateTypeFirst), BeNumerically("<=", privateTypeLast)),
			"only private-use types are asked for, %v", q)
	}
	for _, name := range []string{dnsM0, dnsM1, dnsM2} {
		for _, typ := range []dnsmessage.Type{dnsmessage.TypeA, dnsmessage.TypeAAAA} {
			g.Expect(dns.answer(dnsmessage.Question{Name: dnsmessage.MustNewName(name + "."), Type: typ, Class: dnsmessage.ClassINET})).
				To(Equal(dnsmessage.RCodeSuccess), "%s %s: the wait left a negative answer cached", name, typ)
		}
	}
}

// TestJoinCheckStartsWithoutNamesPastTheWait: a member whose peers do not
// come starts once the wait is over, as it did before there was a wait,
// and says which names were missing.
func TestJoinCheckStartsWithoutNamesPastTheWait(t *testing.T) {
	g := NewWithT(t)
	dns := startClusterDNS(t, 0)
	dns.publish(dnsM1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	r, err := JoinCheck(ctx, newClusterOptions(t, dns, 600*time.Millisecond))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.JoinCheck).To(Equal(&agentapi.JoinCheckResult{Decision: JoinNewCluster, Unpublished: []string{dnsM0, dnsM2}}))
	g.Expect(time.Since(start)).To(And(BeNumerically(">=", 600*time.Millisecond), BeNumerically("<", 5*time.Second)))
}

// TestJoinCheckStartsWhenTheDNSCannotTell: a DNS that answers a
// private-use type with neither NOERROR nor NXDOMAIN ends the wait at
// once; so does one that cannot be reached, at the wait's end.
func TestJoinCheckStartsWhenTheDNSCannotTell(t *testing.T) {
	for _, rcode := range []dnsmessage.RCode{dnsmessage.RCodeRefused, dnsmessage.RCodeNotImplemented, dnsmessage.RCodeServerFailure} {
		t.Run(rcode.String(), func(t *testing.T) {
			g := NewWithT(t)
			dns := startClusterDNS(t, rcode)
			start := time.Now()
			r, err := JoinCheck(context.Background(), newClusterOptions(t, dns, 10*time.Second))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.JoinCheck.Decision).To(Equal(JoinNewCluster))
			g.Expect(r.JoinCheck.Unpublished).To(Equal([]string{dnsM0, dnsM1, dnsM2}))
			g.Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))
			g.Expect(dns.questions()).To(HaveLen(1))
		})
	}
}

// TestJoinCheckAsksNoDNSForAnExistingCluster: the wait is a new cluster's
// alone; a member with data, or joining one that runs, asks no DNS.
func TestJoinCheckAsksNoDNSForAnExistingCluster(t *testing.T) {
	g := NewWithT(t)
	dns := startClusterDNS(t, 0)
	o := newClusterOptions(t, dns, 10*time.Second)
	g.Expect(os.MkdirAll(filepath.Join(o.DataDir, "member", "wal"), 0o700)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(o.DataDir, "member", "wal", "0.wal"), []byte("x"), 0o600)).To(Succeed())
	r, err := JoinCheck(context.Background(), o)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.JoinCheck.Decision).To(Equal(JoinHasData))
	g.Expect(dns.questions()).To(BeEmpty())
}

// TestResolvConfAndNames: the wait asks for the names a stub resolver
// would try, from the pod's resolv.conf, and for the initial cluster's
// host names only.
func TestResolvConfAndNames(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "resolv.conf")
	g.Expect(os.WriteFile(path, []byte("# a pod's\nsearch db.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5 edns0\n"), 0o600)).To(Succeed())
	cfg, err := readResolvConf(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg).To(Equal(dnsConfig{servers: []string{"10.96.0.10:53"},
		search: []string{"db.svc.cluster.local", "svc.cluster.local", "cluster.local"}, ndots: 5}))

	g.Expect(cfg.fqdns(dnsM0)).To(Equal([]string{dnsM0 + ".",
		dnsM0 + ".db.svc.cluster.local.", dnsM0 + ".svc.cluster.local.", dnsM0 + ".cluster.local."}), "5 dots: as it is first")
	g.Expect(cfg.fqdns("main-0.main-peer")).To(Equal([]string{"main-0.main-peer.db.svc.cluster.local.",
		"main-0.main-peer.svc.cluster.local.", "main-0.main-peer.cluster.local.", "main-0.main-peer."}), "fewer dots: the search domains first")
	g.Expect(cfg.fqdns("x.example.")).To(Equal([]string{"x.example."}))

	g.Expect(os.WriteFile(path, []byte("search a\n"), 0o600)).To(Succeed())
	_, err = readResolvConf(path)
	g.Expect(err).To(MatchError(ContainSubstring("names no nameserver")))

	g.Expect(hostsOf("a=https://A.x:2380,b=https://10.0.0.1:2380,c=https://[fd00::1]:2380,d=https://a.x:2380,e=http://b.x:2380")).
		To(Equal([]string{"a.x", "b.x"}))
}
