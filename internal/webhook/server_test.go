package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/tend-dev/tend/internal/testing/loopback"
)

// servingCert writes a certificate for localhost into a new directory and
// returns the directory and the pool that trusts the certificate.
func servingCert(t *testing.T) (string, *x509.CertPool) {
	t.Helper()
	g := NewWithT(t)
	cr := &rotator.CertRotator{CAName: "test-ca", DNSName: "localhost",
		ExtKeyUsages: &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	now := time.Now()
	ca, err := cr.CreateCACert(now.Add(-time.Hour), now.Add(time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	cert, key, err := cr.CreateCertPEM(ca, now.Add(-time.Hour), now.Add(time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	writeCert(t, dir, cert, key)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return dir, pool
}

func writeCert(t *testing.T, dir string, cert, key []byte) {
	t.Helper()
	NewWithT(t).Expect(os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600)).To(Succeed())
	NewWithT(t).Expect(os.WriteFile(filepath.Join(dir, "tls.crt"), cert, 0o600)).To(Succeed())
}

func TestGatedServerServesOnlyOnceTheCertificateIsReady(t *testing.T) {
	g := NewWithT(t)
	dir, pool := servingCert(t)
	port := loopback.TestPort(t)
	ready, waiting := make(chan struct{}), make(chan struct{})
	s := &gatedServer{
		Server: webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir}),
		certReady: func(ctx context.Context) error {
			close(waiting)
			return channelClosed(ready)(ctx)
		},
		waitingFor: "the test's certificate",
	}
	s.Register("/ping", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "pong") }))
	started := s.StartedChecker()

	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	<-waiting
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	_, err := net.Dial("tcp", addr)
	g.Expect(err).To(HaveOccurred(), "nothing listens before the certificate is ready")
	g.Expect(started(nil)).To(MatchError("waiting for the test's certificate"))

	close(ready)
	g.Eventually(func() error { return started(nil) }).WithTimeout(30 * time.Second).Should(Succeed())
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
	resp, err := c.Get("https://" + addr + "/ping")
	g.Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(string(body)).To(Equal("pong"))

	stop()
	g.Eventually(done).WithTimeout(time.Minute).Should(Receive(BeNil()))
}

func TestGatedServerStopsCleanlyWhileWaiting(t *testing.T) {
	s := &gatedServer{
		Server:     webhook.NewServer(webhook.Options{Port: loopback.TestPort(t), CertDir: t.TempDir()}),
		certReady:  channelClosed(make(chan struct{})),
		waitingFor: "a certificate that never comes",
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	stop()
	NewWithT(t).Eventually(done).WithTimeout(time.Minute).Should(Receive(BeNil()))
}

func TestCertFilesExist(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- certFilesExist(dir)(ctx) }()

	// A key alone is not enough; the certificate completes it.
	g.Expect(os.WriteFile(filepath.Join(dir, "tls.key"), []byte("key"), 0o600)).To(Succeed())
	g.Consistently(done).WithTimeout(2 * certFilesPoll).ShouldNot(Receive())
	g.Expect(os.WriteFile(filepath.Join(dir, "tls.crt"), []byte("crt"), 0o600)).To(Succeed())
	g.Eventually(done).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
	stop()

	// Without the files it waits until it is stopped.
	ctx, stop = context.WithCancel(t.Context())
	stop()
	g.Expect(certFilesExist(t.TempDir())(ctx)).To(MatchError(ContainSubstring("context canceled")))
}
