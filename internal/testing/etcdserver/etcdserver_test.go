package etcdserver

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// get sends GET path to m with cfg as the client's TLS configuration, and
// returns the status code or the error.
func get(m *Member, cfg *tls.Config, path string) (int, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, TLSClientConfig: cfg}}
	resp, err := c.Get(m.ClientURL + path)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestStartKillRestart shows that Start leaves a serving cluster of the size
// asked for, that Kill really stops a member, and that Restart brings it back
// on its data.
func TestStartKillRestart(t *testing.T) {
	g := NewWithT(t)
	c := Start(t, Options{Members: 2})
	members := c.Members()
	g.Expect(members).To(HaveLen(2))
	g.Expect(c.ClientURLs()).To(Equal([]string{members[0].ClientURL, members[1].ClientURL}))
	for _, m := range members {
		g.Expect(m.Running()).To(BeTrue(), m.Name)
		g.Expect(get(m, nil, "/readyz")).To(Equal(http.StatusOK), m.Name)
		g.Expect(strings.HasPrefix(m.ClientURL, "http://127.0.0.1:")).To(BeTrue(), m.ClientURL)
	}

	m := members[1]
	pid := m.proc.cmd.Process.Pid
	m.Kill()
	g.Expect(m.Running()).To(BeFalse())
	g.Expect(syscall.Kill(pid, 0)).To(MatchError(syscall.ESRCH), "the process is gone")
	_, err := get(m, nil, "/livez")
	g.Expect(err).To(MatchError(ContainSubstring("connection refused")))

	m.Restart(t)
	g.Expect(m.Running()).To(BeTrue())
	g.Expect(get(m, nil, "/livez")).To(Equal(http.StatusOK))
	// With both members back, the cluster has its quorum again.
	g.Eventually(func() (int, error) { return get(members[0], nil, "/readyz") }).
		WithTimeout(30 * time.Second).Should(Equal(http.StatusOK))

	// A frozen member accepts connections and answers nothing.
	m.Freeze(t)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.ClientURL+"/livez", nil)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err == nil {
		resp.Body.Close()
	}
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	g.Expect(m.Running()).To(BeTrue())
	m.Thaw()
	g.Expect(get(m, nil, "/livez")).To(Equal(http.StatusOK))
}

// TestStartTLS shows that a TLS cluster serves only clients that present a
// certificate of its CA, and that a client trusting another CA refuses it.
func TestStartTLS(t *testing.T) {
	g := NewWithT(t)
	c := Start(t, Options{TLS: true})
	m := c.Members()[0]
	g.Expect(strings.HasPrefix(m.ClientURL, "https://127.0.0.1:")).To(BeTrue(), m.ClientURL)
	g.Expect(strings.HasPrefix(m.PeerURL, "https://127.0.0.1:")).To(BeTrue(), m.PeerURL)

	g.Expect(get(m, c.PKI.ClientTLS(), "/readyz")).To(Equal(http.StatusOK))

	noCert := &tls.Config{RootCAs: c.PKI.CertPool(), MinVersion: tls.VersionTLS12}
	_, err := get(m, noCert, "/readyz")
	g.Expect(err).To(MatchError(ContainSubstring("certificate required")))

	other, err := NewPKI(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	_, err = get(m, other.ClientTLS(), "/readyz")
	g.Expect(err).To(MatchError(ContainSubstring("certificate signed by unknown authority")))
}

// TestStartFailsLoudly shows that a missing or broken etcd is an error that
// says what is wrong, never a skip.
func TestStartFailsLoudly(t *testing.T) {
	empty := t.TempDir()
	broken := t.TempDir()
	for _, name := range []string{"etcd", "etcdutl"} {
		script := "#!/bin/sh\necho 'etcd: cannot open data dir' >&2\nexit 3\n"
		NewWithT(t).Expect(os.WriteFile(filepath.Join(broken, name), []byte(script), 0o755)).To(Succeed())
	}
	tests := []struct {
		name    string
		dir     string
		wantErr []string
	}{
		{name: "missing", dir: empty, wantErr: []string{filepath.Join(empty, "etcd"), "no such file", DirEnv}},
		{name: "exits at once", dir: broken, wantErr: []string{"etcd member m0 exited before serving /readyz", "exit status 3", "cannot open data dir"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			t.Setenv(DirEnv, tt.dir)
			c, err := newCluster(t.TempDir(), Options{})
			if err == nil {
				err = c.start(1)
			}
			g.Expect(err).To(HaveOccurred())
			for _, want := range tt.wantErr {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
		})
	}
}

func TestReservePort(t *testing.T) {
	g := NewWithT(t)
	seen := map[int]bool{}
	for range 50 {
		p, err := reservePort()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(seen[p]).To(BeFalse(), "port %d handed out twice", p)
		g.Expect(p).To(BeNumerically("<", ephemeralLow()))
		seen[p] = true
	}
}
