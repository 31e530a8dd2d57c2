//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// The manager is killed while Tend replaces an etcd member, under a writer.
// Rounds alternate the two ways a member is replaced: it lost its data (its
// pod and volume claim deleted together), which Tend replaces at once; or it
// stays unhealthy (etcd cut off from its peers) past unhealthyFor (30s),
// which Tend replaces then. Any member may be the victim, the leader too. After
// each round the member of that name is a new etcd member (another ID),
// healthy and voting, the cluster settles, and no volume is left over; at
// the end every acknowledged write reads back, the members hash alike, and
// the member watch never saw a removal that broke quorum.
func TestEtcdReplacementManagerKills(t *testing.T) {
	t.Parallel() // beside another etcd scenario, once the others ran (doc.go)
	r := scenario(t, "etcd member replacement, manager SIGKILL")
	ctx := t.Context()
	const n = 3
	ns := cluster.Namespace(t)
	e := newEtcd(t, ns, n)
	q := watchQuorum(e, e.clientTLS(t))
	defer q.stop()
	w := startWriter(t, e.client(t))

	r.Orphans = 0
	for i := range max(2, scaled()) {
		rng := random(t)
		ec, err := e.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		victim := ec.Status.Members[rng.IntN(len(ec.Status.Members))]
		pod := &corev1.Pod{}
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim.Name}, pod); err != nil {
			t.Fatal(err)
		}
		var how string
		var delay time.Duration
		if i%2 == 0 {
			// A claim in use stays Terminating until its pod is gone, so
			// the pod comes back on a new, empty claim. Replacement starts
			// at once; the kill falls in its first 15s.
			how = "lost its data"
			claim := &corev1.PersistentVolumeClaim{}
			if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + victim.Name}, claim); err != nil {
				t.Fatal(err)
			}
			if err := cluster.Client.Delete(ctx, claim); err != nil {
				t.Fatal(err)
			}
			if err := cluster.Client.Delete(ctx, pod); err != nil {
				t.Fatal(err)
			}
			delay = time.Duration(rng.Int64N(int64(15 * time.Second)))
		} else {
			// An etcd cut off from its peers answers its clients and its
			// liveness probe but serves no linearizable read: it stays
			// unhealthy, and only Tend's replacement, when unhealthyFor has
			// passed, ends it. (A frozen etcd would not do: the liveness
			// probe restarts it about 60s in, and then it is healthy again,
			// which can come before a replacement that the kill delayed.)
			// The kill falls from 20s to 45s after the cut: before, at or
			// during the replacement.
			how = "cut off from its peers"
			if err := framework.PartitionPort(pod, "etcd", containerPort(t, pod, "etcd", "peer")); err != nil {
				t.Fatal(err)
			}
			delay = 20*time.Second + time.Duration(rng.Int64N(int64(25*time.Second)))
		}
		time.Sleep(delay)
		k := r.killManager(t, fmt.Sprintf("round %d (member %s %s, kill %s in)", i+1, victim.Name, how, delay.Round(time.Millisecond)))
		e.waitReplaced(t, victim)
		e.waitReady(t, n)
		e.checkOrphanClaims(t, r, n)
		waitWrites(t, w, 20)
		r.Runs++
		t.Logf("Round %d: member %s (%s) %s; manager %s killed %s in, a new one led after %.1fs; replaced and settled; %d writes acknowledged so far",
			i+1, victim.Name, victim.ID, how, k.Pod, delay.Round(time.Millisecond), k.Takeover.Seconds(), w.Acked())
	}
	e.checkWrites(t, r, w, q)
}

// waitReplaced waits until status names a healthy voter of old's name with
// another etcd member ID than old's.
func (e *etcdHandle) waitReplaced(t *testing.T, old etcdv1alpha1.Member) {
	t.Helper()
	cluster.WaitFor(t, etcdTimeout, fmt.Sprintf("member %s (%s) replaced by a new member", old.Name, old.ID), func(ctx context.Context) (bool, error) {
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		for _, m := range ec.Status.Members {
			if m.Name != old.Name {
				continue
			}
			if m.ID == old.ID || m.ID == "" || !m.Healthy || m.Learner {
				return false, fmt.Errorf("member %s is %+v", m.Name, m)
			}
			return true, nil
		}
		return false, fmt.Errorf("no member %s in status: %+v", old.Name, ec.Status.Members)
	})
}

// containerPort is the number of pod's container port of that name.
func containerPort(t *testing.T, pod *corev1.Pod, container, name string) int32 {
	t.Helper()
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if c.Name == container && p.Name == name {
				return p.ContainerPort
			}
		}
	}
	t.Fatalf("pod %s/%s has no port %s in container %s", pod.Namespace, pod.Name, name, container)
	return 0
}
