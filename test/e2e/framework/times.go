//go:build e2e

package framework

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// timesFile is where Run writes how long each test ran, longest first: go
// test prints a passing package's output only with -v, so make prints the
// file. The parallel tests start about in the order they are declared;
// these times tell which to declare first.
var timesFile = flag.String("e2e.times", "", "write each test's running time to this file, longest first")

// testTime is how long one test ran: from its namespace's creation (after
// t.Parallel, so not its wait for a slot) to the end of its cleanups.
type testTime struct {
	name   string
	took   time.Duration
	failed bool
}

// timeTests records the tests' running times.
type timeTests struct {
	mu      sync.Mutex
	times   []testTime
	started map[string]bool
}

// start records t's running time from now until its cleanups end: it is
// the first cleanup registered, so it runs last. A test's second
// namespace changes nothing.
func (tt *timeTests) start(t testing.TB) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.started[t.Name()] {
		return
	}
	if tt.started == nil {
		tt.started = map[string]bool{}
	}
	tt.started[t.Name()] = true
	began := time.Now()
	t.Cleanup(func() {
		tt.mu.Lock()
		defer tt.mu.Unlock()
		tt.times = append(tt.times, testTime{name: t.Name(), took: time.Since(began), failed: t.Failed()})
	})
}

// write writes the times to *timesFile, when it is set.
func (tt *timeTests) write() error {
	if *timesFile == "" {
		return nil
	}
	tt.mu.Lock()
	times := slices.Clone(tt.times)
	tt.mu.Unlock()
	slices.SortFunc(times, func(a, b testTime) int { return cmp.Or(cmp.Compare(b.took, a.took), cmp.Compare(a.name, b.name)) })
	var b strings.Builder
	fmt.Fprintf(&b, "e2e tests by running time (from the namespace's creation to the end of the test's cleanups), %d tests:\n", len(times))
	for _, x := range times {
		result := "ok"
		if x.failed {
			result = "FAILED"
		}
		fmt.Fprintf(&b, "%8.1fs  %-6s %s\n", x.took.Seconds(), result, x.name)
	}
	if err := os.MkdirAll(filepath.Dir(*timesFile), 0o755); err != nil {
		return err
	}
	return os.WriteFile(*timesFile, []byte(b.String()), 0o644)
}
