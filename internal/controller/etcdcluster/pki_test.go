package etcdcluster

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

func TestPKI(t *testing.T) {
	g := NewWithT(t)
	c := testCluster(nil)
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	ca, err := newCA(c, now)
	g.Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(ca.cert)).To(BeTrue())

	verify := func(kp keyPair, name string, usage x509.ExtKeyUsage) error {
		b, _ := pem.Decode(kp.cert)
		cert, err := x509.ParseCertificate(b.Bytes)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: name, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}})
		return err
	}
	server, err := newLeaf(c, ca, leafServer, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(verify(server, "main-1.main-peer.db.svc", x509.ExtKeyUsageServerAuth)).To(Succeed())
	g.Expect(verify(server, "main-client.db.svc", x509.ExtKeyUsageServerAuth)).To(Succeed())
	g.Expect(verify(server, "main-client.other.svc", x509.ExtKeyUsageServerAuth)).NotTo(Succeed())

	peer, err := newLeaf(c, ca, leafPeer, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(verify(peer, "main-0.main-peer.db.svc", x509.ExtKeyUsageServerAuth)).To(Succeed())
	g.Expect(verify(peer, "main-0.main-peer.db.svc", x509.ExtKeyUsageClientAuth)).To(Succeed())

	client, err := newLeaf(c, ca, leafClient, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(verify(client, "", x509.ExtKeyUsageClientAuth)).To(Succeed())
	g.Expect(verify(client, "", x509.ExtKeyUsageServerAuth)).NotTo(Succeed())

	// Renewal.
	secret := tlsSecret(c, "main-server-tls", server, ca)
	g.Expect(secret.Type).To(Equal(corev1.SecretTypeTLS))
	g.Expect(needsRenewal(secret, ca, now)).To(BeFalse())
	g.Expect(needsRenewal(secret, ca, now.Add(leafLifetime/2))).To(BeFalse())
	g.Expect(needsRenewal(secret, ca, now.Add(leafLifetime*2/3))).To(BeTrue(), "two thirds of its life has passed")
	g.Expect(needsRenewal(nil, ca, now)).To(BeTrue())
	otherCA, err := newCA(c, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(needsRenewal(secret, otherCA, now)).To(BeTrue(), "signed by another CA")
	broken := secret.DeepCopy()
	broken.Data[corev1.TLSCertKey] = []byte("garbage")
	g.Expect(needsRenewal(broken, ca, now)).To(BeTrue())
}
