package webhook_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/testenv"
)

// The suite runs the manager as cmd/tend assembles it, but with no
// controllers at all, against a real apiserver whose PodSet CRD calls this
// process to convert: so the tests prove what users of each version see,
// and that conversion needs no controller.

var (
	env = testenv.New()
	// probeURL serves the suite manager's /healthz and /readyz.
	probeURL string
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
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

// startManager starts the manager and returns once it is ready, which is
// once its webhook serves.
func startManager(ctx context.Context) error {
	probe, err := freeAddr()
	if err != nil {
		return err
	}
	probeURL = "http://" + probe
	opts := manager.DefaultOptions()
	opts.MetricsAddr, opts.ProbeAddr = "0", probe
	opts.Webhook = env.WebhookOptions()
	mgr, err := manager.New(env.Config, opts, nil)
	if err != nil {
		return err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "manager: %v\n", err)
			os.Exit(1)
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := get(probeURL + "/readyz")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the manager is not ready: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// get returns the body of a 200 answer, or an error with the body of any
// other.
func get(url string) (string, error) {
	resp, err := http.Get(url) //nolint:gosec // a loopback URL the test built
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body), err
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}
