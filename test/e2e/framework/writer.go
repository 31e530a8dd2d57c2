//go:build e2e

package framework

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Writer puts keys <prefix>k000001, <prefix>k000002, ... through one
// client until stopped, and remembers the writes that etcd acknowledged.
// A write that fails or is cut short may or may not have happened, so it
// is only counted. The e2e tests and the chaos suite use it to count
// acknowledged writes lost.
type Writer struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu      sync.Mutex
	ok      map[string]string
	acks    []time.Time // when each acknowledgement came, in order
	failed  int
	lastErr error
}

// StartWriter starts a Writer on cli; it stops when the test ends, if not
// before.
func StartWriter(t testing.TB, cli *clientv3.Client, prefix string) *Writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{cancel: cancel, done: make(chan struct{}), ok: map[string]string{}}
	go w.run(ctx, cli, prefix)
	t.Cleanup(func() { _, _, _ = w.Stop() })
	return w
}

func (w *Writer) run(ctx context.Context, cli *clientv3.Client, prefix string) {
	defer close(w.done)
	for i := 1; ctx.Err() == nil; i++ {
		key, value := fmt.Sprintf("%sk%06d", prefix, i), fmt.Sprintf("v%d", rand.Int64())
		putCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.Put(putCtx, key, value)
		cancel()
		w.mu.Lock()
		switch {
		case err == nil:
			w.ok[key] = value
			w.acks = append(w.acks, time.Now())
		case ctx.Err() == nil:
			w.failed++
			w.lastErr = err
		}
		w.mu.Unlock()
		// A steady trickle, not a flood: the node has two cores.
		pause := 20 * time.Millisecond
		if err != nil {
			pause = 200 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

// Acked is the number of acknowledged writes so far.
func (w *Writer) Acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ok)
}

// Snapshot returns the number of acknowledged and failed writes so far and
// the last failure, without stopping the writer.
func (w *Writer) Snapshot() (acked, failed int, lastErr error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ok), w.failed, w.lastErr
}

// Stop stops the writer and returns the acknowledged writes (key: value),
// the number of failed ones and the last failure.
func (w *Writer) Stop() (map[string]string, int, error) {
	w.once.Do(func() {
		w.cancel()
		<-w.done
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.ok), w.failed, w.lastErr
}

// LongestGap is the longest time within [from, to] without an
// acknowledged write: between two acknowledgements, or between an end of
// the window and the acknowledgement nearest to it.
func (w *Writer) LongestGap(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var longest time.Duration
	last := from
	for _, at := range w.acks {
		if at.Before(from) || at.After(to) {
			continue
		}
		longest = max(longest, at.Sub(last))
		last = at
	}
	return max(longest, to.Sub(last))
}

// Lost lists the acknowledged writes that stored does not hold as
// written, sorted, as key=value (read value).
func Lost(acked, stored map[string]string) []string {
	var lost []string
	for k, v := range acked {
		if stored[k] != v {
			lost = append(lost, fmt.Sprintf("%s=%q (read %q)", k, v, stored[k]))
		}
	}
	slices.Sort(lost)
	return lost
}
