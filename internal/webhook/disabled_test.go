package webhook_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/testing/loopback"
)

// TestDisabledServesNothingAndLeavesTheCRDsAlone runs a manager as the
// second Tend on a cluster runs (--webhook-disabled), with the options
// that would otherwise rotate a certificate into a CRD of the test's own
// and its Secret: it turns ready without any certificate, listens on no
// webhook port, and writes neither the Secret nor the CRD.
func TestDisabledServesNothingAndLeavesTheCRDsAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	crds := crdClient(t)
	crd := conversionCRD(ns)
	crd.Name, crd.Spec.Group = "widgets.disabled.tend.dev", "disabled.tend.dev"
	g.Expect(crds.Create(ctx, crd)).To(Succeed())
	t.Cleanup(func() { _ = crds.Delete(context.Background(), crd) })
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tend-webhook-server-cert"}}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())

	probe, err := loopback.Addr()
	g.Expect(err).NotTo(HaveOccurred())
	port := loopback.TestPort(t)
	opts := manager.DefaultOptions()
	opts.MetricsAddr, opts.ProbeAddr = "0", probe
	opts.Webhook.Disabled = true
	// Were it not disabled, these would rotate a certificate into the
	// Secret and its CA into the CRD.
	opts.Webhook.Port = port
	opts.Webhook.CertDir = t.TempDir()
	opts.Webhook.Namespace = ns
	opts.Webhook.CRDs = []string{crd.Name}
	mgr, err := manager.New(env.Config, opts, nil)
	g.Expect(err).NotTo(HaveOccurred())
	mgrCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		NewWithT(t).Eventually(done).WithTimeout(time.Minute).Should(Receive(BeNil()))
	})

	// Ready with no certificate anywhere, and no webhook check to wait on.
	eventually(t, func(g Gomega) {
		body, err := loopback.Get("http://" + probe + "/readyz?verbose")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(body).To(ContainSubstring("[+]ping ok"))
		g.Expect(body).NotTo(ContainSubstring("webhook"))
	})
	_, err = net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	g.Expect(err).To(HaveOccurred(), "nothing listens on the webhook port")

	// A rotator would have filled the Secret and the CRD's caBundle within
	// moments of starting; they stay as they were.
	g.Consistently(func(g Gomega) {
		got := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(secret), got)).To(Succeed())
		g.Expect(got.Data).To(BeEmpty())
		g.Expect(got.ResourceVersion).To(Equal(secret.ResourceVersion))
		c := crd.DeepCopy()
		g.Expect(crds.Get(ctx, client.ObjectKeyFromObject(crd), c)).To(Succeed())
		g.Expect(c.Spec.Conversion.Webhook.ClientConfig.CABundle).To(BeEmpty())
		g.Expect(c.Generation).To(Equal(crd.Generation))
	}).WithTimeout(5 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}
