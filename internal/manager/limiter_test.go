package manager_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/testenv"
)

// TestControllersShareOneBucket builds a manager with a client-side limit
// on a real apiserver and empties its bucket: then a request of any
// resource, through the manager's client, waits for a token. With a bucket
// per resource, as controller-runtime would make, a request of a resource
// not used yet would go through at once.
func TestControllersShareOneBucket(t *testing.T) {
	g := NewWithT(t)
	env := testenv.New()
	g.Expect(env.Start()).To(Succeed())
	t.Cleanup(func() { g.Expect(env.Stop()).To(Succeed()) })
	ns := env.Namespace(t)

	opts := env.ManagerOptions()
	// A token every 1000s: none comes back during the test.
	opts.QPS, opts.Burst = 0.001, 20
	mgr, err := manager.New(env.Config, opts, nil)
	g.Expect(err).NotTo(HaveOccurred())
	limiter := mgr.GetConfig().RateLimiter
	g.Expect(limiter).NotTo(BeNil(), "the manager's config has no shared limiter")

	// The bucket serves a first request (and the discovery it needs).
	ctx := t.Context()
	g.Expect(mgr.GetAPIReader().List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))).To(Succeed())
	for limiter.TryAccept() {
	}
	// Empty now; Secrets were never asked for.
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err = mgr.GetAPIReader().List(short, &corev1.SecretList{}, client.InNamespace(ns))
	g.Expect(err).To(MatchError(ContainSubstring("rate")), "a request of another resource did not wait for the shared bucket")

	// Without a limit, nothing is shared and nothing waits.
	opts.QPS = -1
	mgr, err = manager.New(env.Config, opts, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mgr.GetConfig().RateLimiter).To(BeNil())
	g.Expect(mgr.GetAPIReader().List(ctx, &corev1.SecretList{}, client.InNamespace(ns))).To(Succeed())
}
