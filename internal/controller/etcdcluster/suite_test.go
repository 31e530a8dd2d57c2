package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/tend-dev/tend/internal/etcd"
	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/testenv"
)

// The suite runs the etcdcluster controller through the manager's assembly
// against a real apiserver. envtest runs no kubelet, so no member pod ever
// starts: the tests cover what Tend makes and reports before etcd answers,
// and the e2e tests cover the membership on a real node. The controller's
// clock is a fake one that the certificate test moves on.

var (
	env   = testenv.New()
	fakeClock = clocktesting.NewFakeClock(time.Now())
)

// errNoPods is what the etcd client meets in envtest, at once rather than
// at its deadline: no member runs.
var errNoPods = errors.New("envtest runs no pods, so no member answers")

type unreachable struct{}

func (unreachable) Status(context.Context) ([]etcd.MemberStatus, error) { return nil, errNoPods }
func (unreachable) AddLearner(context.Context, string) (etcd.Member, error) {
	return etcd.Member{}, errNoPods
}
func (unreachable) Promote(context.Context, etcd.MemberID) error    { return errNoPods }
func (unreachable) Remove(context.Context, etcd.MemberID) error     { return errNoPods }
func (unreachable) MoveLeader(context.Context, etcd.MemberID) error { return errNoPods }
func (unreachable) EnableAuth(context.Context, string) error        { return errNoPods }
func (unreachable) Close() error                                    { return nil }

func TestMain(m *testing.M) {
	if err := env.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		os.Exit(1)
	}
	ctx, stop := context.WithCancel(context.Background())
	code := 1
	if err := startManager(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "starting the manager: %v\n", err)
	} else {
		code = m.Run()
	}
	stop()
	if err := env.Stop(); err != nil && code == 0 {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

func startManager(ctx context.Context) error {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	opts := manager.DefaultOptions()
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	opts.Webhook = env.WebhookOptions()
	controller := manager.Controller{
		Name:  Name,
		Cache: map[client.Object]cache.ByObject{&corev1.PersistentVolumeClaim{}: PVCCache()},
		Setup: func(mgr ctrl.Manager) error {
			r := &Reconciler{
				Client:    mgr.GetClient(),
				APIReader: mgr.GetAPIReader(),
				Recorder:  mgr.GetEventRecorder("tend-etcdcluster"),
				Clock:     fakeClock,
				Connect:   func(context.Context, etcd.Config) (Members, error) { return unreachable{}, nil },
			}
			return r.SetupWithManager(mgr, 2)
		},
	}
	mgr, err := manager.New(env.Config, opts, []manager.Controller{controller})
	if err != nil {
		return err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "manager: %v\n", err)
			os.Exit(1)
		}
	}()
	return nil
}
