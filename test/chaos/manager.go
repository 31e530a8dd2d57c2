//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tend-dev/tend/test/e2e/framework"
)

// The manager as hack/cluster/deploy.sh deploys it (config/default).
const (
	managerDeployment = "tend-manager"
	managerContainer  = "manager"
	// leaseName is the manager's leader-election Lease (--leader-election-id).
	leaseName = "tend.tend.dev"
	// fieldOwner is who changes the manager Deployment's replicas; deploy.sh
	// applies the manifests with --force-conflicts, so its next run takes
	// them back even after a crash of this suite.
	fieldOwner = "tend-chaos"
	// managerTimeout bounds the wait for a new manager to lead: the Lease
	// of a killed leader runs out after 15s, and a new pod must start.
	managerTimeout = 3 * time.Minute
)

// managerPods lists the manager's pods that are not being deleted.
func managerPods(ctx context.Context, c client.Client) ([]corev1.Pod, *appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: framework.OperatorNamespace, Name: managerDeployment}, d); err != nil {
		return nil, nil, fmt.Errorf("reading the manager's Deployment: %w", err)
	}
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(framework.OperatorNamespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		return nil, nil, err
	}
	pods := slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods, d, nil
}

// leaseHolder returns the pod name that holds the manager's Lease, and the
// whole identity ("" when nobody does). controller-runtime's identity is
// the pod's name, "_", and a UUID.
func leaseHolder(ctx context.Context, c client.Client) (string, string, error) {
	l := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: framework.OperatorNamespace, Name: leaseName}, l); err != nil {
		return "", "", err
	}
	id := ptr.Deref(l.Spec.HolderIdentity, "")
	pod, _, _ := strings.Cut(id, "_")
	return pod, id, nil
}

// managerRestarts is the sum of the manager containers' restart counts over
// the manager's live pods, and the pods with their counts.
func managerRestarts(pods []corev1.Pod) (int32, string) {
	var n int32
	var parts []string
	for _, p := range pods {
		for _, st := range p.Status.ContainerStatuses {
			if st.Name == managerContainer {
				n += st.RestartCount
				parts = append(parts, fmt.Sprintf("%s=%d", p.Name, st.RestartCount))
			}
		}
	}
	return n, strings.Join(parts, " ")
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// sigkillPod sends SIGKILL to every process of pod's container named
// container, found on this machine (the cluster's one node) by the pod's
// UID in the processes' cgroups. It returns how many it killed. This is a
// crash: nothing in the process runs, so a leader keeps its Lease until it
// runs out.
func sigkillPod(pod *corev1.Pod, container string) (int, error) {
	return signalPod(pod, container, syscall.SIGKILL)
}

// signalPod sends sig to every process of pod's container named container,
// as sigkillPod does (framework.SignalContainer).
func signalPod(pod *corev1.Pod, container string, sig syscall.Signal) (int, error) {
	return framework.SignalContainer(pod, container, sig)
}

// kill is one manager kill: which pod led, and how long until another led.
type kill struct {
	Pod      string
	Takeover time.Duration
}

// killing is held from a kill of the manager to its successor's takeover:
// the etcd scenarios run three at a time, and a scenario that read the
// Lease while another's kill was under way would find its holder gone.
var killing sync.Mutex

// killManager kills the leading manager pod: SIGKILL of its process, then a
// forced delete of the pod (--grace-period=0 --force), so that the
// Deployment starts a new pod rather than the kubelet restarting the
// container with a growing back-off. It waits until a Ready pod other than
// the killed one holds the Lease, and returns the time from the kill to
// that. Kills of scenarios that run together take turns.
func killManager(ctx context.Context, c client.Client) (kill, error) {
	killing.Lock()
	defer killing.Unlock()
	holder, _, err := leaseHolder(ctx, c)
	if err != nil {
		return kill{}, err
	}
	pods, _, err := managerPods(ctx, c)
	if err != nil {
		return kill{}, err
	}
	i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Name == holder })
	if i < 0 {
		return kill{}, fmt.Errorf("the Lease holder %q is not a live manager pod", holder)
	}
	victim := &pods[i]
	start := time.Now()
	if _, err := sigkillPod(victim, managerContainer); err != nil {
		return kill{}, err
	}
	if err := c.Delete(ctx, victim, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		return kill{}, fmt.Errorf("deleting the killed manager pod %s: %w", victim.Name, err)
	}
	d, err := waitNewLeader(ctx, c, victim.Name, start)
	return kill{Pod: victim.Name, Takeover: d}, err
}

// killManager kills the leading manager (killManager) during the operation
// what, counts the kill and its takeover time in r, and returns the kill.
func (r *row) killManager(t *testing.T, what string) kill {
	t.Helper()
	k, err := killManager(t.Context(), cluster.Client)
	if err != nil {
		t.Fatalf("killing the manager during %s: %v", what, err)
	}
	r.Kills++
	r.Takeovers = append(r.Takeovers, k.Takeover)
	return k
}

// waitNewLeader waits until a Ready manager pod other than old holds the
// Lease, and returns the time since start.
func waitNewLeader(ctx context.Context, c client.Client, old string, start time.Time) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, managerTimeout)
	defer cancel()
	var last string
	for {
		holder, _, err := leaseHolder(ctx, c)
		if err == nil && holder != "" && holder != old {
			p := &corev1.Pod{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: framework.OperatorNamespace, Name: holder}, p); err == nil && p.DeletionTimestamp == nil {
				return time.Since(start), nil
			}
		}
		last = fmt.Sprintf("holder %q (%v)", holder, err)
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no manager pod other than %s leads after %s; last seen: %s", old, managerTimeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
