package webhook_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/tend-dev/tend/internal/testenv"
	"github.com/tend-dev/tend/internal/testing/loopback"
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
	probe, err := loopback.Addr()
	if err != nil {
		return err
	}
	probeURL = "http://" + probe
	if err := env.StartManager(ctx, probe, nil); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := loopback.Get(probeURL + "/readyz")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the manager is not ready: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
