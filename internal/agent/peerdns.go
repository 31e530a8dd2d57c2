package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// A new cluster's members start within milliseconds of each other, and
// each etcd dials its peers by name at once. A name is in the cluster DNS
// only once the EndpointSlice controller has published the peer's pod
// address, which takes longer; a lookup before that is answered NXDOMAIN,
// and the cluster DNS caches that answer (CoreDNS: 30 s in the default
// Corefile). etcd then cannot reach that peer until the cached answer
// expires, whatever happens meanwhile. So the join check of a new member
// waits, for a bounded time, until the DNS has every member's name, and
// asks in a way that leaves nothing cached for etcd to find: not for the
// name's address, but for a record type from the private-use range
// (RFC 6895), a new one each attempt. A DNS server that has the name
// answers NOERROR with no records (CoreDNS's kubernetes plugin does so for
// any type it does not serve), one that has not answers NXDOMAIN; caches
// key their answers by name and type, so neither answer is ever handed to
// etcd's A and AAAA lookups, nor to this check's next attempt.

const (
	// publishWait bounds the wait for the members' names: beyond it the
	// members did not start together, and etcd starts as it would have
	// without the check.
	publishWait = 10 * time.Second
	// publishInterval is the pause between two rounds of questions.
	publishInterval = 200 * time.Millisecond
	// dnsTimeout bounds one question to one server.
	dnsTimeout = time.Second
	// The private-use record types (RFC 6895, section 3.1): no server
	// serves them, so each is a question that no cache has answered yet.
	privateTypeFirst = 65280
	privateTypeLast  = 65534
	// resolvConfPath is where a pod finds its DNS servers.
	resolvConfPath = "/etc/resolv.conf"
)

// errUndecidable: the DNS server answered neither NOERROR nor NXDOMAIN,
// so it cannot tell whether it has the name; the wait ends.
var errUndecidable = errors.New("the DNS server answers neither NOERROR nor NXDOMAIN to a private-use record type")

// dnsConfig is what the wait reads of resolv.conf.
type dnsConfig struct {
	// servers are host:port.
	servers []string
	search  []string
	ndots   int
}

// readResolvConf reads the nameserver, search and ndots settings of a
// resolv.conf file.
func readResolvConf(path string) (dnsConfig, error) {
	cfg := dnsConfig{ndots: 1}
	f, err := os.Open(path)
	if err != nil {
		return cfg, err
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") || strings.HasPrefix(fields[0], ";") {
			continue
		}
		switch fields[0] {
		case "nameserver":
			cfg.servers = append(cfg.servers, net.JoinHostPort(fields[1], "53"))
		case "search", "domain":
			cfg.search = fields[1:]
		case "options":
			for _, o := range fields[1:] {
				if v, ok := strings.CutPrefix(o, "ndots:"); ok {
					if n, err := strconv.Atoi(v); err == nil {
						cfg.ndots = min(max(n, 0), 15)
					}
				}
			}
		}
	}
	if err := s.Err(); err != nil {
		return cfg, err
	}
	if len(cfg.servers) == 0 {
		return cfg, fmt.Errorf("%s names no nameserver", path)
	}
	return cfg, nil
}

// fqdns are the absolute names that a lookup of name tries, as a stub
// resolver tries them: with each search domain, and as it is.
func (c dnsConfig) fqdns(name string) []string {
	if strings.HasSuffix(name, ".") {
		return []string{name}
	}
	var out []string
	for _, s := range c.search {
		out = append(out, name+"."+strings.TrimSuffix(s, ".")+".")
	}
	if strings.Count(name, ".") >= c.ndots {
		return append([]string{name + "."}, out...)
	}
	return append(out, name+".")
}

// hostsOf returns the host names in the initial cluster's peer URLs, each
// once, in order; IP addresses need no lookup and are left out.
func hostsOf(initialCluster string) []string {
	var hosts []string
	for entry := range strings.SplitSeq(initialCluster, ",") {
		_, raw, _ := strings.Cut(strings.TrimSpace(entry), "=")
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" || net.ParseIP(u.Hostname()) != nil {
			continue
		}
		if h := strings.ToLower(u.Hostname()); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// dnsProber asks DNS servers whether they have names, leaving nothing in
// their caches that an address lookup would find.
type dnsProber struct {
	cfg     dnsConfig
	timeout time.Duration
}

// has tells whether the DNS has name under any of the absolute names a
// lookup would try.
func (p dnsProber) has(ctx context.Context, name string) (bool, error) {
	for _, fqdn := range p.cfg.fqdns(name) {
		q, err := dnsmessage.NewName(fqdn)
		if err != nil {
			return false, fmt.Errorf("%q is not a DNS name: %w", name, err)
		}
		rcode, err := p.askAny(ctx, q)
		if err != nil {
			return false, err
		}
		switch rcode {
		case dnsmessage.RCodeSuccess:
			return true, nil
		case dnsmessage.RCodeNameError:
		default:
			return false, fmt.Errorf("%w: %s for %s", errUndecidable, rcode, fqdn)
		}
	}
	return false, nil
}

// askAny asks the servers in turn until one answers.
func (p dnsProber) askAny(ctx context.Context, q dnsmessage.Name) (dnsmessage.RCode, error) {
	var errs []error
	for _, server := range p.cfg.servers {
		rcode, err := p.ask(ctx, server, q)
		if err == nil {
			return rcode, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", server, err))
	}
	return 0, errors.Join(errs...)
}

// ask sends one question for q, of a private-use type chosen at random, to
// server and returns the answer's RCODE.
func (p dnsProber) ask(ctx context.Context, server string, q dnsmessage.Name) (dnsmessage.RCode, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", server)
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close() }()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	id := uint16(rand.Uint32())
	qtype := dnsmessage.Type(privateTypeFirst + rand.IntN(privateTypeLast-privateTypeFirst+1))
	msg := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: id, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: q, Type: qtype, Class: dnsmessage.ClassINET}},
	}
	packet, err := msg.Pack()
	if err != nil {
		return 0, err
	}
	if _, err := conn.Write(packet); err != nil {
		return 0, err
	}
	buf := make([]byte, 1232)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return 0, err
		}
		var parser dnsmessage.Parser
		h, err := parser.Start(buf[:n])
		if err != nil || h.ID != id || !h.Response {
			continue // not the answer to this question: wait for it
		}
		answered, err := parser.Question()
		if err != nil || answered.Type != qtype || !strings.EqualFold(answered.Name.String(), q.String()) {
			continue
		}
		return h.RCode, nil
	}
}

// waitPublished waits until the DNS has the name of every peer URL in
// the initial cluster, this member's included (its peers dial it too), or
// until o.PublishWait has passed. It returns the names the DNS did not
// have by then, none when it had all. It never fails: a DNS that cannot
// be read or cannot tell ends the wait, as does the context, and etcd then
// starts as it would have without it.
func waitPublished(ctx context.Context, o JoinCheckOptions) []string {
	hosts := hostsOf(o.InitialCluster)
	if o.PublishWait < 0 || len(hosts) == 0 {
		return nil
	}
	cfg := dnsConfig{servers: o.DNSServers, ndots: 1}
	if len(cfg.servers) == 0 {
		var err error
		if cfg, err = readResolvConf(resolvConfPath); err != nil {
			o.Log.Info("Not waiting for the members' names: the DNS configuration cannot be read", "reason", err.Error())
			return hosts
		}
	}
	p := dnsProber{cfg: cfg, timeout: dnsTimeout}
	ctx, cancel := context.WithTimeout(ctx, o.PublishWait)
	defer cancel()
	start := o.Clock.Now()
	missing := hosts
	o.Log.Info("A new cluster: waiting until the DNS has every member's name", "names", missing, "for", o.PublishWait.String())
	for {
		var still []string
		for _, h := range missing {
			ok, err := p.has(ctx, h)
			if errors.Is(err, errUndecidable) {
				o.Log.Info("The DNS cannot tell whether it has the members' names: starting", "reason", err.Error())
				return missing
			}
			if err != nil {
				o.Log.Info("The DNS did not answer", "name", h, "reason", err.Error())
			}
			if !ok {
				still = append(still, h)
			}
		}
		missing = still
		if len(missing) == 0 {
			o.Log.Info("The DNS has every member's name", "after", o.Clock.Since(start).Round(time.Millisecond).String())
			return nil
		}
		select {
		case <-ctx.Done():
			o.Log.Info("Starting although the DNS lacks some members' names", "names", missing, "after", o.Clock.Since(start).Round(time.Millisecond).String())
			return missing
		case <-o.Clock.After(publishInterval):
		}
	}
}
