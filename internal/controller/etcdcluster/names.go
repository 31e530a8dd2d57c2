package etcdcluster

import (
	"fmt"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// Ports of every member.
const (
	clientPort  = 2379
	peerPort    = 2380
	metricsPort = 2381
)

// LabelCluster names the EtcdCluster that an object belongs to.
const LabelCluster = "etcd.tend.dev/cluster"

// The names of a cluster's objects, all derived from its name, so that a
// pass can find them without a list and a lost status write loses nothing.

func peerServiceName(c *etcdv1alpha1.EtcdCluster) string   { return c.Name + "-peer" }
func clientServiceName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-client" }
func statefulSetName(c *etcdv1alpha1.EtcdCluster) string   { return c.Name }
func pdbName(c *etcdv1alpha1.EtcdCluster) string           { return c.Name }
func initJobName(c *etcdv1alpha1.EtcdCluster) string       { return c.Name + "-init" }
func caSecretName(c *etcdv1alpha1.EtcdCluster) string      { return c.Name + "-ca" }
func serverSecretName(c *etcdv1alpha1.EtcdCluster) string  { return c.Name + "-server-tls" }
func peerSecretName(c *etcdv1alpha1.EtcdCluster) string    { return c.Name + "-peer-tls" }

// ClientSecretName is the Secret holding a client certificate for
// applications (and for Tend itself).
func ClientSecretName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-client-tls" }

// RootSecretName is the Secret holding the root user's password when auth
// is on.
func RootSecretName(c *etcdv1alpha1.EtcdCluster) string { return c.Name + "-root" }

// memberName is the name of the i-th member: its pod's name.
func memberName(c *etcdv1alpha1.EtcdCluster, i int) string { return fmt.Sprintf("%s-%d", c.Name, i) }

// memberHost is a member's stable DNS name, through the peer Service.
func memberHost(c *etcdv1alpha1.EtcdCluster, member string) string {
	return fmt.Sprintf("%s.%s.%s.svc", member, peerServiceName(c), c.Namespace)
}

func peerURL(c *etcdv1alpha1.EtcdCluster, member string) string {
	return fmt.Sprintf("https://%s:%d", memberHost(c, member), peerPort)
}

func memberClientURL(c *etcdv1alpha1.EtcdCluster, member string) string {
	return fmt.Sprintf("https://%s:%d", memberHost(c, member), clientPort)
}

// clientEndpoint is the URL clients use: the client Service.
func clientEndpoint(c *etcdv1alpha1.EtcdCluster) string {
	return fmt.Sprintf("https://%s.%s.svc:%d", clientServiceName(c), c.Namespace, clientPort)
}

// labels are on every object of the cluster; selector is the subset that
// selects its member pods.
func labels(c *etcdv1alpha1.EtcdCluster) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "etcd",
		"app.kubernetes.io/instance":   c.Name,
		"app.kubernetes.io/managed-by": "tend",
		LabelCluster:                   c.Name,
	}
}

func selector(c *etcdv1alpha1.EtcdCluster) map[string]string {
	return map[string]string{LabelCluster: c.Name, "app.kubernetes.io/name": "etcd"}
}
