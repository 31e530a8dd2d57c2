package agent

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"

	"github.com/tend-dev/tend/internal/agentapi"
)

// PruneOptions are what a prune of an archive needs.
type PruneOptions struct {
	// Archive is the archive's location: s3://bucket/prefix or file:///dir.
	Archive string
	S3      S3Options
	// Owner is the UID the archive must belong to.
	Owner string
	// Before is the revision of the oldest base backup that is kept: the
	// segments whose every revision is at or below it are no longer needed
	// by any restore.
	Before int64
	// Log receives progress; the zero Logger discards it.
	Log logr.Logger
}

// Prune deletes, oldest first, the archive's segments that only restores
// from a base older than o.Before would need: a segment goes when the one
// after it starts at or below o.Before+1, so every revision it holds is at
// or below o.Before. The newest segment always stays. It refuses an
// archive that is not the owner's and a segment that another owner wrote,
// and leaves it alone.
func Prune(ctx context.Context, o PruneOptions) (agentapi.Result, error) {
	r := agentapi.Result{Op: agentapi.OpPrune}
	if _, ok := ctx.Deadline(); !ok {
		return r, fmt.Errorf("%w: the prune has no deadline", ErrInvalid)
	}
	if o.Before <= 0 {
		return r, fmt.Errorf("%w: the oldest kept base backup's revision must be positive", ErrInvalid)
	}
	if o.Owner == "" {
		return r, fmt.Errorf("%w: a prune deletes segments, and must name the archive's owner", ErrInvalid)
	}
	f, _, names, err := openArchive(ctx, o.Archive, o.S3, o.Owner)
	if err != nil {
		return r, err
	}
	p := &agentapi.Pruned{Kept: len(names)}
	r.Pruned = p
	for i := 0; i+1 < len(names); i++ {
		nextFirst, _ := segmentFirst(names[i+1])
		if nextFirst > o.Before+1 {
			break
		}
		h, err := withTimeout(ctx, func(ctx context.Context) (segmentHeader, error) { return readHeader(ctx, f, names[i], o.Owner) })
		if err != nil {
			return r, err
		}
		if err := withTimeoutErr(ctx, func(ctx context.Context) error { return f.remove(ctx, names[i]) }); err != nil {
			return r, err
		}
		p.Segments++
		p.Kept--
		p.Through = h.Last
	}
	o.Log.Info("Pruned the archive", "archive", f.String(), "before", o.Before, "segments", p.Segments, "through", p.Through, "kept", p.Kept)
	return r, nil
}
