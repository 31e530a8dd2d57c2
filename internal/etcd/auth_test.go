package etcd

import (
	"bytes"
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tend-dev/tend/internal/testing/etcdserver"
)

func TestEnableAuthRejectsBadPasswords(t *testing.T) {
	c := newClient(t, Config{Endpoints: []string{nowhere}})
	tests := []struct {
		name, password, wantErr string
	}{
		{name: "empty", password: "", wantErr: "the root password is empty"},
		{name: "longer than bcrypt takes", password: strings.Repeat("x", 73), wantErr: "longer than 72 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			// The endpoint is dead: only a refusal before sending returns
			// before the deadline with ErrInvalid.
			err := c.EnableAuth(callCtx(t), tt.password)
			g.Expect(err).To(MatchError(ErrInvalid))
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			g.Expect(Classify(err)).To(Equal(Terminal))
		})
	}
}

// TestEnableAuth enables auth as the controller does, with a client whose
// certificate's common name is root, and shows that this client goes on
// working, that root's password works, and who else may do what.
func TestEnableAuth(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{TLS: true})
	rootCert, err := cluster.PKI.ClientTLSAs("root")
	g.Expect(err).NotTo(HaveOccurred())
	c := newClient(t, Config{Endpoints: cluster.ClientURLs(), TLS: rootCert})
	ctx := callCtx(t)
	const password = "root-password"

	enabled, err := c.AuthEnabled(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(enabled).To(BeFalse())

	g.Expect(c.EnableAuth(ctx, password)).To(Succeed())
	enabled, err = c.AuthEnabled(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(enabled).To(BeTrue())

	// The same client goes on working, as root: a snapshot needs root.
	allHealthy(t, c, 1)
	_, err = c.Snapshot(ctx, &bytes.Buffer{})
	g.Expect(err).NotTo(HaveOccurred())

	// Again, as every reconcile pass does: nothing to do. The password stays
	// the first one.
	g.Expect(c.EnableAuth(ctx, password)).To(Succeed())
	g.Expect(c.EnableAuth(ctx, "another-password")).To(Succeed())

	// The cluster's usual client certificate has the common name "client",
	// which is no user.
	tests := []struct {
		name               string
		username, password string
		wantNewErr         bool
		wantRoot           bool
	}{
		{name: "root's password", username: RootUser, password: password, wantRoot: true},
		{name: "a wrong password", username: RootUser, password: "another-password", wantNewErr: true},
		{name: "a certificate of another user and no password"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cfg := Config{Endpoints: cluster.ClientURLs(), TLS: cluster.PKI.ClientTLS(), Username: tt.username, Password: tt.password}
			other, err := New(callCtx(t), cfg)
			if tt.wantNewErr {
				g.Expect(err).To(MatchError(ErrAuth))
				g.Expect(err).To(MatchError(ContainSubstring("authentication failed")))
				g.Expect(Classify(err)).To(Equal(Terminal))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			t.Cleanup(func() { _ = other.Close() })

			enabled, err := other.AuthEnabled(callCtx(t))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(enabled).To(BeTrue())
			g.Expect(other.EnableAuth(callCtx(t), password)).To(Succeed())
			_, err = other.Snapshot(callCtx(t), &bytes.Buffer{})
			if tt.wantRoot {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ErrAuth))
			g.Expect(Classify(err)).To(Equal(Terminal))
		})
	}
}

// TestEnableAuthCompletesAPartialSetUp starts EnableAuth from what an
// earlier pass that failed half-way, or a person with etcdctl, left behind:
// it completes the set-up, and root's password becomes the one given.
func TestEnableAuthCompletesAPartialSetUp(t *testing.T) {
	t.Parallel()
	const password, oldPassword = "root-password", "old-password"
	tests := []struct {
		name  string
		setUp func(ctx context.Context, cli *clientv3.Client) error
		// noPassword: root was added without a password, which etcd then
		// never sets.
		noPassword bool
	}{
		{
			name: "root exists with another password",
			setUp: func(ctx context.Context, cli *clientv3.Client) error {
				_, err := cli.UserAdd(ctx, RootUser, oldPassword)
				return err
			},
		},
		{
			name: "root exists with the root role",
			setUp: func(ctx context.Context, cli *clientv3.Client) error {
				if _, err := cli.UserAdd(ctx, RootUser, oldPassword); err != nil {
					return err
				}
				_, err := cli.UserGrantRole(ctx, RootUser, rootRole)
				return err
			},
		},
		{
			name: "the root role exists as a role of its own",
			setUp: func(ctx context.Context, cli *clientv3.Client) error {
				_, err := cli.RoleAdd(ctx, rootRole)
				return err
			},
		},
		{
			name: "root exists without a password",
			setUp: func(ctx context.Context, cli *clientv3.Client) error {
				_, err := cli.UserAddWithOptions(ctx, RootUser, "", &clientv3.UserAddOptions{NoPassword: true})
				return err
			},
			noPassword: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			cluster := etcdserver.Start(t, etcdserver.Options{})
			// A client without credentials: it loses its rights with auth on.
			c := clientOf(t, cluster)
			ctx := callCtx(t)
			g.Expect(tt.setUp(ctx, c.cli)).To(Succeed())

			g.Expect(c.EnableAuth(ctx, password)).To(Succeed())
			enabled, err := c.AuthEnabled(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(enabled).To(BeTrue())
			g.Expect(c.EnableAuth(ctx, password)).To(Succeed())
			_, err = c.Snapshot(ctx, &bytes.Buffer{})
			g.Expect(err).To(MatchError(ErrAuth))

			_, err = New(callCtx(t), Config{Endpoints: cluster.ClientURLs(), Username: RootUser, Password: oldPassword})
			g.Expect(err).To(MatchError(ErrAuth))
			root, err := New(callCtx(t), Config{Endpoints: cluster.ClientURLs(), Username: RootUser, Password: password})
			if tt.noPassword {
				g.Expect(err).To(MatchError(ErrAuth))
				g.Expect(err).To(MatchError(ContainSubstring("password was given for no password user")))
				g.Expect(Classify(err)).To(Equal(Terminal))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			t.Cleanup(func() { _ = root.Close() })
			_, err = root.Snapshot(callCtx(t), &bytes.Buffer{})
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
}
