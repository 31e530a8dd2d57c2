package etcd

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func b10Env(sts *appsv1.StatefulSet) map[string]string {
	env := map[string]string{}
	for _, e := range sts.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	return env
}

func TestB10AnchorStatefulSet(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		tls           bool
		scheme        string
		skipSAN       string
	}{
		{"v3.5 with TLS", "v3.5.35", true, "https", "ETCD_EXPERIMENTAL_PEER_SKIP_CLIENT_SAN_VERIFICATION"},
		{"v3.6 with TLS: the setting renamed", "v3.6.16", true, "https", "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION"},
		{"plain http", "v3.6.16", false, "http", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sts := b10AnchorStatefulSet("ns1", "img:"+tc.version, tc.version, tc.tls)
			g.Expect(sts.Name).To(Equal(b10Cluster))
			g.Expect(sts.Spec.UpdateStrategy.Type).To(Equal(appsv1.RollingUpdateStatefulSetStrategyType), "the anchor: the StatefulSet controller rolls")
			g.Expect(sts.Spec.PodManagementPolicy).To(Equal(appsv1.ParallelPodManagement))
			g.Expect(*sts.Spec.Replicas).To(BeEquivalentTo(b10Members))
			g.Expect(sts.Spec.ServiceName).To(Equal("b10-peer"))
			g.Expect(sts.Spec.Selector.MatchLabels).To(Equal(sts.Spec.Template.Labels))
			g.Expect(sts.Spec.Template.Labels).NotTo(HaveKey("etcd.tend.dev/cluster"), "none of Tend's labels")
			c := sts.Spec.Template.Spec.Containers[0]
			g.Expect(c.Image).To(Equal("img:" + tc.version))
			g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
			g.Expect(c.ReadinessProbe.HTTPGet.Port.IntVal).To(BeEquivalentTo(b10MetricsPort))
			g.Expect(c.ReadinessProbe.PeriodSeconds).To(BeEquivalentTo(5))
			g.Expect(*sts.Spec.Template.Spec.TerminationGracePeriodSeconds).To(BeEquivalentTo(30))

			env := b10Env(sts)
			g.Expect(env).To(HaveKeyWithValue("ETCD_INITIAL_CLUSTER",
				"b10-0="+tc.scheme+"://b10-0.b10-peer.ns1.svc.cluster.local:2380,"+
					"b10-1="+tc.scheme+"://b10-1.b10-peer.ns1.svc.cluster.local:2380,"+
					"b10-2="+tc.scheme+"://b10-2.b10-peer.ns1.svc.cluster.local:2380"))
			g.Expect(env).To(HaveKeyWithValue("ETCD_ADVERTISE_CLIENT_URLS", tc.scheme+"://$(POD_NAME).b10-peer.ns1.svc.cluster.local:2379"))
			g.Expect(env).To(HaveKeyWithValue("ETCD_LISTEN_METRICS_URLS", "http://0.0.0.0:2381"))
			g.Expect(env).NotTo(HaveKey("ETCD_ELECTION_TIMEOUT"), "etcd's defaults, as Tend's members")
			if tc.skipSAN == "" {
				g.Expect(env).NotTo(HaveKey("ETCD_CLIENT_CERT_AUTH"))
				g.Expect(sts.Spec.Template.Spec.Volumes).To(BeEmpty())
				return
			}
			g.Expect(env).To(HaveKeyWithValue(tc.skipSAN, "true"))
			g.Expect(env).To(HaveKeyWithValue("ETCD_CLIENT_CERT_AUTH", "true"))
			g.Expect(env).To(HaveKeyWithValue("ETCD_PEER_CLIENT_CERT_AUTH", "true"))
			g.Expect(sts.Spec.Template.Spec.Volumes).To(HaveLen(2))
		})
	}
}

func TestB10AnchorPeerService(t *testing.T) {
	g := NewWithT(t)
	svc := b10AnchorPeerServiceObject("ns1")
	g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
	g.Expect(svc.Spec.PublishNotReadyAddresses).To(BeTrue())
	g.Expect(svc.Spec.Selector).To(Equal(b10AnchorLabels()))
}

func TestB10AnchorTLSSecrets(t *testing.T) {
	g := NewWithT(t)
	now := time.Now()
	secrets, err := b10AnchorTLSSecrets("ns1", now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(secrets).To(HaveLen(3))
	byName := map[string]*corev1.Secret{}
	for _, s := range secrets {
		byName[s.Name] = s
		g.Expect(s.Type).To(Equal(corev1.SecretTypeTLS))
		_, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
		g.Expect(err).NotTo(HaveOccurred(), s.Name)
	}
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(byName[b10AnchorServerSecret].Data["ca.crt"])).To(BeTrue())
	cert := func(name string) *x509.Certificate {
		block, _ := pem.Decode(byName[name].Data[corev1.TLSCertKey])
		c, err := x509.ParseCertificate(block.Bytes)
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	for _, name := range []string{b10AnchorServerSecret, b10AnchorPeerSecret} {
		_, err := cert(name).Verify(x509.VerifyOptions{Roots: roots, DNSName: b10MemberHost("ns1", "b10-2"), CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		g.Expect(err).NotTo(HaveOccurred(), name+" serves a member's name")
	}
	_, err = cert(b10AnchorPeerSecret).Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	g.Expect(err).NotTo(HaveOccurred(), "a peer is a client of the others")
	_, err = cert(b10AnchorClientSecret).Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cert(b10AnchorServerSecret).Verify(x509.VerifyOptions{Roots: roots, DNSName: b10MemberHost("ns2", "b10-2"), CurrentTime: now})
	g.Expect(err).To(HaveOccurred(), "another namespace's name")
}

func TestB10MemberHosts(t *testing.T) {
	g := NewWithT(t)
	g.Expect(b10MemberOfHost("ns1", b10MemberHost("ns1", "b10-1"))).To(Equal("b10-1"))
	g.Expect(b10MemberOfHost("ns1", b10MemberHost("ns2", "b10-1"))).To(BeEmpty())
	g.Expect(b10MemberOfHost("ns1", "b10-client.ns1.svc")).To(BeEmpty())
	g.Expect(b10ClientEndpoints("ns1", true)).To(Equal([]string{
		"https://b10-0.b10-peer.ns1.svc.cluster.local:2379",
		"https://b10-1.b10-peer.ns1.svc.cluster.local:2379",
		"https://b10-2.b10-peer.ns1.svc.cluster.local:2379",
	}))
	g.Expect(b10ClientEndpoints("ns1", false)[0]).To(HavePrefix("http://"))
	g.Expect(b10Minor("v3.6.16")).To(Equal(6))
	g.Expect(b10Minor("v3")).To(Equal(0))
}
