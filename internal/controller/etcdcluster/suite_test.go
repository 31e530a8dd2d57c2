package etcdcluster

import (
	"context"
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

	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/testenv"
)

// The suite runs the etcdcluster controller through the manager's assembly
// against a real apiserver. envtest runs no kubelet, so no member pod ever
// gets an IP, and Tend never calls etcd: the tests cover what it makes and
// reports before etcd answers, and the e2e tests cover the membership on a
// real node. The controller's
// clock is a fake one that the certificate test moves on.

var (
	env       = testenv.New()
	fakeClock = clocktesting.NewFakeClock(time.Now())
)

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
