//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// newEtcd creates an EtcdCluster of n members in ns, with a short
// unhealthyFor so that a member down for long is replaced during the run,
// and waits until it is ready.
func newEtcd(t *testing.T, ns string, n int) *etcdHandle {
	t.Helper()
	return newEtcdWith(t, ns, n, nil)
}

// newEtcdWith is newEtcd with the spec changed by mutate before the create.
func newEtcdWith(t *testing.T, ns string, n int, mutate func(*etcdv1alpha1.EtcdClusterSpec)) *etcdHandle {
	t.Helper()
	ec := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kv"},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas: ptr.To(int32(n)),
			Version:  cluster.Settings.EtcdVersion,
			MemberReplacement: etcdv1alpha1.MemberReplacement{
				Policy:       etcdv1alpha1.MemberReplacementPolicy("Auto"),
				UnhealthyFor: &metav1.Duration{Duration: 30 * time.Second},
			},
		},
	}
	if mutate != nil {
		mutate(&ec.Spec)
	}
	if err := cluster.Client.Create(t.Context(), ec); err != nil {
		t.Fatal(err)
	}
	e := &etcdHandle{Namespace: ns, Name: ec.Name}
	e.waitReady(t, n)
	return e
}

// etcd member pods are killed under a writer, one at a time and a minority
// at once, by SIGKILL of etcd, left to restart in place or with the pod
// deleted as well. After each round the cluster settles; at the end every
// acknowledged write reads back, the members' data hash alike, no volume is
// left over, and a watch of etcd's member list never saw a member removed
// while that broke quorum.
func TestEtcdMemberKills(t *testing.T) {
	t.Parallel() // beside another etcd scenario, once the others ran (doc.go)
	r := scenario(t, "etcd member SIGKILL under writes")
	ctx := t.Context()
	n := 5
	if *flagShort {
		n = 3
	}
	ns := cluster.Namespace(t)
	e := newEtcd(t, ns, n)
	q := watchQuorum(e, e.clientTLS(t))
	defer q.stop()
	w := startWriter(t, e.client(t))

	rounds := 2 * scaled()
	for i := range rounds {
		rng := random(t)
		many := 1
		if i%2 == 1 {
			many = (n - 1) / 2 // a minority at once
		}
		deletePod := rng.IntN(2) == 0
		pods, err := e.pods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var victims []string
		var killed []corev1.Pod
		for _, j := range rng.Perm(len(pods))[:many] {
			p := &pods[j]
			if _, err := sigkillPod(p, "etcd"); err != nil {
				t.Fatalf("round %d: %v", i+1, err)
			}
			if deletePod {
				if err := cluster.Client.Delete(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			victims = append(victims, p.Name)
			killed = append(killed, *p)
		}
		r.Kills += len(victims)
		for _, v := range killed {
			e.waitRestarted(t, v)
		}
		e.waitReady(t, n)
		waitWrites(t, w, 20)
		r.Runs++
		t.Logf("Round %d: killed %v (pods deleted too: %t); settled with %d members; %d writes acknowledged so far", i+1, victims, deletePod, n, w.Acked())
	}

	e.checkWrites(t, r, w, q)
	e.checkOrphanClaims(t, r, n)
}

// waitRestarted waits until the member pod old has been seen to die: a new
// pod of its name, or its etcd container restarted. Only then may a ready
// status mean that the cluster got over the kill.
func (e *etcdHandle) waitRestarted(t *testing.T, old corev1.Pod) {
	t.Helper()
	restarts := etcdRestarts(&old)
	cluster.WaitFor(t, etcdTimeout, "member pod "+old.Name+" to restart after the kill", func(ctx context.Context) (bool, error) {
		p := &corev1.Pod{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(&old), p); err != nil {
			return false, err
		}
		if p.UID != old.UID || etcdRestarts(p) > restarts {
			return true, nil
		}
		return false, fmt.Errorf("same pod, etcd restarted %d times", etcdRestarts(p))
	})
}

func etcdRestarts(p *corev1.Pod) int32 {
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == "etcd" {
			return st.RestartCount
		}
	}
	return 0
}

// waitWrites waits until the writer has n more acknowledged writes: the
// cluster serves writes again, and the next kill falls among them.
func waitWrites(t *testing.T, w *framework.Writer, n int) {
	t.Helper()
	want := w.Acked() + n
	cluster.WaitFor(t, 2*time.Minute, fmt.Sprintf("%d more acknowledged writes", n), func(context.Context) (bool, error) {
		if got := w.Acked(); got < want {
			_, failed, lastErr := w.Snapshot()
			return false, fmt.Errorf("%d acknowledged, %d failed, the last with %w", got, failed, lastErr)
		}
		return true, nil
	})
}
