//go:build e2e

package framework

import (
	"context"
	"testing"
	"time"
)

// Consistently checks cond every second for the whole of d, and fails the
// test at once when cond returns an error: a state that must hold for a
// while, such as nothing changing while paused. It asserts what is seen,
// not how long anything takes: a slow cluster only makes it check less
// often.
func (c *Cluster) Consistently(t testing.TB, d time.Duration, what string, cond func(ctx context.Context) error) {
	t.Helper()
	end := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
		err := cond(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !time.Now().Before(end) {
			return
		}
		time.Sleep(min(pollInterval, time.Until(end)))
	}
}
