package etcdcluster

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/manager"
)

// MemberPodCache narrows the controller's own pod cache (manager.Apart:
// the manager's pod cache holds the PodSets' pods) to the pods that carry
// the cluster label, the members' and the cluster's Jobs', and keeps of
// each what a pass reads (trimMemberPod).
func MemberPodCache() cache.ByObject {
	by := manager.WithLabel(LabelCluster)
	by.Transform = trimMemberPod
	return by
}

// trimMemberPod keeps of a pod its metadata, its containers (a roll
// compares them with the template: runsAs), and the status a pass reads:
// phase, IP, conditions and container states. Its volumes, scheduling and
// the rest of its spec are left out; a pod is only ever written by a merge
// patch computed from the cached copy (adoptUnmarkedPods).
var trimMemberPod = manager.TrimPod(func(in, out *corev1.Pod) {
	out.Spec = corev1.PodSpec{Containers: in.Spec.Containers, NodeName: in.Spec.NodeName}
	out.Status = corev1.PodStatus{Phase: in.Status.Phase, PodIP: in.Status.PodIP, Conditions: in.Status.Conditions,
		ContainerStatuses: in.Status.ContainerStatuses}
})

// clusterOfPod maps a pod of the controller's pod cache to the cluster
// its label names: a member that starts, becomes ready, stops or goes
// starts a pass at once, rather than at the next requeue.
func clusterOfPod(_ context.Context, pod *corev1.Pod) []reconcile.Request {
	name := pod.Labels[LabelCluster]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: name}}}
}

// goingPods are the member pods that Tend deleted, until the pod cache
// shows them deleting or gone: the expectations of Kubernetes' ReplicaSet
// controller, for deletions only (the StatefulSet makes the pods). A pass
// that read the cache before a deletion reached it would see the pod as it
// was, running the old revision, and restart or replace the member again.
// Losing them on a restart loses nothing: a new manager's cache is read
// after the deletions.
type goingPods struct {
	mu        sync.Mutex
	byCluster map[types.NamespacedName]map[types.UID]time.Time
}

// add remembers that Tend deleted the pod uid of the cluster key at now.
func (g *goingPods) add(key types.NamespacedName, uid types.UID, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byCluster == nil {
		g.byCluster = map[types.NamespacedName]map[types.UID]time.Time{}
	}
	if g.byCluster[key] == nil {
		g.byCluster[key] = map[types.UID]time.Time{}
	}
	g.byCluster[key][uid] = now
}

// apply shows pods, as the cache listed them for the cluster key, as the
// apiserver has them: a pod that Tend deleted and the cache still shows
// running is deleting, since the time Tend deleted it. A deletion that the
// cache shows, or a pod it no longer lists, is forgotten.
func (g *goingPods) apply(key types.NamespacedName, pods []corev1.Pod) {
	g.mu.Lock()
	defer g.mu.Unlock()
	going := g.byCluster[key]
	if len(going) == 0 {
		return
	}
	seen := make(map[types.UID]bool, len(pods))
	for i := range pods {
		p := &pods[i]
		at, ok := going[p.UID]
		if !ok {
			continue
		}
		if p.DeletionTimestamp != nil {
			delete(going, p.UID) // the cache has it
			continue
		}
		seen[p.UID] = true
		p.DeletionTimestamp = &metav1.Time{Time: at}
	}
	for uid := range going {
		if !seen[uid] {
			delete(going, uid)
		}
	}
	if len(going) == 0 {
		delete(g.byCluster, key)
	}
}

// deleteMemberPod deletes a member pod of c (deleteExactly: that pod, by
// its UID) and remembers the deletion until the pod cache shows it.
func (r *Reconciler) deleteMemberPod(ctx context.Context, c *etcdv1alpha1.EtcdCluster, pod *corev1.Pod, now time.Time) error {
	if err := r.deleteExactly(ctx, "pod", pod); err != nil {
		return err
	}
	r.going.add(types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, pod.UID, now)
	return nil
}

// forget drops what is remembered of the cluster key.
func (g *goingPods) forget(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.byCluster, key)
}
