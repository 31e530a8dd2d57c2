package etcd

import (
	"context"
	"io"
)

// SnapshotInfo describes a snapshot that Snapshot wrote.
type SnapshotInfo struct {
	// Size is the number of bytes written.
	Size int64
	// Version is the storage version of the database, such as "3.6.0":
	// the etcd minor release that restores it. Empty from members older
	// than v3.6, and from a v3.6 member in its first seconds, before it has
	// written its storage version.
	Version string
	// SHA256 is the hex SHA-256 of every byte written (the database and
	// the SHA-256 that etcd appends to it), which SnapshotFrom computes
	// while it checks the stream; Snapshot leaves it empty.
	SHA256 string
}

// Snapshot streams a point-in-time snapshot of the store from one member to
// w: the database file, followed by its SHA-256, which etcdutl snapshot
// restore checks. etcd sends no revision with it; etcdutl snapshot status
// reads the revision from the file. The context's deadline must leave time for the whole
// stream, which is about the database's size; when it passes mid-stream, or
// w fails, Snapshot returns the error and what w holds is not a snapshot.
func (c *Client) Snapshot(ctx context.Context, w io.Writer) (SnapshotInfo, error) {
	var info SnapshotInfo
	err := c.do(ctx, "taking a snapshot", func(ctx context.Context) error {
		resp, err := c.cli.SnapshotWithVersion(ctx)
		if err != nil {
			return err
		}
		defer resp.Snapshot.Close()
		info.Version = resp.Version
		info.Size, err = io.Copy(w, resp.Snapshot)
		return err
	})
	if err != nil {
		return SnapshotInfo{}, err
	}
	return info, nil
}
