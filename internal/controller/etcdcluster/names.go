package etcdcluster

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/etcdnames"
	"github.com/tend-dev/tend/internal/names"
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
func initJobName(c *etcdv1alpha1.EtcdCluster) string       { return names.Child(c.Name, "-init", names.Job) }
func caSecretName(c *etcdv1alpha1.EtcdCluster) string      { return c.Name + "-ca" }

// tlsSecretsOf names c's certificate Secrets (internal/etcdnames).
func tlsSecretsOf(c *etcdv1alpha1.EtcdCluster) etcdnames.TLSSecrets { return etcdnames.TLSSecretsOf(c) }

// memberName is the name of the i-th member: its pod's name.
func memberName(c *etcdv1alpha1.EtcdCluster, i int) string { return fmt.Sprintf("%s-%d", c.Name, i) }

// memberOrdinal is the inverse of memberName; ok is false for a name that
// is not one of c's members.
func memberOrdinal(c *etcdv1alpha1.EtcdCluster, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, c.Name+"-")
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 {
		return 0, false
	}
	return i, true
}

// pvcName is the name of the i-th member's data volume claim, as the
// StatefulSet names it.
func pvcName(c *etcdv1alpha1.EtcdCluster, i int) string {
	return dataVolume + "-" + memberName(c, i)
}

// memberNameOfPeerURL is the member name in a peer URL made by peerURL; a
// learner has no name until it starts, only its peer URL.
func memberNameOfPeerURL(c *etcdv1alpha1.EtcdCluster, peer string) (string, bool) {
	u, err := url.Parse(peer)
	if err != nil {
		return "", false
	}
	name, rest, ok := strings.Cut(u.Hostname(), ".")
	if !ok || rest != memberDomain(c) {
		return "", false
	}
	return name, true
}

// clusterDomain is the cluster's DNS domain, Kubernetes' default.
const clusterDomain = "cluster.local"

// memberHost is a member's stable DNS name, through the peer Service. It is
// the full name that the kubelet also writes into the pod's /etc/hosts: a
// new member resolves itself at once, without asking the cluster DNS,
// which may still cache the answer "no such name" from the moment the
// member was added to etcd, before its pod existed.
func memberHost(c *etcdv1alpha1.EtcdCluster, member string) string {
	return member + "." + memberDomain(c)
}

// memberDomain is the DNS domain of the members' names.
func memberDomain(c *etcdv1alpha1.EtcdCluster) string {
	return fmt.Sprintf("%s.%s.svc.%s", peerServiceName(c), c.Namespace, clusterDomain)
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

// errNotOurs is wrapped by the error of a step that met an object of a
// name Tend derives, but that Tend did not make for this cluster. Tend
// leaves such an object alone, and the step waits until it is gone.
var errNotOurs = errors.New("not made by Tend for this cluster")

// indexRestoreCluster indexes EtcdRestores by the cluster they restore.
const indexRestoreCluster = ".spec.clusterRef.name"

// restoreClusterName is the index function of indexRestoreCluster.
func restoreClusterName(obj client.Object) []string {
	return []string{obj.(*etcdv1alpha1.EtcdRestore).Spec.ClusterRef.Name}
}

// labelClusterUID on a member's volume claim is the UID of the cluster that
// made it: a new cluster of the same name must not start on it unawares.
const labelClusterUID = "etcd.tend.dev/cluster-uid"

// Keys of the root credential Secret.
const (
	rootUsernameKey = "username"
	rootPasswordKey = "password"
)

// memberClaimOrdinal tells whether pvc has the name and cluster label of
// one of c's members' volume claims, and which member's: true also for a
// claim an older cluster of the same name left.
func memberClaimOrdinal(c *etcdv1alpha1.EtcdCluster, pvc *corev1.PersistentVolumeClaim) (int, bool) {
	if pvc.Labels[LabelCluster] != c.Name {
		return 0, false
	}
	name, ok := strings.CutPrefix(pvc.Name, dataVolume+"-")
	if !ok {
		return 0, false
	}
	return memberOrdinal(c, name)
}

// isMemberPVC tells whether pvc is the volume claim of one of c's members,
// made for c (labelled with its UID), and which member's. The claims of
// an older cluster of the same name, kept by its Retain policy, are not:
// Tend never deletes or marks them for this one.
func isMemberPVC(c *etcdv1alpha1.EtcdCluster, pvc *corev1.PersistentVolumeClaim) (int, bool) {
	if pvc.Labels[labelClusterUID] != string(c.UID) {
		return 0, false
	}
	return memberClaimOrdinal(c, pvc)
}

// isMemberPod tells whether pod is one of c's members' pods: made by c's
// StatefulSet, sts (or, while no StatefulSet was read, by one of its
// name). Pods that only carry the members' labels are not.
func isMemberPod(c *etcdv1alpha1.EtcdCluster, sts *appsv1.StatefulSet, pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "StatefulSet" || ref.Name != statefulSetName(c) {
		return false
	}
	return sts == nil || ref.UID == sts.UID
}

// awaitsAdoption tells whether pod is a member's pod that no controller
// owns: the StatefulSet that made it was deleted keeping its pods, and the
// one that replaces it has not adopted it yet. It carries the members'
// labels and a member's name, and nothing else proves it is one: Tend
// dials it (the member's certificate proves it) but never acts on it.
func awaitsAdoption(c *etcdv1alpha1.EtcdCluster, pod *corev1.Pod) bool {
	if metav1.GetControllerOf(pod) != nil || pod.Labels[LabelCluster] != c.Name {
		return false
	}
	_, ok := memberOrdinal(c, pod.Name)
	return ok
}
