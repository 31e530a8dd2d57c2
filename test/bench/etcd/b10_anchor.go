package etcd

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/tend-dev/tend/internal/podspec"
)

// B10's anchor: the design that etcd-io/etcd-operator and etcd-druid roll
// with, a StatefulSet with updateStrategy RollingUpdate, which the
// StatefulSet controller rolls highest ordinal first, each pod after the
// one before is Ready, with no regard for which member leads. The
// benchmark makes it itself, with no Tend involved. Its members run etcd
// as Tend's do (internal/controller/etcdcluster/builders.go): the same
// environment, TLS (with -b10.anchor-tls), probes, grace period, security
// contexts and volume; the settings are copied here, not the code, so that
// a change to Tend's builders shows up as a difference to look at.

// The names that both variants use, so that the writer and the probes
// reach either the same way: the cluster (Tend's EtcdCluster, or the
// anchor's StatefulSet) b10, its members b10-0..2 behind the headless
// Service b10-peer.
const (
	b10Cluster = "b10"
	b10Members = 3
	// Ports and paths of a member, as Tend's.
	b10ClientPort  = 2379
	b10PeerPort    = 2380
	b10MetricsPort = 2381
	b10DataDir     = "/var/lib/etcd"
	b10ServerTLS   = "/etc/etcd/tls/server"
	b10PeerTLS     = "/etc/etcd/tls/peer"
)

// b10AnchorLabels select the anchor's pods. They are none of Tend's, so
// that Tend's manager never looks at them.
func b10AnchorLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "etcd-anchor", "app.kubernetes.io/instance": b10Cluster}
}

func b10PeerService() string { return b10Cluster + "-peer" }

// b10MemberName is the name of member i: its pod's.
func b10MemberName(i int) string { return fmt.Sprintf("%s-%d", b10Cluster, i) }

// b10MemberHost is a member's DNS name through the headless Service, as
// Tend names its members; TLS checks the servers' certificates against it.
func b10MemberHost(ns, member string) string {
	return fmt.Sprintf("%s.%s.%s.svc.cluster.local", member, b10PeerService(), ns)
}

// b10MemberOfHost is the member (pod) name of a host that b10MemberHost
// made, or "".
func b10MemberOfHost(ns, host string) string {
	name, rest, ok := strings.Cut(host, ".")
	if !ok || rest != fmt.Sprintf("%s.%s.svc.cluster.local", b10PeerService(), ns) {
		return ""
	}
	return name
}

// b10ClientEndpoints are the members' client URLs.
func b10ClientEndpoints(ns string, tls bool) []string {
	out := make([]string, 0, b10Members)
	for i := range b10Members {
		out = append(out, fmt.Sprintf("%s://%s:%d", b10Scheme(tls), b10MemberHost(ns, b10MemberName(i)), b10ClientPort))
	}
	return out
}

func b10Scheme(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}

// b10Minor is the minor number of a version such as v3.6.16.
func b10Minor(version string) int {
	parts := strings.Split(version, ".")
	if len(parts) < 2 {
		return 0
	}
	var n int
	_, _ = fmt.Sscanf(parts[1], "%d", &n)
	return n
}

// b10AnchorSecrets are the names of the anchor's certificates, each a
// kubernetes.io/tls Secret with ca.crt, as Tend's are.
const (
	b10AnchorServerSecret = b10Cluster + "-server-tls"
	b10AnchorPeerSecret   = b10Cluster + "-peer-tls"
	b10AnchorClientSecret = b10Cluster + "-client-tls"
)

// b10AnchorPeerServiceObject is the anchor's headless Service: it gives
// each member a stable DNS name and publishes members before they are
// ready, as Tend's peer Service does, since they must find each other to
// become ready at all.
func b10AnchorPeerServiceObject(ns string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: b10PeerService(), Labels: b10AnchorLabels()},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 b10AnchorLabels(),
			Ports: []corev1.ServicePort{
				{Name: "client", Port: b10ClientPort, TargetPort: intstr.FromInt32(b10ClientPort), Protocol: corev1.ProtocolTCP},
				{Name: "peer", Port: b10PeerPort, TargetPort: intstr.FromInt32(b10PeerPort), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// b10AnchorStatefulSet is the anchor's StatefulSet: 3 members of image,
// which runs etcd version, rolled by the StatefulSet controller
// (RollingUpdate). Pods start in parallel, as a new etcd cluster needs:
// with OrderedReady the first member would wait for a quorum that is never
// created. The roll itself is one pod at a time all the same.
func b10AnchorStatefulSet(ns, image, version string, tls bool) *appsv1.StatefulSet {
	scheme := b10Scheme(tls)
	host := b10MemberHost(ns, "$(POD_NAME)")
	var initial []string
	for i := range b10Members {
		m := b10MemberName(i)
		initial = append(initial, fmt.Sprintf("%s=%s://%s:%d", m, scheme, b10MemberHost(ns, m), b10PeerPort))
	}
	env := []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "ETCD_NAME", Value: "$(POD_NAME)"},
		{Name: "ETCD_DATA_DIR", Value: b10DataDir},
		{Name: "ETCD_INITIAL_CLUSTER", Value: strings.Join(initial, ",")},
		{Name: "ETCD_INITIAL_CLUSTER_STATE", Value: "new"},
		{Name: "ETCD_INITIAL_CLUSTER_TOKEN", Value: "b10-anchor-" + ns},
		{Name: "ETCD_INITIAL_ADVERTISE_PEER_URLS", Value: fmt.Sprintf("%s://%s:%d", scheme, host, b10PeerPort)},
		{Name: "ETCD_ADVERTISE_CLIENT_URLS", Value: fmt.Sprintf("%s://%s:%d", scheme, host, b10ClientPort)},
		{Name: "ETCD_LISTEN_PEER_URLS", Value: fmt.Sprintf("%s://0.0.0.0:%d", scheme, b10PeerPort)},
		{Name: "ETCD_LISTEN_CLIENT_URLS", Value: fmt.Sprintf("%s://0.0.0.0:%d", scheme, b10ClientPort)},
		{Name: "ETCD_LISTEN_METRICS_URLS", Value: fmt.Sprintf("http://0.0.0.0:%d", b10MetricsPort)},
	}
	mounts := []corev1.VolumeMount{{Name: "data", MountPath: b10DataDir}}
	var volumes []corev1.Volume
	if tls {
		// As Tend's members: client and peer certificates are required,
		// and peers are trusted for their certificate, without etcd's
		// reverse DNS check of their IPs, which fails for a new pod while
		// the cluster DNS caches an older answer (v3.6 renamed v3.5's
		// experimental setting).
		skipSAN := "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION"
		if b10Minor(version) < 6 {
			skipSAN = "ETCD_EXPERIMENTAL_PEER_SKIP_CLIENT_SAN_VERIFICATION"
		}
		env = append(env,
			corev1.EnvVar{Name: "ETCD_CLIENT_CERT_AUTH", Value: "true"},
			corev1.EnvVar{Name: "ETCD_TRUSTED_CA_FILE", Value: b10ServerTLS + "/ca.crt"},
			corev1.EnvVar{Name: "ETCD_CERT_FILE", Value: b10ServerTLS + "/tls.crt"},
			corev1.EnvVar{Name: "ETCD_KEY_FILE", Value: b10ServerTLS + "/tls.key"},
			corev1.EnvVar{Name: "ETCD_PEER_CLIENT_CERT_AUTH", Value: "true"},
			corev1.EnvVar{Name: "ETCD_PEER_TRUSTED_CA_FILE", Value: b10PeerTLS + "/ca.crt"},
			corev1.EnvVar{Name: "ETCD_PEER_CERT_FILE", Value: b10PeerTLS + "/tls.crt"},
			corev1.EnvVar{Name: "ETCD_PEER_KEY_FILE", Value: b10PeerTLS + "/tls.key"},
			corev1.EnvVar{Name: skipSAN, Value: "true"},
		)
		mounts = append(mounts,
			corev1.VolumeMount{Name: "server-tls", MountPath: b10ServerTLS, ReadOnly: true},
			corev1.VolumeMount{Name: "peer-tls", MountPath: b10PeerTLS, ReadOnly: true})
		volumes = []corev1.Volume{
			{Name: "server-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: b10AnchorServerSecret}}},
			{Name: "peer-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: b10AnchorPeerSecret}}},
		}
	}
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(b10MetricsPort)}},
			PeriodSeconds:    period,
			TimeoutSeconds:   5,
			FailureThreshold: failures,
		}
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: b10Cluster, Labels: b10AnchorLabels()},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](b10Members),
			ServiceName:         b10PeerService(),
			Selector:            &metav1.LabelSelector{MatchLabels: b10AnchorLabels()},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: b10AnchorLabels()},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: b10AnchorLabels()},
				Spec: corev1.PodSpec{
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
							Weight: 100,
							PodAffinityTerm: corev1.PodAffinityTerm{
								TopologyKey:   corev1.LabelHostname,
								LabelSelector: &metav1.LabelSelector{MatchLabels: b10AnchorLabels()},
							},
						}},
					}},
					TerminationGracePeriodSeconds: ptr.To[int64](30),
					AutomountServiceAccountToken:  ptr.To(false),
					SecurityContext:               podspec.PodSecurity(),
					Containers: []corev1.Container{{
						Name:            "etcd",
						Image:           image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         []string{"/usr/local/bin/etcd"},
						Env:             env,
						Ports: []corev1.ContainerPort{
							{Name: "client", ContainerPort: b10ClientPort},
							{Name: "peer", ContainerPort: b10PeerPort},
							{Name: "metrics", ContainerPort: b10MetricsPort},
						},
						ReadinessProbe:  probe("/readyz", 5, 3),
						LivenessProbe:   probe("/livez", 10, 6),
						StartupProbe:    probe("/livez", 5, 60),
						VolumeMounts:    mounts,
						SecurityContext: podspec.ContainerSecurity(),
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

// b10AnchorTLSSecrets issues the anchor's certificates, as Tend issues its
// members' (ECDSA P-256, a CA of the cluster's own): the servers' for
// every member's name, the peers' for the same names, and a client's.
func b10AnchorTLSSecrets(ns string, now time.Time) ([]*corev1.Secret, error) {
	caKey, caCert, caPEM, err := b10Sign(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "b10 anchor CA " + ns},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil, nil)
	if err != nil {
		return nil, err
	}
	wildcard := fmt.Sprintf("*.%s.%s.svc", b10PeerService(), ns)
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	leaves := []struct {
		secret string
		tmpl   *x509.Certificate
	}{
		{b10AnchorServerSecret, &x509.Certificate{Subject: pkix.Name{CommonName: b10Cluster + "-server"}, ExtKeyUsage: both,
			DNSNames: []string{wildcard, wildcard + ".cluster.local", "localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}},
		{b10AnchorPeerSecret, &x509.Certificate{Subject: pkix.Name{CommonName: b10Cluster + "-peer"}, ExtKeyUsage: both,
			DNSNames: []string{wildcard, wildcard + ".cluster.local"}}},
		{b10AnchorClientSecret, &x509.Certificate{Subject: pkix.Name{CommonName: "root"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}},
	}
	var out []*corev1.Secret
	for _, l := range leaves {
		l.tmpl.NotBefore, l.tmpl.NotAfter, l.tmpl.KeyUsage = now.Add(-time.Hour), now.Add(24*time.Hour), x509.KeyUsageDigitalSignature
		key, _, certPEM, err := b10Sign(l.tmpl, caCert, caKey)
		if err != nil {
			return nil, fmt.Errorf("issuing %s: %w", l.secret, err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, err
		}
		out = append(out, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: l.secret, Labels: b10AnchorLabels()},
			Type:       corev1.SecretTypeTLS,
			Data: map[string][]byte{
				"ca.crt":                caPEM,
				corev1.TLSCertKey:       certPEM,
				corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
			},
		})
	}
	return out, nil
}

// b10Sign makes a key and a certificate from tmpl, signed by parent's key,
// or self-signed when parent is nil.
func b10Sign(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, *x509.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128)); err != nil {
		return nil, nil, nil, err
	}
	signer := key
	if parent == nil {
		parent = tmpl
	} else {
		signer = parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	return key, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
