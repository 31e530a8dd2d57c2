// Package etcdnames holds the names of an EtcdCluster's objects that more
// than one controller uses: the EtcdCluster controller makes these
// objects, and the EtcdBackup controller (and the benchmarks) read them.
// The controllers share these names, not code.
package etcdnames

import (
	"cmp"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// ConnectionName is the cluster's connection ConfigMap: the endpoints and
// CA that backup pods and applications read (keys in internal/podspec).
func ConnectionName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-connection" }

// RootSecretName is the Secret holding the root user's password when auth
// is on.
func RootSecretName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-root" }

// ClientSecretName is the Secret holding a client certificate for
// applications (and for Tend itself) in Auto TLS mode.
func ClientSecretName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-client-tls" }

// ServerSecretName and PeerSecretName are the Secrets of the members'
// certificates in Auto TLS mode.
func ServerSecretName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-server-tls" }
func PeerSecretName(c *etcdv1alpha1.EtcdCluster) string   { return c.Name + "-peer-tls" }

// TLSSecrets are the names of the Secrets that hold a cluster's
// certificates: Tend's in Auto mode, the user's in Provided mode.
type TLSSecrets struct{ Server, Peer, Client string }

// TLSSecretsOf names c's certificate Secrets.
func TLSSecretsOf(c *etcdv1alpha1.EtcdCluster) TLSSecrets {
	if c.Spec.TLS.Mode == etcdv1alpha1.TLSProvided && c.Spec.TLS.Secrets != nil {
		s := c.Spec.TLS.Secrets
		return TLSSecrets{Server: s.Server, Peer: s.Peer, Client: s.Client}
	}
	return TLSSecrets{Server: ServerSecretName(c), Peer: PeerSecretName(c), Client: ClientSecretName(c)}
}

// ClientTLSSecret is the Secret with the client certificate that Tend and
// its agents use: Tend's in Auto mode, the user's in Provided mode.
func ClientTLSSecret(c *etcdv1alpha1.EtcdCluster) string { return TLSSecretsOf(c).Client }

// Image is the etcd image of c: the override, or the public image of its
// version, which the local cluster also carries under that name. It holds
// etcd, etcdctl and etcdutl.
func Image(c *etcdv1alpha1.EtcdCluster) string {
	if c.Spec.Image != "" {
		return c.Spec.Image
	}
	return "gcr.io/etcd-development/etcd:" + cmp.Or(c.Spec.Version, etcdv1alpha1.DefaultVersion)
}
