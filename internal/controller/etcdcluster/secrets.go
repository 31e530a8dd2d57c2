package etcdcluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/tend-dev/tend/internal/etcdnames"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcd"
)

// errTLSSecrets marks a Provided TLS Secret that is missing or incomplete:
// the user must fix it, and its message says how.
var errTLSSecrets = errors.New("invalid TLS Secret")

// reconcileCertificates makes sure the cluster's certificates exist and are
// current, and loads the client certificate Tend uses. In Auto mode Tend
// issues a CA once and server, peer and client certificates from it, and
// reissues each leaf at two thirds of its life; members pick the new files
// up from their mounted Secrets without a restart. In Provided mode it only
// checks the user's Secrets.
func (r *Reconciler) reconcileCertificates(ctx context.Context, s *scope) error {
	c := s.cluster
	if c.Spec.TLS.Mode != etcdv1alpha1.TLSProvided {
		if err := r.issueCertificates(ctx, s); err != nil {
			return err
		}
	}
	// The expiries go into the status only once every Secret was read.
	certs := s.obs.certificates
	s.obs.certificates = nil
	names := tlsSecretsOf(c)
	for _, name := range []string{names.Server, names.Peer, names.Client} {
		secret := &corev1.Secret{}
		// In Provided mode these are the user's Secrets, which the cache
		// does not hold: r.Client reads them from the apiserver
		// (manager.ReadThrough), on every pass.
		err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, secret)
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: Secret %s does not exist; create it with ca.crt, tls.crt and tls.key", errTLSSecrets, name)
		}
		if err != nil {
			return fmt.Errorf("reading Secret %s: %w", name, err)
		}
		for _, key := range []string{"ca.crt", corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
			if len(secret.Data[key]) == 0 {
				return fmt.Errorf("%w: Secret %s has no %s; it needs ca.crt, tls.crt and tls.key", errTLSSecrets, name, key)
			}
		}
		certs = append(certs, certificateOf(secret))
		if name != names.Client {
			continue
		}
		cfg, err := clientTLS(secret)
		if err != nil {
			return fmt.Errorf("%w: Secret %s: %w", errTLSSecrets, name, err)
		}
		if cn := cfg.Certificates[0].Leaf.Subject.CommonName; c.Spec.Auth.Enabled && cn != etcd.RootUser {
			return fmt.Errorf("%w: Secret %s holds a certificate for %q; with spec.auth.enabled it must be for %q: etcd takes the user from it, and Tend acts as root",
				errTLSSecrets, name, cn, etcd.RootUser)
		}
		s.tls = cfg
	}
	s.obs.certificates = certs
	return nil
}

// certificateOf says when the certificate in a TLS Secret's tls.crt
// expires; the zero time when it holds none that parses.
func certificateOf(secret *corev1.Secret) etcdv1alpha1.CertificateStatus {
	st := etcdv1alpha1.CertificateStatus{Secret: secret.Name}
	if block, _ := pem.Decode(secret.Data[corev1.TLSCertKey]); block != nil {
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
			st.NotAfter = metav1.NewTime(cert.NotAfter.UTC())
		}
	}
	return st
}

// clientTLS is the TLS configuration of a client certificate Secret.
func clientTLS(secret *corev1.Secret) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("reading the client certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secret.Data["ca.crt"]) {
		return nil, errors.New("ca.crt holds no PEM certificate")
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// issueCertificates is the Auto mode's part of reconcileCertificates.
func (r *Reconciler) issueCertificates(ctx context.Context, s *scope) error {
	c := s.cluster
	caSecret := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: caSecretName(c)}, caSecret)
	switch {
	case apierrors.IsNotFound(err):
		ca, err := newCA(c, s.now)
		if err != nil {
			return fmt.Errorf("creating the CA: %w", err)
		}
		caSecret = tlsSecret(c, caSecretName(c), ca, ca)
		if err := r.createOwned(ctx, c, caSecret); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("reading the CA Secret: %w", err)
	}
	ca := keyPair{cert: caSecret.Data[corev1.TLSCertKey], key: caSecret.Data[corev1.TLSPrivateKeyKey]}
	s.obs.certificates = append(s.obs.certificates, certificateOf(caSecret))
	if _, _, err := parse(ca); err != nil {
		// Replacing a CA would cut every member off from the others; only a
		// person can decide that.
		return fmt.Errorf("%w: the CA Secret %s is unreadable (%w); restore it. A new CA (delete the Secret) cuts the members off from each other until every member pod is restarted", errTLSSecrets, caSecretName(c), err)
	}
	leaves := []struct {
		name string
		kind leafKind
	}{{etcdnames.ServerSecretName(c), leafServer}, {etcdnames.PeerSecretName(c), leafPeer}, {etcdnames.ClientSecretName(c), leafClient}}
	// One Event for the certificates of a pass: Events that differ only in
	// their note are one series to the events library, which shows the
	// first note alone and writes the series again minutes later.
	var issued, renewed []string
	defer func() {
		if len(issued) > 0 {
			r.event(c, corev1.EventTypeNormal, "CertificatesIssued", "IssueCertificate", "Issued %s", inSecrets("certificate", issued))
		}
		if len(renewed) > 0 {
			r.event(c, corev1.EventTypeNormal, "CertificatesRenewed", "RenewCertificate", "Renewed %s", inSecrets("certificate", renewed))
		}
	}()
	for _, leaf := range leaves {
		current := &corev1.Secret{}
		err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: leaf.name}, current)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading Secret %s: %w", leaf.name, err)
		}
		exists := err == nil
		if exists && !needsRenewal(current, ca, s.now) {
			continue
		}
		kp, err := newLeaf(c, ca, leaf.kind, s.now)
		if err != nil {
			return fmt.Errorf("issuing %s: %w", leaf.name, err)
		}
		want := tlsSecret(c, leaf.name, kp, ca)
		if !exists {
			if err := r.createOwned(ctx, c, want); err != nil {
				return err
			}
			issued = append(issued, leaf.name)
			continue
		}
		current.Data = want.Data
		if err := r.Update(ctx, current); err != nil {
			return fmt.Errorf("renewing Secret %s: %w", leaf.name, err)
		}
		renewed = append(renewed, leaf.name)
	}
	return nil
}

// inSecrets says "a certificate in Secret a" or "certificates in Secrets
// a, b and c".
func inSecrets(what string, names []string) string {
	if len(names) == 1 {
		return fmt.Sprintf("a %s in Secret %s", what, names[0])
	}
	return fmt.Sprintf("%ss in Secrets %s and %s", what, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// reconcileRootSecret creates the root user's credentials when auth is on.
// The password is never changed afterwards: it is the Secret that users
// and the init Job read.
func (r *Reconciler) reconcileRootSecret(ctx context.Context, s *scope) error {
	c := s.cluster
	if !c.Spec.Auth.Enabled {
		return nil
	}
	secret := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: etcdnames.RootSecretName(c)}, secret)
	if apierrors.IsNotFound(err) {
		password, err := randomPassword()
		if err != nil {
			return err
		}
		secret = &corev1.Secret{
			ObjectMeta: meta(c, etcdnames.RootSecretName(c)),
			Type:       corev1.SecretTypeBasicAuth,
			Data:       map[string][]byte{rootUsernameKey: []byte("root"), rootPasswordKey: []byte(password)},
		}
		if err := r.createOwned(ctx, c, secret); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("reading Secret %s: %w", etcdnames.RootSecretName(c), err)
	}
	s.rootPassword = string(secret.Data[rootPasswordKey])
	if s.rootPassword == "" {
		return fmt.Errorf("the Secret %s has no %s; delete it and Tend makes a new one only if auth is not enabled yet in etcd", etcdnames.RootSecretName(c), rootPasswordKey)
	}
	return nil
}

func randomPassword() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating the root password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
