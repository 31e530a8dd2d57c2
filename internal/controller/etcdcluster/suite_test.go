package etcdcluster

import (
	"context"
	"os"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/etcd"
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
	archives  = &fakeArchives{states: map[string]agentapi.ArchiveState{}}
)

func TestMain(m *testing.M) {
	os.Exit(env.RunWith(m, func(ctx context.Context) error {
		return env.StartManager(ctx, "0", []manager.Controller{Controller(&Options{Workers: 2, Clock: fakeClock, Connect: needDeadline(members.connect), ArchiveState: archives.state})})
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

// needDeadline makes the fakes behind connect refuse, as the real client
// does (etcd.ErrNoDeadline), every call whose context has no deadline: a
// pass must bound each etcd call.
func needDeadline(connect func(context.Context, etcd.Config) (Members, error)) func(context.Context, etcd.Config) (Members, error) {
	return func(ctx context.Context, cfg etcd.Config) (Members, error) {
		m, err := connect(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return deadlined{m}, nil
	}
}

// deadlined is Members that refuse a context without a deadline.
type deadlined struct{ m Members }

func bounded(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		return etcd.ErrNoDeadline
	}
	return nil
}

func (d deadlined) Status(ctx context.Context) ([]etcd.MemberStatus, error) {
	if err := bounded(ctx); err != nil {
		return nil, err
	}
	return d.m.Status(ctx)
}

func (d deadlined) AddLearner(ctx context.Context, peerURL string) (etcd.Member, error) {
	if err := bounded(ctx); err != nil {
		return etcd.Member{}, err
	}
	return d.m.AddLearner(ctx, peerURL)
}

func (d deadlined) Promote(ctx context.Context, id etcd.MemberID) error {
	if err := bounded(ctx); err != nil {
		return err
	}
	return d.m.Promote(ctx, id)
}

func (d deadlined) Remove(ctx context.Context, id etcd.MemberID) error {
	if err := bounded(ctx); err != nil {
		return err
	}
	return d.m.Remove(ctx, id)
}

func (d deadlined) MoveLeader(ctx context.Context, to etcd.MemberID) error {
	if err := bounded(ctx); err != nil {
		return err
	}
	return d.m.MoveLeader(ctx, to)
}

func (d deadlined) EnableAuth(ctx context.Context, rootPassword string) error {
	if err := bounded(ctx); err != nil {
		return err
	}
	return d.m.EnableAuth(ctx, rootPassword)
}

func (d deadlined) SetRootPassword(ctx context.Context, password string) error {
	if err := bounded(ctx); err != nil {
		return err
	}
	return d.m.SetRootPassword(ctx, password)
}

func (d deadlined) Compact(ctx context.Context, rev int64) error {
	if err := bounded(ctx); err != nil {
		return err
	}
	return d.m.Compact(ctx, rev)
}

func (d deadlined) Defragment(ctx context.Context, endpoint string) (etcd.Defragmented, error) {
	if err := bounded(ctx); err != nil {
		return etcd.Defragmented{}, err
	}
	return d.m.Defragment(ctx, endpoint)
}

func (d deadlined) DisarmNoSpace(ctx context.Context) (int, error) {
	if err := bounded(ctx); err != nil {
		return 0, err
	}
	return d.m.DisarmNoSpace(ctx)
}

func (d deadlined) DisableAuth(ctx context.Context) error {
	if err := bounded(ctx); err != nil {
		return err
	}
	return d.m.DisableAuth(ctx)
}

func (d deadlined) Close() error { return d.m.Close() }
