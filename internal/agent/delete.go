package agent

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"

	"github.com/tend-dev/tend/internal/agentapi"
)

// DeleteOptions are what an artifact's deletion needs.
type DeleteOptions struct {
	// URI is the artifact: s3://bucket/key or file:///path.
	URI string
	// S3 reaches the store of an s3:// URI.
	S3 S3Options
	// Owner is who wrote it: the EtcdBackup's UID.
	Owner string
	// Log receives progress; the zero Logger discards it.
	Log logr.Logger
}

// Delete removes the artifact that o.Owner wrote at o.URI, with a file's
// .meta.json. Nothing there is done already; an artifact of another owner,
// or of none that Tend recorded, is refused as terminal and left alone.
func Delete(ctx context.Context, o DeleteOptions) (agentapi.Result, error) {
	r := agentapi.Result{Op: agentapi.OpDelete}
	loc, err := ParseURI(o.URI)
	if err != nil {
		return r, err
	}
	if err := checkOwnerValue(o.Owner); err != nil {
		return r, err
	}
	if _, ok := ctx.Deadline(); !ok {
		return r, fmt.Errorf("%w: the deletion has no deadline", ErrInvalid)
	}
	st, err := openStore(ctx, loc, o.S3)
	if err != nil {
		return r, err
	}
	if err := st.remove(ctx, o.Owner); err != nil {
		return r, err
	}
	o.Log.Info("Deleted the artifact", "uri", loc.URI)
	return r, nil
}
