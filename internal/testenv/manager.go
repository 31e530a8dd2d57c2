package testenv

import (
	"context"
	"fmt"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/tend-dev/tend/internal/manager"
)

// RunWith is Run for a package whose tests need servers of their own, such
// as a manager: once the apiserver is up it calls start with a context that
// ends with the tests, and runs the tests only if start succeeds.
//
//	func TestMain(m *testing.M) { os.Exit(env.RunWith(m, startManager)) }
func (e *Env) RunWith(m *testing.M, start func(ctx context.Context) error) int {
	if err := e.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	ctx, stop := context.WithCancel(context.Background())
	code := 1
	if err := start(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: starting the suite's servers: %v\n", err)
	} else {
		code = m.Run()
	}
	stop()
	// The managers first: an apiserver asked to stop while a manager still
	// watches and writes takes longer than its stop timeout under load, and
	// the package then fails after its tests passed.
	e.managers.Wait()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// ManagerOptions are `tend manager`'s defaults for a manager on this
// apiserver: metrics and probes off, the webhook as envtest expects it.
func (e *Env) ManagerOptions() manager.Options {
	opts := manager.DefaultOptions()
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	opts.Webhook = e.WebhookOptions()
	return opts
}

// StartManager starts a Tend manager of controllers on the apiserver, in
// the background until ctx ends, as `tend manager` assembles it: metrics
// off, probes at probeAddr ("0" for none), the webhook as envtest expects
// it, logs to standard error. A manager that fails ends the test binary:
// every test after it would fail for that reason.
func (e *Env) StartManager(ctx context.Context, probeAddr string, controllers []manager.Controller) error {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	opts := e.ManagerOptions()
	opts.ProbeAddr = probeAddr
	mgr, err := manager.New(e.Config, opts, controllers)
	if err != nil {
		return err
	}
	e.managers.Add(1)
	go func() {
		defer e.managers.Done()
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "manager: %v\n", err)
			os.Exit(1)
		}
	}()
	return nil
}

// Gauge is the value of the gauge name with exactly these labels in
// controller-runtime's registry, which the manager's /metrics serves: what
// a scrape of the manager would read now. ok is false when no such series
// exists.
func Gauge(name string, labels map[string]string) (value float64, ok bool, err error) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0, false, err
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, found := labels[l.GetName()]; !found || v != l.GetValue() {
					continue series
				}
			}
			return m.GetGauge().GetValue(), true, nil
		}
	}
	return 0, false, nil
}
