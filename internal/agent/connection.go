package agent

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tend-dev/tend/internal/etcd"
)

// The files that the agents read, as the Job mounts them: the cluster's
// connection ConfigMap in one directory, its client certificate Secret in
// another. The names are those of internal/podspec's keys.
const (
	// ConnectionEndpointsFile holds the members' client URLs,
	// comma-separated.
	ConnectionEndpointsFile = "endpoints"
	// ConnectionCAFile is the CA that signed the members' serving
	// certificates.
	ConnectionCAFile = "ca.crt"
	// ClientCertFile, ClientKeyFile and ClientCAFile are the client
	// certificate Secret's keys (kubernetes.io/tls, plus ca.crt).
	ClientCertFile = "tls.crt"
	ClientKeyFile  = "tls.key"
	ClientCAFile   = "ca.crt"
)

// LoadConnection reads how to reach the live cluster from connectionDir and
// clientTLSDir. https:// endpoints get a TLS configuration that trusts the
// connection's CA (or, when it has none, the client Secret's) and presents
// the client certificate, whose common name etcd takes as the user when its
// auth is on. http:// endpoints need neither directory's certificates.
// Its errors wrap ErrInvalid.
func LoadConnection(connectionDir, clientTLSDir string) (etcd.Config, error) {
	raw, err := os.ReadFile(filepath.Join(connectionDir, ConnectionEndpointsFile))
	if err != nil {
		return etcd.Config{}, fmt.Errorf("%w: reading the cluster's endpoints: %w", ErrInvalid, err)
	}
	var cfg etcd.Config
	secure := false
	for ep := range strings.SplitSeq(strings.TrimSpace(string(raw)), ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			cfg.Endpoints = append(cfg.Endpoints, ep)
			secure = secure || strings.HasPrefix(ep, "https://")
		}
	}
	if len(cfg.Endpoints) == 0 {
		return etcd.Config{}, fmt.Errorf("%w: %s lists no endpoints", ErrInvalid, filepath.Join(connectionDir, ConnectionEndpointsFile))
	}
	if !secure {
		return cfg, nil
	}
	pool := x509.NewCertPool()
	caFile := filepath.Join(connectionDir, ConnectionCAFile)
	ca, err := os.ReadFile(caFile)
	if errors.Is(err, fs.ErrNotExist) {
		caFile = filepath.Join(clientTLSDir, ClientCAFile)
		ca, err = os.ReadFile(caFile)
	}
	if err != nil {
		return etcd.Config{}, fmt.Errorf("%w: reading the members' CA: %w", ErrInvalid, err)
	}
	if !pool.AppendCertsFromPEM(ca) {
		return etcd.Config{}, fmt.Errorf("%w: %s holds no PEM certificate", ErrInvalid, caFile)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(clientTLSDir, ClientCertFile), filepath.Join(clientTLSDir, ClientKeyFile))
	if err != nil {
		return etcd.Config{}, fmt.Errorf("%w: loading the client certificate from %s: %w", ErrInvalid, clientTLSDir, err)
	}
	cfg.TLS = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	return cfg, nil
}
