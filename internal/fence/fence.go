package fence

import (
	"context"
	"errors"
)

// ErrNotLeader is what a Gate returns, wrapped, once this process is found
// not to hold the leader-election Lease: another process holds it, or it
// has expired. It is for good: the manager stops.
var ErrNotLeader = errors.New("this process does not hold the leader-election Lease")

// Gate is the check that a write passes before it is sent. Reads do not
// pass it.
type Gate interface {
	// Allow returns nil if the caller may write now. It returns an error
	// wrapping ErrNotLeader once this process is known not to lead, and
	// another error when it could not find out (the Lease could not be
	// read): either way, the write must not be sent.
	Allow(ctx context.Context) error
}

// Open is the Gate of a process without leader election: every write
// passes.
type Open struct{}

// Allow returns nil.
func (Open) Allow(context.Context) error { return nil }
