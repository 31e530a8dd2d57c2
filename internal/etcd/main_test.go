package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/testing/etcdserver"
)

// callCtx is the context of a test's calls: every call needs a deadline.
func callCtx(t *testing.T) context.Context {
	return timeoutCtx(t, 30*time.Second)
}

func timeoutCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newClient returns a client on cfg, closed when the test ends.
func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(callCtx(t), cfg)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// clientOf returns a client on every member of cluster, with the cluster's
// client certificate when it speaks TLS.
func clientOf(t *testing.T, cluster *etcdserver.Cluster, endpoints ...string) *Client {
	t.Helper()
	if endpoints == nil {
		endpoints = cluster.ClientURLs()
	}
	cfg := Config{Endpoints: endpoints}
	if cluster.PKI != nil {
		cfg.TLS = cluster.PKI.ClientTLS()
	}
	return newClient(t, cfg)
}

// put writes n keys through c's underlying client, for data to replicate
// and snapshot.
func put(t *testing.T, c *Client, n int) {
	t.Helper()
	g := NewWithT(t)
	for i := range n {
		_, err := c.cli.Put(callCtx(t), fmt.Sprintf("key-%04d", i), fmt.Sprintf("value-%d", i))
		g.Expect(err).NotTo(HaveOccurred())
	}
}

// storageVersionWritten waits until every member at endpoints reports its
// storage version. A v3.6 member writes it into its database only after the
// cluster's version is decided and its first term is in the database, and
// tries again every 4 s (etcd's storage version monitor): a snapshot taken
// before then carries no version.
func storageVersionWritten(t *testing.T, c *Client, endpoints ...string) {
	t.Helper()
	for _, endpoint := range endpoints {
		NewWithT(t).Eventually(func(g Gomega) {
			st, err := c.cli.Status(callCtx(t), endpoint)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.StorageVersion).NotTo(BeEmpty(), "the storage version of %s", endpoint)
		}).WithTimeout(15 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	}
}

// statusOf returns the status of member id.
func statusOf(g Gomega, statuses []MemberStatus, id MemberID) MemberStatus {
	s, ok := index(statuses)[id]
	g.Expect(ok).To(BeTrue(), "no status for member %s", id)
	return s
}

// named returns the member named name.
func named(g Gomega, members []Member, name string) Member {
	for _, m := range members {
		if m.Name == name {
			return m
		}
	}
	g.Expect(members).To(ContainElement(HaveField("Name", name)))
	return Member{}
}

// allHealthy waits until Status reports n healthy members, and returns
// them. Start returns once every member serves /readyz, but a member that
// was just killed, restarted or promoted takes a moment.
func allHealthy(t *testing.T, c *Client, n int) []MemberStatus {
	t.Helper()
	var statuses []MemberStatus
	NewWithT(t).Eventually(func(g Gomega) {
		var err error
		statuses, err = c.Status(timeoutCtx(t, 5*time.Second))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(statuses).To(HaveLen(n))
		for _, s := range statuses {
			g.Expect(s.Err).NotTo(HaveOccurred(), "member %s", s.Member)
			g.Expect(s.Healthy).To(BeTrue())
		}
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	return statuses
}
