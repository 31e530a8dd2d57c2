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
// from a base older than o.Before would need (see pruneSegments). It
// refuses an archive that is not the owner's and a segment that another
// owner wrote, and leaves it alone.
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
	p, err := pruneSegments(ctx, f, names, o.Owner, o.Before, nil)
	r.Pruned = &p
	if err != nil {
		return r, err
	}
	o.Log.Info("Pruned the archive", "archive", f.String(), "before", o.Before, "segments", p.Segments, "through", p.Through, "kept", p.Kept)
	return r, nil
}

// pruneSegments deletes, oldest first, the segments of names (the
// archive's, in revision order) that hold no revision after before: a
// segment goes when the one after it starts at or below before+1, so the
// one that holds before+1 stays, and so does the newest. Each segment's
// header is read first, so that a segment another owner wrote stops it.
// deleted, when not nil, is told of each deletion. It returns what it
// did; names[p.Segments:] are the segments kept.
func pruneSegments(ctx context.Context, f folder, names []string, owner string, before int64, deleted func()) (agentapi.Pruned, error) {
	p := agentapi.Pruned{Kept: len(names)}
	for i := 0; i+1 < len(names); i++ {
		nextFirst, _ := segmentFirst(names[i+1])
		if nextFirst > before+1 {
			break
		}
		h, err := withTimeout(ctx, func(ctx context.Context) (segmentHeader, error) { return readHeader(ctx, f, names[i], owner) })
		if err != nil {
			return p, err
		}
		if err := withTimeoutErr(ctx, func(ctx context.Context) error { return f.remove(ctx, names[i]) }); err != nil {
			return p, err
		}
		p.Segments++
		p.Kept--
		p.Through = h.Last
		if deleted != nil {
			deleted()
		}
	}
	return p, nil
}
