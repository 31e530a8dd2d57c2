package etcdserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is a throw-away certificate authority and the certificates that a
// cluster and its clients use. Every certificate is valid for an hour from
// its creation, for 127.0.0.1 and localhost.
type PKI struct {
	// CAFile is the CA certificate, for --trusted-ca-file and
	// --peer-trusted-ca-file.
	CAFile string
	// ServerCertFile and ServerKeyFile serve the client port and the peer
	// port, and authenticate a member to its peers: the certificate allows
	// both server and client authentication.
	ServerCertFile, ServerKeyFile string
	// ClientCertFile and ClientKeyFile authenticate a client. The
	// certificate's common name is "client"; ClientTLSAs issues others.
	ClientCertFile, ClientKeyFile string

	pool   *x509.CertPool
	client tls.Certificate
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// NewPKI writes a fresh CA, a server and peer certificate, and a client
// certificate into dir. Two PKIs never trust each other.
func NewPKI(dir string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "tend-test-etcd-ca"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p := &PKI{CAFile: filepath.Join(dir, "ca.crt"), pool: x509.NewCertPool(), ca: ca, caKey: caKey}
	p.pool.AddCert(ca)
	if err := writePEM(p.CAFile, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}

	issue := func(name string, usage []x509.ExtKeyUsage) (certFile, keyFile string, err error) {
		der, key, err := p.issue(name, usage)
		if err != nil {
			return "", "", err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return "", "", err
		}
		certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return "", "", err
		}
		return certFile, keyFile, writePEM(keyFile, "EC PRIVATE KEY", keyDER)
	}
	if p.ServerCertFile, p.ServerKeyFile, err = issue("server", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}); err != nil {
		return nil, fmt.Errorf("issuing the server certificate: %w", err)
	}
	if p.ClientCertFile, p.ClientKeyFile, err = issue("client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}); err != nil {
		return nil, fmt.Errorf("issuing the client certificate: %w", err)
	}
	if p.client, err = tls.LoadX509KeyPair(p.ClientCertFile, p.ClientKeyFile); err != nil {
		return nil, err
	}
	return p, nil
}

// ClientTLS returns a configuration that trusts this CA and presents the
// client certificate. Each call returns a new value that the caller may
// change.
func (p *PKI) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: p.pool, Certificates: []tls.Certificate{p.client}, MinVersion: tls.VersionTLS12}
}

// ClientTLSAs returns a configuration like ClientTLS's, with a new client
// certificate whose common name is commonName, not "client": with
// --client-cert-auth, etcd takes the common name as the user name once its
// auth is enabled.
func (p *PKI) ClientTLSAs(commonName string) (*tls.Config, error) {
	der, key, err := p.issue(commonName, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	if err != nil {
		return nil, fmt.Errorf("issuing a client certificate for %q: %w", commonName, err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return &tls.Config{RootCAs: p.pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// issue makes a certificate for 127.0.0.1 and localhost, with commonName and
// usage, signed by the CA.
func (p *PKI) issue(commonName string, usage []x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		return nil, nil, err
	}
	return der, key, nil
}

// CertPool returns the pool that holds this CA alone.
func (p *PKI) CertPool() *x509.CertPool { return p.pool.Clone() }

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}
