package etcd

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/testing/etcdserver"
)

// nowhere is an endpoint where nothing listens.
const nowhere = "http://127.0.0.1:9"

func TestNewRejects(t *testing.T) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "no endpoints", cfg: Config{}, wantErr: "no endpoints"},
		{name: "an endpoint without a scheme", cfg: Config{Endpoints: []string{"127.0.0.1:2379"}}, wantErr: `endpoint "127.0.0.1:2379"`},
		{name: "a host without a scheme", cfg: Config{Endpoints: []string{"localhost:2379"}}, wantErr: "must be http:// or https://"},
		{name: "an endpoint without a port", cfg: Config{Endpoints: []string{"http://127.0.0.1"}}, wantErr: "with a host and a port"},
		{name: "an endpoint of another scheme", cfg: Config{Endpoints: []string{"unix://etcd.sock:0"}}, wantErr: "must be http:// or https://"},
		{name: "an endpoint that does not parse", cfg: Config{Endpoints: []string{"http://[::1"}}, wantErr: `endpoint "http://[::1"`},
		{name: "mixed schemes", cfg: Config{Endpoints: []string{"http://127.0.0.1:1", "https://127.0.0.1:2"}, TLS: tlsConfig}, wantErr: "mix http:// and https://"},
		{name: "https without TLS", cfg: Config{Endpoints: []string{"https://127.0.0.1:2379"}}, wantErr: "need a TLS configuration"},
		{name: "TLS with http", cfg: Config{Endpoints: []string{"http://127.0.0.1:2379"}, TLS: tlsConfig}, wantErr: "the endpoints must be https://"},
		{name: "a username without a password", cfg: Config{Endpoints: []string{nowhere}, Username: "root"}, wantErr: "a username needs a password"},
		{name: "a password without a username", cfg: Config{Endpoints: []string{nowhere}, Password: "x"}, wantErr: "a username needs a password"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := New(callCtx(t), tt.cfg)
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			g.Expect(err).To(MatchError(ErrInvalid))
			g.Expect(Classify(err)).To(Equal(Terminal))
		})
	}
}

// TestCallsRequireDeadline shows that New and every call refuse a context
// without a deadline at once. The endpoint is dead: a call that tried it
// would wait for it forever, and the test would time out.
func TestCallsRequireDeadline(t *testing.T) {
	g := NewWithT(t)
	_, err := New(context.Background(), Config{Endpoints: []string{nowhere}})
	g.Expect(err).To(MatchError(ErrNoDeadline))
	g.Expect(Classify(err)).To(Equal(Terminal))

	c := newClient(t, Config{Endpoints: []string{nowhere}})
	ctx := context.Background()
	calls := map[string]func() error{
		"Members":     func() error { _, err := c.Members(ctx); return err },
		"Status":      func() error { _, err := c.Status(ctx); return err },
		"AddLearner":  func() error { _, err := c.AddLearner(ctx, "http://127.0.0.1:2380"); return err },
		"Promote":     func() error { return c.Promote(ctx, 1) },
		"Remove":      func() error { return c.Remove(ctx, 1) },
		"MoveLeader":  func() error { return c.MoveLeader(ctx, 1) },
		"Snapshot":    func() error { _, err := c.Snapshot(ctx, &bytes.Buffer{}); return err },
		"AuthEnabled": func() error { _, err := c.AuthEnabled(ctx); return err },
		"EnableAuth":  func() error { return c.EnableAuth(ctx, "root-password") },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := call()
			g.Expect(err).To(MatchError(ErrNoDeadline))
			g.Expect(Classify(err)).To(Equal(Terminal))
		})
	}
}

// TestCallsEndWithTheirDeadline shows that a call to a cluster that is not
// there returns when its deadline passes, says why, and is Transient.
func TestCallsEndWithTheirDeadline(t *testing.T) {
	g := NewWithT(t)
	c := newClient(t, Config{Endpoints: []string{nowhere}})
	_, err := c.Members(timeoutCtx(t, 500*time.Millisecond))
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	g.Expect(err).To(MatchError(ContainSubstring("listing members: context deadline exceeded (the last attempt: ")))
	g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
	g.Expect(Classify(err)).To(Equal(Transient))
}

func TestConfigRedactsThePassword(t *testing.T) {
	cfg := Config{Endpoints: []string{nowhere}, Username: "root", Password: "s3cr3t-value"}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		t.Run(format, func(t *testing.T) {
			g := NewWithT(t)
			out := fmt.Sprintf(format, cfg)
			g.Expect(out).NotTo(ContainSubstring("s3cr3t"))
			g.Expect(out).To(ContainSubstring("root"))
			g.Expect(out).To(ContainSubstring("<redacted>"))
		})
	}
}

// TestTLS shows a client with the cluster's client certificate at work, and
// that a wrong CA or a missing client certificate fails every call with an
// error that says so and is Terminal.
func TestTLS(t *testing.T) {
	t.Parallel()
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 2, TLS: true})

	t.Run("the cluster's CA and client certificate", func(t *testing.T) {
		g := NewWithT(t)
		c := clientOf(t, cluster)
		members, err := c.Members(callCtx(t))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(members).To(HaveLen(2))
		for _, m := range members {
			g.Expect(m.ClientURLs).To(HaveExactElements(HavePrefix("https://127.0.0.1:")))
		}
		allHealthy(t, c, 2)
	})

	t.Run("another CA", func(t *testing.T) {
		g := NewWithT(t)
		other, err := etcdserver.NewPKI(t.TempDir())
		g.Expect(err).NotTo(HaveOccurred())
		c := newClient(t, Config{Endpoints: cluster.ClientURLs(), TLS: other.ClientTLS()})
		_, err = c.Members(timeoutCtx(t, 2*time.Second))
		g.Expect(err).To(MatchError(ErrCertificate))
		g.Expect(err).To(MatchError(ContainSubstring("x509: certificate signed by unknown authority")))
		g.Expect(Classify(err)).To(Equal(Terminal))

		_, err = c.Status(timeoutCtx(t, 2*time.Second))
		g.Expect(err).To(MatchError(ErrCertificate))
	})

	// Under TLS 1.3 the server refuses a missing client certificate after
	// the client has finished its handshake: the client reads the alert
	// ("certificate required") or only finds the connection closed, as the
	// race between its first write and the alert goes.
	t.Run("no client certificate", func(t *testing.T) {
		g := NewWithT(t)
		c := newClient(t, Config{Endpoints: cluster.ClientURLs(), TLS: &tls.Config{RootCAs: cluster.PKI.CertPool(), MinVersion: tls.VersionTLS12}})
		_, err := c.Members(timeoutCtx(t, 2*time.Second))
		g.Expect(err).To(MatchError(context.DeadlineExceeded))
		g.Expect(err).To(Or(
			MatchError(ContainSubstring("tls: certificate required")),
			MatchError(ContainSubstring("broken pipe")),
			MatchError(ContainSubstring("connection reset by peer")),
			MatchError(ContainSubstring("EOF"))))
	})
}

// TestAuth shows a client that authenticates, and that wrong or missing
// credentials are Terminal, with etcd's auth on.
func TestAuth(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{})
	setup := clientOf(t, cluster)
	ctx := callCtx(t)
	for _, user := range []struct{ name, password string }{{"root", "root-password"}, {"viewer", "viewer-password"}} {
		_, err := setup.cli.UserAdd(ctx, user.name, user.password)
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err := setup.cli.UserGrantRole(ctx, "root", "root")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = setup.cli.AuthEnable(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	auth := func(user, password string) Config {
		return Config{Endpoints: cluster.ClientURLs(), Username: user, Password: password}
	}

	t.Run("a wrong password fails New", func(t *testing.T) {
		g := NewWithT(t)
		_, err := New(callCtx(t), auth("root", "wrong"))
		g.Expect(err).To(MatchError(ErrAuth))
		g.Expect(err).To(MatchError(ContainSubstring("authentication failed")))
		g.Expect(Classify(err)).To(Equal(Terminal))
	})

	t.Run("root may do everything", func(t *testing.T) {
		g := NewWithT(t)
		c := newClient(t, auth("root", "root-password"))
		_, err := c.Members(callCtx(t))
		g.Expect(err).NotTo(HaveOccurred())
		allHealthy(t, c, 1)
		_, err = c.Snapshot(callCtx(t), &bytes.Buffer{})
		g.Expect(err).NotTo(HaveOccurred())
	})

	// A user that may not read the health key still proves the member
	// healthy: etcd refuses it after the read index.
	t.Run("a user without permissions", func(t *testing.T) {
		g := NewWithT(t)
		c := newClient(t, auth("viewer", "viewer-password"))
		allHealthy(t, c, 1)
		_, err := c.Snapshot(callCtx(t), &bytes.Buffer{})
		g.Expect(err).To(MatchError(ErrAuth))
		g.Expect(err).To(MatchError(ContainSubstring("permission denied")))
		g.Expect(Classify(err)).To(Equal(Terminal))
	})

	t.Run("no credentials", func(t *testing.T) {
		g := NewWithT(t)
		c := newClient(t, Config{Endpoints: cluster.ClientURLs()})
		err := c.Remove(callCtx(t), 1)
		g.Expect(err).To(MatchError(ErrAuth), "error: %v", err)
		g.Expect(Classify(err)).To(Equal(Terminal))
		g.Expect(errors.Is(err, ErrMemberNotFound)).To(BeFalse())
	})
}

// TestMemberURLOfAnotherScheme shows that a member that advertises another
// scheme than the client's endpoints is not called, and its status says why.
func TestMemberURLOfAnotherScheme(t *testing.T) {
	g := NewWithT(t)
	c := newClient(t, Config{Endpoints: []string{nowhere}})
	s := c.memberStatus(callCtx(t), Member{ID: 1, Name: "m0", ClientURLs: []string{"https://127.0.0.1:9"}})
	g.Expect(s.Healthy).To(BeFalse())
	g.Expect(s.Answered).To(BeFalse())
	g.Expect(s.Err).To(MatchError(ErrInvalid))
	g.Expect(s.Err).To(MatchError(ContainSubstring(`client URL "https://127.0.0.1:9" is not http://`)))
}
