package etcdcluster

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

const wait = 30 * time.Second

func newCluster(ns, name string, mutate func(*etcdv1alpha1.EtcdClusterSpec)) *etcdv1alpha1.EtcdCluster {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if mutate != nil {
		mutate(&c.Spec)
	}
	return c
}

func getCluster(g Gomega, c *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.EtcdCluster {
	got := &etcdv1alpha1.EtcdCluster{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(c), got)).To(Succeed())
	return got
}

func condition(c *etcdv1alpha1.EtcdCluster, t string) metav1.Condition {
	if cond := apimeta.FindStatusCondition(c.Status.Conditions, t); cond != nil {
		return *cond
	}
	return metav1.Condition{}
}

// ownedBy checks that obj is controlled by c, so the garbage collector
// deletes it with c.
func ownedBy(g Gomega, obj client.Object, c *etcdv1alpha1.EtcdCluster) {
	ref := metav1.GetControllerOf(obj)
	g.Expect(ref).NotTo(BeNil(), "%T %s has no controller", obj, obj.GetName())
	g.Expect(ref.UID).To(Equal(c.UID))
	g.Expect(obj.GetLabels()).To(HaveKeyWithValue(LabelCluster, c.Name))
}

// kstatusOf is what kstatus (the wait of Helm and Flux) says of obj now.
func kstatusOf(g Gomega, obj client.Object) kstatus.Status {
	st, _, err := env.KStatus(context.Background(), obj)
	g.Expect(err).NotTo(HaveOccurred())
	return st
}

func TestCreateMakesEverythingAndReportsBootstrapping(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := newCluster(ns, "kv", nil)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())

	// Each TLS Secret's expiry, as its certificate says.
	var expiries []string
	expiriesOf := func(certs []etcdv1alpha1.CertificateStatus) []string {
		var out []string
		for _, c := range certs {
			out = append(out, c.Secret+" "+c.NotAfter.UTC().Format(time.RFC3339))
		}
		return out
	}
	for _, name := range []string{"kv-ca", "kv-server-tls", "kv-peer-tls", "kv-client-tls"} {
		secret := &corev1.Secret{}
		g.Eventually(func() error {
			return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, secret)
		}, wait).Should(Succeed(), name)
		ownedBy(g, secret, c)
		g.Expect(secret.Type).To(Equal(corev1.SecretTypeTLS))
		g.Expect(secret.Data).To(HaveKey("ca.crt"))
		block, _ := pem.Decode(secret.Data[corev1.TLSCertKey])
		g.Expect(block).NotTo(BeNil())
		cert, err := x509.ParseCertificate(block.Bytes)
		g.Expect(err).NotTo(HaveOccurred())
		expiries = append(expiries, name+" "+cert.NotAfter.UTC().Format(time.RFC3339))
	}
	for _, name := range []string{"kv-peer", "kv-client"} {
		svc := &corev1.Service{}
		g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc) }, wait).Should(Succeed())
		ownedBy(g, svc, c)
	}
	pdb := &policyv1.PodDisruptionBudget{}
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kv"}, pdb) }, wait).Should(Succeed())
	ownedBy(g, pdb, c)
	g.Expect(pdb.Spec.MinAvailable.IntValue()).To(Equal(2))

	sts := &appsv1.StatefulSet{}
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kv"}, sts) }, wait).Should(Succeed())
	ownedBy(g, sts, c)
	g.Expect(*sts.Spec.Replicas).To(Equal(int32(3)))
	g.Expect(envOf(sts)).To(HaveKeyWithValue("ETCD_INITIAL_CLUSTER_STATE", "new"))
	g.Expect(sts.Annotations).To(HaveKey(annotationTemplateHash))

	g.Eventually(func(g Gomega) {
		got := getCluster(g, c)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(condition(got, etcdv1alpha1.ConditionAvailable).Reason).To(Equal(etcdv1alpha1.ReasonBootstrapping))
		g.Expect(condition(got, etcdv1alpha1.ConditionAvailable).Message).To(ContainSubstring("no member pod has an IP address yet"))
		g.Expect(condition(got, etcdv1alpha1.ConditionProgressing).Reason).To(Equal(etcdv1alpha1.ReasonCreating))
		g.Expect(condition(got, etcdv1alpha1.ConditionDegraded).Reason).To(Equal(etcdv1alpha1.ReasonAsExpected))
		g.Expect(got.Status.Phase).To(Equal(etcdv1alpha1.PhaseCreating))
		g.Expect(condition(got, etcdv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(condition(got, etcdv1alpha1.ConditionReconciling).Reason).To(Equal(etcdv1alpha1.ReasonCreating))
		g.Expect(kstatusOf(g, got)).To(Equal(kstatus.InProgressStatus))
		g.Expect(got.Status.ClientEndpoint).To(Equal("https://kv-client." + ns + ".svc:2379"))
		g.Expect(got.Status.Selector).To(Equal("app.kubernetes.io/name=etcd,etcd.tend.dev/cluster=kv"))
		g.Expect(expiriesOf(got.Status.Certificates)).To(Equal(expiries))
	}, wait).Should(Succeed())

	// No init Job before a quorum answers: it would only fail. The passes
	// go on (the cluster requeues while no member answers), so watch a
	// while rather than look once; roll_test.go's clusters, whose members
	// answer, get their Job.
	g.Consistently(func(g Gomega) {
		var jobs batchv1.JobList
		g.Expect(env.Client.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
		g.Expect(jobs.Items).To(BeEmpty())
		g.Expect(condition(getCluster(g, c), etcdv1alpha1.ConditionAvailable).Reason).To(Equal(etcdv1alpha1.ReasonBootstrapping))
	}, 3*requeueUnreachable/2).Should(Succeed())
}

func TestAuthMakesARootSecretOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := newCluster(ns, "secure", func(s *etcdv1alpha1.EtcdClusterSpec) { s.Auth.Enabled = true })
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())

	secret := &corev1.Secret{}
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "secure-root"}, secret)
	}, wait).Should(Succeed())
	ownedBy(g, secret, c)
	g.Expect(string(secret.Data["username"])).To(Equal("root"))
	password := string(secret.Data["password"])
	g.Expect(len(password)).To(BeNumerically(">=", 24))

	// Later passes keep it.
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Replicas = ptr.To[int32](5)
	g.Expect(env.Client.Patch(ctx, c, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := getCluster(g, c)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}, wait).Should(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
	g.Expect(string(secret.Data["password"])).To(Equal(password))
}

func TestEvenReplicasAreAWarning(t *testing.T) {
	g := NewWithT(t)
	c := newCluster(env.Namespace(t), "even", func(s *etcdv1alpha1.EtcdClusterSpec) { s.Replicas = ptr.To[int32](4) })
	g.Expect(env.Client.Create(context.Background(), c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		d := condition(getCluster(g, c), etcdv1alpha1.ConditionDegraded)
		g.Expect(d.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(d.Reason).To(Equal(etcdv1alpha1.ReasonEvenMembers))
		g.Expect(d.Message).To(ContainSubstring("4 members tolerate 1 failures, as 3 do"))
	}, wait).Should(Succeed())
}

func TestProvidedTLSWaitsForTheUsersSecrets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := newCluster(ns, "byo", func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.TLS = etcdv1alpha1.TLS{Mode: etcdv1alpha1.TLSProvided, Secrets: &etcdv1alpha1.TLSSecrets{Server: "my-server", Peer: "my-peer", Client: "my-client"}}
	})
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		d := condition(getCluster(g, c), etcdv1alpha1.ConditionDegraded)
		g.Expect(d.Reason).To(Equal(etcdv1alpha1.ReasonInvalidTLSSecrets))
		g.Expect(d.Message).To(ContainSubstring("Secret my-server does not exist"))
		got := getCluster(g, c)
		g.Expect(condition(got, etcdv1alpha1.ConditionStalled).Reason).To(Equal(etcdv1alpha1.ReasonInvalidTLSSecrets))
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(kstatusOf(g, got)).To(Equal(kstatus.FailedStatus))
	}, wait).Should(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "byo"}, &appsv1.StatefulSet{})).NotTo(Succeed(),
		"no member starts without its certificates")

	// The user's Secrets, made here with Tend's own PKI code, without
	// Tend's labels: the manager does not cache them, and reads them live.
	ca, err := newCA(c, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	for name, kind := range map[string]leafKind{"my-server": leafServer, "my-peer": leafPeer, "my-client": leafClient} {
		leaf, err := newLeaf(c, ca, kind, time.Now())
		g.Expect(err).NotTo(HaveOccurred())
		secret := tlsSecret(c, name, leaf, ca)
		secret.Labels = nil
		g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	}
	// The Secrets' events start a pass: the fix is seen without waiting
	// for the next health check.
	sts := &appsv1.StatefulSet{}
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "byo"}, sts) }, 10*time.Second).Should(Succeed())
	g.Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.Secret.SecretName", "my-server")))
	g.Eventually(func(g Gomega) {
		got := getCluster(g, c)
		g.Expect(condition(got, etcdv1alpha1.ConditionDegraded).Reason).To(Equal(etcdv1alpha1.ReasonAsExpected))
		g.Expect(condition(got, etcdv1alpha1.ConditionStalled).Type).To(BeEmpty(), "fixed: no longer stalled")
		g.Expect(kstatusOf(g, got)).To(Equal(kstatus.InProgressStatus))
	}, wait).Should(Succeed())
	for _, name := range []string{"byo-ca", "byo-server-tls", "byo-peer-tls", "byo-client-tls"} {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Tend issues nothing in Provided mode, but %s: %v", name, err)
	}

	// A change to a Secret that Tend does not cache still starts a pass
	// (through the metadata watch), which reads it and says what is wrong.
	bad := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "my-client"}, bad)).To(Succeed())
	delete(bad.Data, "ca.crt")
	g.Expect(env.Client.Update(ctx, bad)).To(Succeed())
	g.Eventually(func(g Gomega) {
		d := condition(getCluster(g, c), etcdv1alpha1.ConditionDegraded)
		g.Expect(d.Reason).To(Equal(etcdv1alpha1.ReasonInvalidTLSSecrets))
		g.Expect(d.Message).To(ContainSubstring("my-client has no ca.crt"))
	}, 10*time.Second).Should(Succeed())
}

func TestCertificatesAreRenewedAtTwoThirdsOfTheirLife(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := newCluster(ns, "renew", nil)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	key := client.ObjectKey{Namespace: ns, Name: "renew-peer-tls"}
	secret := &corev1.Secret{}
	g.Eventually(func() error { return env.Client.Get(ctx, key, secret) }, wait).Should(Succeed())
	first := notAfter(g, secret)
	ca := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "renew-ca"}, ca)).To(Succeed())

	// The controller's clock moves past two thirds of the year-long life;
	// the next health check renews, under the same CA.
	fakeClock.Step(245 * 24 * time.Hour)
	defer fakeClock.Step(-245 * 24 * time.Hour)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, secret)).To(Succeed())
		g.Expect(notAfter(g, secret)).To(BeTemporally(">", first))
	}, 2*requeueUnreachable+wait).Should(Succeed())
	g.Expect(secret.Data["ca.crt"]).To(Equal(ca.Data["tls.crt"]))
}

func notAfter(g Gomega, secret *corev1.Secret) time.Time {
	block, _ := pem.Decode(secret.Data["tls.crt"])
	g.Expect(block).NotTo(BeNil())
	cert, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	return cert.NotAfter
}
