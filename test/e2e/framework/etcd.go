//go:build e2e

package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TLSFromSecret returns the TLS configuration of a client that presents the
// certificate of s, a kubernetes.io/tls Secret with ca.crt, and trusts that
// CA alone.
func TLSFromSecret(s *corev1.Secret) (*tls.Config, error) {
	for _, key := range []string{"ca.crt", corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		if len(s.Data[key]) == 0 {
			return nil, fmt.Errorf("the Secret %s/%s has no %s", s.Namespace, s.Name, key)
		}
	}
	cert, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("the Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.Data["ca.crt"]) {
		return nil, fmt.Errorf("the Secret %s/%s: ca.crt holds no PEM certificate", s.Namespace, s.Name)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}

// SecretTLS reads Secret ns/name and returns TLSFromSecret's configuration.
// The test fails at once when the Secret is missing or malformed.
func (c *Cluster) SecretTLS(t testing.TB, ns, name string) *tls.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := &corev1.Secret{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatalf("reading the Secret %s/%s: %v", ns, name, err)
	}
	cfg, err := TLSFromSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// NewEtcdClient returns an etcd client for endpoints. Endpoints are named
// as clients in the cluster name them (https://<name>-client.<ns>.svc:2379),
// so that TLS checks the servers' certificates against those names. This
// machine cannot resolve cluster DNS names, but it reaches a Service's
// ClusterIP (through kube-proxy) and a pod's IP (routed to the node's
// bridge): the client dials each host at the address that hosts maps it to,
// and any other host as it is.
//
// A tls.Config's ServerName cannot stand in for the mapping: gRPC replaces
// it with each address's authority, which the etcd client sets to the
// endpoint's host.
//
// The client connects on its first call; give every call a deadline, and
// close the client. Its own logs are discarded: the caller reports the
// errors that matter.
func NewEtcdClient(tlsConfig *tls.Config, hosts map[string]string, endpoints ...string) (*clientv3.Client, error) {
	hosts = maps.Clone(hosts)
	var dialer net.Dialer
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil && hosts[host] != "" {
			addr = net.JoinHostPort(hosts[host], port)
		}
		return dialer.DialContext(ctx, "tcp", addr)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		TLS:         tlsConfig,
		DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(dial)},
		// A connection through a ClusterIP to a pod that is gone hangs
		// rather than fails: keepalives find it out. etcd refuses pings
		// more often than every 5s.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("creating an etcd client for %v: %w", endpoints, err)
	}
	return cli, nil
}

// EtcdClient is NewEtcdClient for a test: it fails the test at once when
// the client cannot be made, and closes the client when the test ends.
func (c *Cluster) EtcdClient(t testing.TB, tlsConfig *tls.Config, hosts map[string]string, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := NewEtcdClient(tlsConfig, hosts, endpoints...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}
