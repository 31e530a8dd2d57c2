//go:build e2e

package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/scheme"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// B8's settings. Pass them after -args when running this package alone.
var (
	flagAnchorInterval = flag.String("b8.anchor-interval", "10s",
		"B8: the anchor variant's "+flagMemberChangeInterval+" (etcd-io/etcd-operator requeues every 10s)")
	flagUnhealthyFor = flag.Duration("b8.unhealthy-for", 10*time.Second,
		"B8: spec.memberReplacement.unhealthyFor of the measured clusters (the CRD's minimum is 10s)")
	flagTimeout = flag.Duration("b8.timeout", 10*time.Minute,
		"B8: the longest wait for one step; a step that takes longer fails the benchmark")
	flagTimeline = flag.Bool("b8.timeline", true,
		"B8: log every status change and Event of each measurement, as seconds after the create")
)

// The manager as hack/cluster/deploy.sh deploys it (config/default).
const (
	managerDeployment = "tend-manager"
	managerContainer  = "manager"
	// fieldOwner is who changes the manager's args. deploy.sh applies the
	// manifests with --force-conflicts, so its next run (every benchmark
	// and e2e run starts with one) takes them back even after a crash.
	fieldOwner = "tend-bench-etcd"
	// managerTimeout bounds a rollout of the manager and its election.
	managerTimeout = 5 * time.Minute
	// namespaceTimeout bounds the deletion of a measurement's namespace.
	namespaceTimeout = 5 * time.Minute
)

// rig is the local cluster with Tend deployed, as B8 uses it.
type rig struct {
	cluster *framework.Cluster
	// wc watches; the framework's client does not.
	wc client.WithWatch
	// baseArgs are the manager's args as deployed, without
	// --etcdcluster-member-change-interval: the "tend" variant's.
	baseArgs []string
}

var (
	rigOnce sync.Once
	theRig  *rig
	rigErr  error
)

// getRig returns the run's rig, starting it on first use: the package's
// unit tests need no cluster, so "go test -tags e2e" without -bench starts
// nothing.
func getRig(b *testing.B) *rig {
	b.Helper()
	rigOnce.Do(func() { theRig, rigErr = startRig(b.Context()) })
	if rigErr != nil {
		b.Fatalf("B8 needs the local cluster with Tend deployed (run as root; see docs/cluster.md): %v", rigErr)
	}
	return theRig
}

// startRig brings the local cluster up if it is not running and deploys the
// manager built from this work tree (test/e2e/framework), then checks that
// it can serve EtcdClusters.
func startRig(ctx context.Context) (*rig, error) {
	r := &rig{cluster: framework.New()}
	if err := r.cluster.Start(); err != nil {
		return nil, err
	}
	var err error
	if r.wc, err = client.NewWithWatch(r.cluster.Config, client.Options{Scheme: scheme.Scheme}); err != nil {
		return nil, err
	}
	if err := r.cluster.Client.List(ctx, &etcdv1alpha1.EtcdClusterList{}, client.Limit(1)); err != nil {
		return nil, fmt.Errorf("listing EtcdClusters (deploy.sh --local installs their CRD from config/crd): %w", err)
	}
	d, i, err := r.manager(ctx)
	if err != nil {
		return nil, err
	}
	r.baseArgs = withInterval(d.Spec.Template.Spec.Containers[i].Args, "")
	return r, nil
}

// manager returns the manager's Deployment and the index of its container.
func (r *rig) manager(ctx context.Context) (*appsv1.Deployment, int, error) {
	d := &appsv1.Deployment{}
	if err := r.cluster.Client.Get(ctx, client.ObjectKey{Namespace: framework.OperatorNamespace, Name: managerDeployment}, d); err != nil {
		return nil, 0, fmt.Errorf("reading the manager's Deployment: %w", err)
	}
	i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == managerContainer })
	if i < 0 {
		return nil, 0, fmt.Errorf("the Deployment %s/%s has no container %q", d.Namespace, d.Name, managerContainer)
	}
	return d, i, nil
}

// setManagerArgs gives the manager's container args, waits until the
// Deployment has rolled out and one of the new pods leads, and logs how
// long that took. Args that are already set cost no rollout.
func (r *rig) setManagerArgs(b *testing.B, args []string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	d, i, err := r.manager(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if !slices.Equal(d.Spec.Template.Spec.Containers[i].Args, args) {
		path := fmt.Sprintf("/spec/template/spec/containers/%d", i)
		patch, err := json.Marshal([]map[string]any{
			{"op": "test", "path": path + "/name", "value": managerContainer},
			{"op": "replace", "path": path + "/args", "value": args},
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := r.cluster.Client.Patch(ctx, d, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(fieldOwner)); err != nil {
			b.Fatalf("setting the manager's args: %v", err)
		}
	}
	r.waitManager(b, args)
	b.Logf("manager: args %q, rolled out and leading after %.1f s", args, time.Since(start).Seconds())
}

// waitManager waits until every pod of the manager's Deployment runs args,
// is Ready, and one of them holds the leader Lease (when the args turn
// leader election on): only then does a measurement's clock start. A
// manager that crashes with these args fails b at once, with its log.
func (r *rig) waitManager(b *testing.B, args []string) {
	b.Helper()
	ns := framework.OperatorNamespace
	r.cluster.WaitFor(b, managerTimeout, fmt.Sprintf("the manager with args %q", args), func(ctx context.Context) (bool, error) {
		d, _, err := r.manager(ctx)
		if err != nil {
			return false, err
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		s := d.Status
		if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.AvailableReplicas != want || s.Replicas != want {
			return false, fmt.Errorf("rolling out: replicas %d, updated %d, available %d, want %d", s.Replicas, s.UpdatedReplicas, s.AvailableReplicas, want)
		}
		pods := &corev1.PodList{}
		if err := r.cluster.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return false, err
		}
		var current []string
		for i := range pods.Items {
			p := &pods.Items[i]
			if !slices.Equal(containerArgs(p), args) || p.DeletionTimestamp != nil {
				continue
			}
			if msg := crashed(p); msg != "" {
				return false, framework.Stop(fmt.Errorf("the manager pod %s crashed with these args: %s; its previous log:\n%s", p.Name, msg, r.previousLog(ctx, p)))
			}
			if podReady(p) {
				current = append(current, p.Name)
			}
		}
		if len(current) == 0 {
			return false, errors.New("no Ready manager pod runs these args yet")
		}
		if !leaderElect(args) {
			return true, nil
		}
		leases := &coordinationv1.LeaseList{}
		if err := r.cluster.Client.List(ctx, leases, client.InNamespace(ns)); err != nil {
			return false, err
		}
		var holders []string
		for _, l := range leases.Items {
			if l.Spec.HolderIdentity == nil {
				continue
			}
			holder := *l.Spec.HolderIdentity
			holders = append(holders, l.Name+"="+holder)
			// controller-runtime's identity is the hostname (the pod's
			// name), "_", and a UUID.
			if pod, _, _ := strings.Cut(holder, "_"); slices.Contains(current, pod) {
				return true, nil
			}
		}
		return false, fmt.Errorf("pods %v run these args but none leads yet; leases in %s: %v", current, ns, holders)
	})
}

func containerArgs(p *corev1.Pod) []string {
	for _, c := range p.Spec.Containers {
		if c.Name == managerContainer {
			return c.Args
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// crashed says how the manager container of p ended, if it ever did.
func crashed(p *corev1.Pod) string {
	for _, st := range p.Status.ContainerStatuses {
		if st.Name != managerContainer || st.RestartCount == 0 {
			continue
		}
		if t := st.LastTerminationState.Terminated; t != nil {
			return fmt.Sprintf("restarted %d times, last exit code %d (%s)", st.RestartCount, t.ExitCode, t.Reason)
		}
		return fmt.Sprintf("restarted %d times", st.RestartCount)
	}
	return ""
}

func (r *rig) previousLog(ctx context.Context, p *corev1.Pod) string {
	data, err := r.cluster.Clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: managerContainer, Previous: true}).DoRaw(ctx)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(data)
}

// deleteNamespace deletes ns and waits until it is gone, so that the next
// measurement does not share the node with this one's teardown.
func (r *rig) deleteNamespace(b *testing.B, ns string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obj := &corev1.Namespace{}
	obj.Name = ns
	if err := r.cluster.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		b.Fatalf("deleting the namespace %s: %v", ns, err)
	}
	start := time.Now()
	r.cluster.WaitFor(b, namespaceTimeout, "the namespace "+ns+" to be deleted", func(ctx context.Context) (bool, error) {
		err := r.cluster.Client.Get(ctx, client.ObjectKey{Name: ns}, obj)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		var why []string
		for _, c := range obj.Status.Conditions {
			if c.Status == corev1.ConditionTrue {
				why = append(why, fmt.Sprintf("%s: %s", c.Type, c.Message))
			}
		}
		return false, fmt.Errorf("%s; %s", obj.Status.Phase, strings.Join(why, "; "))
	})
	b.Logf("namespace %s deleted in %.1f s", ns, time.Since(start).Seconds())
}

// measureOnce runs the sub-benchmark name and takes the samples with
// measure on its first call only: the testing package calls a benchmark
// again for -benchtime Nx with N > 1. Every call reports metrics().
func measureOnce(b *testing.B, name string, measure func(*testing.B), metrics func() map[string]float64) {
	b.Helper()
	measured := false
	b.Run(name, func(b *testing.B) {
		if !measured {
			measured = true
			measure(b)
		}
		for unit, v := range metrics() {
			b.ReportMetric(v, unit)
		}
	})
}

// printTable logs the table that write writes and prints it to standard
// output under title.
func printTable(b *testing.B, title string, write func(io.Writer)) {
	b.Helper()
	var sb strings.Builder
	write(&sb)
	b.Log("\n" + sb.String())
	fmt.Fprintf(os.Stdout, "\n%s:\n%s", title, sb.String())
}

// logNow logs to the benchmark and, at once, to standard error after
// prefix: the testing package keeps only the last lines of a benchmark's
// log, and prints it when the benchmark ends.
func logNow(b *testing.B, prefix, format string, args ...any) {
	b.Helper()
	b.Logf(format, args...)
	fmt.Fprintf(os.Stderr, prefix+": "+format+"\n", args...)
}
