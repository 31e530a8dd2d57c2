package etcdcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// Lifetimes of the certificates Tend issues. A leaf is renewed once two
// thirds of its life has passed, so a renewal missed for days is harmless.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 365 * 24 * time.Hour
)

// keyPair is a certificate and its private key, PEM-encoded.
type keyPair struct {
	cert, key []byte
}

// leafKind is the use of a leaf certificate.
type leafKind int

const (
	leafServer leafKind = iota // members, to clients
	leafPeer                   // members, to each other
	leafClient                 // Tend and applications, to members
)

// newCA creates a self-signed CA for c.
func newCA(c *etcdv1alpha1.EtcdCluster, now time.Time) (keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: fmt.Sprintf("tend etcd CA %s/%s", c.Namespace, c.Name)},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(tmpl, nil)
}

// newLeaf issues a certificate of kind for c, signed by ca.
func newLeaf(c *etcdv1alpha1.EtcdCluster, ca keyPair, kind leafKind, now time.Time) (keyPair, error) {
	tmpl := &x509.Certificate{
		NotBefore: now.Add(-time.Hour),
		NotAfter:  now.Add(leafLifetime),
		KeyUsage:  x509.KeyUsageDigitalSignature,
	}
	wildcard := fmt.Sprintf("*.%s.%s.svc", peerServiceName(c), c.Namespace)
	switch kind {
	case leafServer:
		tmpl.Subject = pkix.Name{CommonName: c.Name + "-server"}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.DNSNames = []string{
			wildcard, wildcard + ".cluster.local",
			clientServiceName(c), fmt.Sprintf("%s.%s", clientServiceName(c), c.Namespace),
			fmt.Sprintf("%s.%s.svc", clientServiceName(c), c.Namespace),
			fmt.Sprintf("%s.%s.svc.cluster.local", clientServiceName(c), c.Namespace),
			"localhost",
		}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	case leafPeer:
		tmpl.Subject = pkix.Name{CommonName: c.Name + "-peer"}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.DNSNames = []string{wildcard, wildcard + ".cluster.local"}
	case leafClient:
		// With auth on, etcd takes the user from the common name.
		tmpl.Subject = pkix.Name{CommonName: "root"}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	return sign(tmpl, &ca)
}

// sign creates a key and a certificate from tmpl, signed by ca, or
// self-signed when ca is nil.
func sign(tmpl *x509.Certificate, ca *keyPair) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return keyPair{}, err
	}
	tmpl.SerialNumber = serial
	parent, signer := tmpl, any(key)
	if ca != nil {
		caCert, caKey, err := parse(*ca)
		if err != nil {
			return keyPair{}, fmt.Errorf("reading the CA: %w", err)
		}
		parent, signer = caCert, caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return keyPair{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// parse decodes a key pair.
func parse(kp keyPair) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, _ := pem.Decode(kp.cert)
	kb, _ := pem.Decode(kp.key)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// needsRenewal reports whether the leaf in secret must be (re)issued: it
// is missing or unreadable, was not signed by ca, or has lived two thirds
// of its life.
func needsRenewal(secret *corev1.Secret, ca keyPair, now time.Time) bool {
	if secret == nil {
		return true
	}
	cert, _, err := parse(keyPair{cert: secret.Data[corev1.TLSCertKey], key: secret.Data[corev1.TLSPrivateKeyKey]})
	if err != nil {
		return true
	}
	if !slices.Equal(secret.Data["ca.crt"], ca.cert) {
		return true
	}
	caCert, _, err := parse(ca)
	if err != nil || cert.CheckSignatureFrom(caCert) != nil {
		return true
	}
	renewAt := cert.NotBefore.Add(cert.NotAfter.Sub(cert.NotBefore) * 2 / 3)
	return !now.Before(renewAt)
}

// tlsSecret holds a leaf and the CA that signed it, in the
// kubernetes.io/tls layout plus ca.crt.
func tlsSecret(c *etcdv1alpha1.EtcdCluster, name string, leaf, ca keyPair) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: meta(c, name),
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       leaf.cert,
			corev1.TLSPrivateKeyKey: leaf.key,
			"ca.crt":                ca.cert,
		},
	}
}
