//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// memberRevisionAnnotation is the revision of the spec a member pod runs
// (the EtcdCluster contract, as test/e2e spells it).
const memberRevisionAnnotation = "etcd.tend.dev/member-revision"

// The manager is killed at a random point of rolling restarts of a 3-member
// EtcdCluster under a writer: first the upgrade from the previous etcd
// minor version (a verified backup, then the roll), then changes of the
// members' CPU request, each a roll. After each the cluster settles on the
// new spec, every member pod was re-created exactly once (a second restart
// of a member is counted as a duplicate), and no volume is left over; at
// the end every acknowledged write reads back, the members hash alike, and
// the member watch never saw a removal that broke quorum.
func TestEtcdRollManagerKills(t *testing.T) {
	t.Parallel() // beside another etcd scenario, once the others ran (doc.go)
	r := scenario(t, "EtcdCluster roll, manager SIGKILL")
	from, to := cluster.Settings.EtcdUpgradeFromVersion, cluster.Settings.EtcdVersion
	if from == "" || to == "" || from == to {
		t.Fatalf("hack/cluster/settings.sh gives upgrade versions %q to %q; want two different versions", from, to)
	}
	ctx := t.Context()
	const n = 3
	ns := cluster.Namespace(t)
	e := newEtcdWith(t, ns, n, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Version = from })
	pods := watchUIDs(t, watchClient(t), &corev1.PodList{}, client.InNamespace(ns), client.MatchingLabels{etcdClusterLabel: e.Name})
	defer func() { _ = pods.stop() }()
	q := watchQuorum(e, e.clientTLS(t))
	defer q.stop()
	w := startWriter(t, e.client(t))

	r.Duplicates, r.Orphans = 0, 0
	for i := range scaled() {
		rng := random(t)
		cpu := resource.MustParse(fmt.Sprintf("%dm", 10+10*(i%2)))
		what := "CPU request " + cpu.String()
		change := func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu}}
		}
		if i == 0 {
			what = "upgrade " + from + " → " + to
			change = func(s *etcdv1alpha1.EtcdClusterSpec) { s.Version = to }
		}
		old, err := e.pods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		before := pods.counts()
		// An upgrade's backup and a roll of three members take 25-40s; the
		// kill falls anywhere in the first 30.
		delay := time.Duration(rng.Int64N(int64(30 * time.Second)))
		if err := e.patchSpec(ctx, change); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		k := r.killManager(t, fmt.Sprintf("roll %d (%s, kill %s in)", i+1, what, delay.Round(time.Millisecond)))
		e.waitRolled(t, old[0].Annotations[memberRevisionAnnotation], func(ec *etcdv1alpha1.EtcdCluster, p *corev1.Pod) error {
			if i == 0 {
				for _, m := range ec.Status.Members {
					if m.Version != to {
						return fmt.Errorf("member %s runs %q, want %s", m.Name, m.Version, to)
					}
				}
				return nil
			}
			if got := etcdContainer(p).Resources.Requests[corev1.ResourceCPU]; got.Cmp(cpu) != 0 {
				return fmt.Errorf("pod %s requests CPU %s, want %s", p.Name, got.String(), cpu.String())
			}
			return nil
		})
		e.waitReady(t, n)
		after := pods.counts()
		recreated := "every member re-created once"
		for _, p := range old {
			restarts := after[p.Name] - before[p.Name]
			if restarts > 1 {
				r.Duplicates = max(r.Duplicates, restarts-1)
				recreated = "members re-created more than once"
				t.Errorf("roll %d (%s): member pod %s was re-created %d times, want once", i+1, what, p.Name, restarts)
			}
		}
		e.checkOrphanClaims(t, r, n)
		waitWrites(t, w, 20)
		r.Runs++
		t.Logf("Roll %d: %s; manager %s killed %s in, a new one led after %.1fs; %s; settled; %d writes acknowledged so far",
			i+1, what, k.Pod, delay.Round(time.Millisecond), k.Takeover.Seconds(), recreated, w.Acked())
	}
	e.checkWrites(t, r, w, q)
	if err := pods.stop(); err != nil {
		t.Errorf("the watch of the member pods: %v", err)
	}
}

// waitRolled waits until the roll away from the member revision old has
// ended: status says the generation is fully updated and no roll is under
// way, and every member pod carries the new revision, is Ready, and passes
// check.
func (e *etcdHandle) waitRolled(t *testing.T, old string, check func(*etcdv1alpha1.EtcdCluster, *corev1.Pod) error) {
	t.Helper()
	cluster.WaitFor(t, etcdTimeout, "the roll away from member revision "+old+" to end", func(ctx context.Context) (bool, error) {
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		if ec.Status.UpdatedGeneration != ec.Generation || ec.Status.Update != nil {
			return false, fmt.Errorf("status.updatedGeneration %d of generation %d, status.update %+v", ec.Status.UpdatedGeneration, ec.Generation, ec.Status.Update)
		}
		pods, err := e.pods(ctx)
		if err != nil {
			return false, err
		}
		for i := range pods {
			p := &pods[i]
			if rev := p.Annotations[memberRevisionAnnotation]; rev == old || !podReady(p) {
				return false, fmt.Errorf("pod %s carries revision %s, ready %t", p.Name, rev, podReady(p))
			}
			if err := check(ec, p); err != nil {
				return false, err
			}
		}
		return true, nil
	})
}

// etcdContainer is the member pod's etcd container.
func etcdContainer(p *corev1.Pod) *corev1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == "etcd" {
			return &p.Spec.Containers[i]
		}
	}
	return &corev1.Container{}
}
