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

func TestMain(m *testing.M) { os.Exit(env.RunWith(m, startManager)) }

// startManager starts the manager and returns once it is ready, which is
// once its webhook serves.
func startManager(ctx context.Context) error {
	probe, err := freeAddr()
	if err != nil {
		return err
	}
	probeURL = "http://" + probe
	if err := env.StartManager(ctx, probe, nil); err != nil {
		return err
	}
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
