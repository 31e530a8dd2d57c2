package etcdcluster

import (
	"context"
	"fmt"
	"net"

	"k8s.io/utils/ptr"

	"github.com/tend-dev/tend/internal/etcd"
)

// dialer connects to members at their pods' IPs, and to other addresses
// through DNS. The cluster DNS may deny that a new member's name exists for
// as long as it caches negative answers (30s by default): etcd asks for it
// as soon as the member is added, before its pod exists. The certificates
// are still checked against the members' names. It also lets a manager
// outside the cluster reach the members, where pod IPs are routed.
func dialer(ips map[string]string) func(context.Context, string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil {
			if ip, ok := ips[host]; ok {
				addr = net.JoinHostPort(ip, port)
			}
		}
		return d.DialContext(ctx, "tcp", addr)
	}
}

// connectMembers opens a client to the members whose pods have an
// address; nil, with no error, when none has one.
func (r *Reconciler) connectMembers(ctx context.Context, s *scope, data memberData) (Members, error) {
	c := s.cluster
	var endpoints []string
	for i := range int(ptr.Deref(s.sts.Spec.Replicas, 0)) {
		if name := memberName(c, i); data.ips[memberHost(c, name)] != "" {
			endpoints = append(endpoints, memberClientURL(c, name))
		}
	}
	if len(endpoints) == 0 {
		return nil, nil
	}
	callCtx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	// No password: with auth on, etcd takes the user from the client
	// certificate's common name, root.
	cli, err := r.Connect(callCtx, etcd.Config{Endpoints: endpoints, TLS: s.tls, Dial: dialer(data.ips), Gate: r.Gate})
	if err != nil {
		return nil, fmt.Errorf("connecting to etcd: %w", err)
	}
	return cli, nil
}
