package etcdcluster

import (
	"context"
	"os"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/testenv"
)

// The suite runs the etcdcluster controller through the manager's assembly
// against a real apiserver. envtest runs no kubelet, so no member pod ever
// gets an IP, and Tend never calls etcd: the tests cover what it makes and
// reports before etcd answers, and the e2e tests cover the membership on a
// real node. The controller's clock is a fake one that the certificate test
// moves on. The roll tests play the StatefulSet controller (pods with IPs)
// and fake the members at the etcd boundary (members, roll_test.go); every
// other cluster has no etcd to reach.

var (
	env       = testenv.New()
	fakeClock = clocktesting.NewFakeClock(time.Now())
	members   = &fakeMembers{clusters: map[string]*fakeCluster{}}
)

func TestMain(m *testing.M) {
	os.Exit(env.RunWith(m, func(ctx context.Context) error {
		return env.StartManager(ctx, "0", []manager.Controller{Controller(&Options{Workers: 2, Clock: fakeClock, Connect: members.connect})})
	}))
}

// stepPastNow moves the controller's clock d past the later of its own
// time and the wall clock. The apiserver stamps objects with the wall
// clock (a pod's creationTimestamp, from which a roll times a restarted
// member), and the wall clock runs on while the fake one stands still: a
// plain Step of d from a clock left behind by the suite's earlier tests
// would not get d past an object made just now.
func stepPastNow(d time.Duration) {
	now := fakeClock.Now()
	if wall := time.Now(); wall.After(now) {
		now = wall
	}
	fakeClock.SetTime(now.Add(d))
}
