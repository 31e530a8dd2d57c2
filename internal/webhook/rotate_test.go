package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	appsv1beta1 "github.com/tend-dev/tend/api/apps/v1beta1"
	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/testing/loopback"
	"github.com/tend-dev/tend/internal/webhook"
)

// TestRotateMode runs a second manager, with the certificate rotated as in
// a cluster, from manager.DefaultOptions but for what envtest lacks. Its CA
// goes into a CRD of the test's own, so the PodSet CRD keeps envtest's CA
// for the other tests; and the apiserver cannot reach a Service here, so
// the test calls the webhook itself, as the apiserver would. envtest has no
// kubelet either: the test copies the Secret into the certificate
// directory, as the kubelet does with a Secret volume.
//
// cert-controller names its controller, and controller names are unique
// per process: this is the only test that may start the rotator.
func TestRotateMode(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	crds := crdClient(t)
	crd := conversionCRD(ns)
	g.Expect(crds.Create(ctx, crd)).To(Succeed())
	t.Cleanup(func() { _ = crds.Delete(context.Background(), crd) })
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tend-webhook-server-cert"}}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())

	probe, err := loopback.Addr()
	g.Expect(err).NotTo(HaveOccurred())
	port := loopback.TestPort(t)
	opts := manager.DefaultOptions()
	opts.MetricsAddr, opts.ProbeAddr = "0", probe
	opts.Webhook.Port = port
	opts.Webhook.CertDir = t.TempDir()
	opts.Webhook.Namespace = ns
	opts.Webhook.CRDs = []string{crd.Name}
	g.Expect(opts.Webhook.CertMode).To(Equal(webhook.CertModeRotate), "the default")
	mgr, err := manager.New(env.Config, opts, nil)
	g.Expect(err).NotTo(HaveOccurred())
	mgrCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		NewWithT(t).Eventually(done).WithTimeout(time.Minute).Should(Receive(BeNil()))
	})

	// The rotator fills the Secret: a CA, and a certificate from it for the
	// webhook Service.
	eventually(t, func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
		g.Expect(secret.Data).To(HaveKey("ca.crt"))
		g.Expect(secret.Data).To(HaveKey("tls.crt"))
		g.Expect(secret.Data).To(HaveKey("tls.key"))
	})
	host := "tend-webhook-service." + ns + ".svc"
	cas := x509.NewCertPool()
	g.Expect(cas.AppendCertsFromPEM(secret.Data["ca.crt"])).To(BeTrue())
	pair, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
	g.Expect(err).NotTo(HaveOccurred())
	_, err = pair.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: cas})
	g.Expect(err).NotTo(HaveOccurred())

	// Until the certificate is mounted, the webhook neither serves nor is
	// ready.
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	_, err = net.Dial("tcp", addr)
	g.Expect(err).To(HaveOccurred())
	_, err = loopback.Get("http://" + probe + "/readyz")
	g.Expect(err).To(MatchError(ContainSubstring("[-]webhook failed")))

	// The kubelet mounts the Secret.
	for _, name := range []string{"tls.key", "tls.crt"} {
		g.Expect(os.WriteFile(filepath.Join(opts.Webhook.CertDir, name), secret.Data[name], 0o600)).To(Succeed())
	}

	// The CA goes into the CRD's conversion webhook, the manager turns
	// ready, and the webhook serves the rotated certificate.
	eventually(t, func(g Gomega) {
		g.Expect(crds.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
		g.Expect(crd.Spec.Conversion.Webhook.ClientConfig.CABundle).To(Equal(secret.Data["ca.crt"]))
	})
	eventually(t, func(g Gomega) {
		_, err := loopback.Get("http://" + probe + "/readyz")
		g.Expect(err).NotTo(HaveOccurred())
	})
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: cas, ServerName: host, NextProtos: []string{"h2", "http/1.1"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conn.ConnectionState().NegotiatedProtocol).To(Equal("http/1.1"), "no HTTP/2")
	g.Expect(conn.Close()).To(Succeed())
	review := convert(t, addr, &tls.Config{RootCAs: cas, ServerName: host}, &appsv1alpha1.PodSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: appsv1alpha1.GroupVersion.String(), Kind: "PodSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec:       appsv1alpha1.PodSetSpec{LeaderElection: true, Template: template("db")},
	})
	g.Expect(review.Response.Result.Status).To(Equal(metav1.StatusSuccess), review.Response.Result.Message)
	g.Expect(review.Response.ConvertedObjects).To(HaveLen(1))
	converted := &appsv1beta1.PodSet{}
	g.Expect(json.Unmarshal(review.Response.ConvertedObjects[0].Raw, converted)).To(Succeed())
	g.Expect(converted.APIVersion).To(Equal(appsv1beta1.GroupVersion.String()))
	g.Expect(converted.Spec.Leader).To(Equal(enabled))
}

// conversionCRD is a CRD with a conversion webhook through the Service
// that the rotator makes the certificate for. It has one version, so the
// apiserver never calls the webhook.
func conversionCRD(ns string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.rotation.tend.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "rotation.tend.dev",
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList",
			},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
			Conversion: &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ConversionReviewVersions: []string{"v1"},
					ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
						Namespace: ns, Name: "tend-webhook-service", Path: ptr.To("/convert"), Port: ptr.To[int32](443),
					}},
				},
			},
		},
	}
}

// convert posts a ConversionReview of obj to v1beta1 to the webhook at addr,
// as the apiserver does.
func convert(t *testing.T, addr string, tlsConfig *tls.Config, obj runtime.Object) *apiextensionsv1.ConversionReview {
	t.Helper()
	g := NewWithT(t)
	raw, err := json.Marshal(obj)
	g.Expect(err).NotTo(HaveOccurred())
	body, err := json.Marshal(&apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request: &apiextensionsv1.ConversionRequest{
			UID: "1", DesiredAPIVersion: appsv1beta1.GroupVersion.String(), Objects: []runtime.RawExtension{{Raw: raw}},
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	resp, err := c.Post(fmt.Sprintf("https://%s/convert", addr), "application/json", bytes.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	review := &apiextensionsv1.ConversionReview{}
	g.Expect(json.NewDecoder(resp.Body).Decode(review)).To(Succeed())
	g.Expect(review.Response).NotTo(BeNil())
	return review
}

func eventually(t *testing.T, assertion func(g Gomega)) {
	t.Helper()
	NewWithT(t).Eventually(assertion).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
}
