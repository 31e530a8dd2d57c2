//go:build e2e

package framework

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// An EtcdCluster's parts as its contract promises them, spelled out rather
// than imported from the controller, for the e2e tests and the chaos suite.

// EtcdClusterLabel is on every pod (and claim) of an EtcdCluster.
const EtcdClusterLabel = "etcd.tend.dev/cluster"

// EtcdServiceEndpoint is the client Service's URL: status.clientEndpoint.
func EtcdServiceEndpoint(ns, name string) string {
	return fmt.Sprintf("https://%s-client.%s.svc:2379", name, ns)
}

// EtcdMemberHost is member's own DNS name, through the peer Service.
func EtcdMemberHost(ns, name, member string) string {
	return fmt.Sprintf("%s.%s-peer.%s.svc.cluster.local", member, name, ns)
}

// EtcdMemberPods lists the member pods of EtcdCluster ns/name, terminating
// ones included, sorted by name: the pods that its StatefulSet controls
// (its Jobs' pods carry the cluster's label too), and members' pods that
// no controller owns while the StatefulSet is remade.
func (c *Cluster) EtcdMemberPods(ctx context.Context, ns, name string) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := c.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{EtcdClusterLabel: name}); err != nil {
		return nil, err
	}
	pods := slices.DeleteFunc(list.Items, func(p corev1.Pod) bool {
		ref := metav1.GetControllerOf(&p)
		if ref == nil {
			// A member's pod between two StatefulSets (a volume migration
			// remakes it keeping its pods) until the new one adopts it.
			ordinal, ok := strings.CutPrefix(p.Name, name+"-")
			_, err := strconv.Atoi(ordinal)
			return !ok || err != nil
		}
		return ref.Kind != "StatefulSet" || ref.Name != name
	})
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods, nil
}

// EtcdHosts maps EtcdCluster ns/name's DNS names to the addresses this
// machine reaches (see EtcdClient): the client Service to its ClusterIP,
// each member to its pod's IP, as they are now. It returns the names of
// the members with an IP too, sorted.
func (c *Cluster) EtcdHosts(ctx context.Context, ns, name string) (map[string]string, []string, error) {
	svc := &corev1.Service{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-client"}, svc); err != nil {
		return nil, nil, err
	}
	hosts := map[string]string{fmt.Sprintf("%s-client.%s.svc", name, ns): svc.Spec.ClusterIP}
	pods, err := c.EtcdMemberPods(ctx, ns, name)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, p := range pods {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			hosts[EtcdMemberHost(ns, name, p.Name)] = p.Status.PodIP
			names = append(names, p.Name)
		}
	}
	return hosts, names, nil
}

// SurvivorAndLost picks, from a settled cluster's status, the member that
// survives a loss of all but one (the highest ordinal that does not lead)
// and the members lost, the leader among them, sorted.
func SurvivorAndLost(ec *etcdv1alpha1.EtcdCluster) (string, []string) {
	var survivor string
	var lost []string
	for _, m := range slices.Backward(ec.Status.Members) {
		if survivor == "" && !m.Leader {
			survivor = m.Name
			continue
		}
		lost = append(lost, m.Name)
	}
	slices.Sort(lost)
	return survivor, lost
}
