//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// The manager is killed at a random point of EtcdCluster scale-outs (3 → 5,
// or 3 → 4 in the short form) and scale-ins back to 3 under a writer. After each the cluster settles with
// the spec's members, the removed members' volumes go, and at the end every
// acknowledged write reads back and the members' data hash alike; a watch
// of etcd's member list never saw a removal that broke quorum.
func TestEtcdScaleManagerKills(t *testing.T) {
	t.Parallel() // beside another etcd scenario, once the others ran (doc.go)
	r := scenario(t, "EtcdCluster scale, manager SIGKILL")
	ctx := t.Context()
	ns := cluster.Namespace(t)
	e := newEtcd(t, ns, 3)
	q := watchQuorum(e, e.clientTLS(t))
	defer q.stop()
	w := startWriter(t, e.client(t))

	// The short form adds one member, not two: members join one at a time.
	current, big := 3, 5
	if *flagShort {
		big = 4
	}
	r.Orphans = 0
	for i := range 2 * scaled() {
		target := big
		if current == big {
			target = 3
		}
		// Adding two members one at a time takes tens of seconds; the kill
		// falls anywhere in the first 20.
		delay := time.Duration(random(t).Int64N(int64(20 * time.Second)))
		if err := e.patchSpec(ctx, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Replicas = ptr.To(int32(target)) }); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		k := r.killManager(t, fmt.Sprintf("kill %d (scale %d → %d, %s in)", i+1, current, target, delay.Round(time.Millisecond)))
		e.waitReady(t, target)
		// The removed members' volumes go once etcd has forgotten them.
		cluster.WaitFor(t, 2*time.Minute, "no volume of a removed member", func(ctx context.Context) (bool, error) {
			orphans, err := e.orphanClaims(ctx, target)
			if err != nil {
				return false, err
			}
			if len(orphans) > 0 {
				return false, fmt.Errorf("volumes of no member: %v", orphans)
			}
			return true, nil
		})
		waitWrites(t, w, 20)
		r.Runs++
		t.Logf("Kill %d: scale %d → %d, manager %s killed %s in, a new one led after %.1fs; settled; %d writes acknowledged so far",
			i+1, current, target, k.Pod, delay.Round(time.Millisecond), k.Takeover.Seconds(), w.Acked())
		current = target
	}

	e.checkWrites(t, r, w, q)
}
