package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/go-logr/logr"

	"github.com/tend-dev/tend/internal/etcd"
)

// callTimeout bounds each short call to etcd (status, hashes, counts),
// within the step's own deadline.
const callTimeout = 30 * time.Second

// BackupOptions are what a backup needs.
type BackupOptions struct {
	// Etcd reaches the live cluster (LoadConnection).
	Etcd etcd.Config
	// To is where the artifact goes: s3://bucket/key or file:///path.
	To string
	// S3 reaches the store of an s3:// URI.
	S3 S3Options
	// Compression of the artifact.
	Compression Compression
	// Owner is who writes it: the EtcdBackup's UID. An artifact of another
	// owner is never replaced.
	Owner string
	// Log receives progress; the zero Logger discards it.
	Log logr.Logger
}

// Backup takes a snapshot of the healthy member with the highest revision
// and streams it, compressed as asked and hashed on the way, to o.To; then
// reads the stored bytes back and checks their size and SHA-256. The
// backup is complete only when Backup returns no error. The context's
// deadline bounds the whole step, and every call in it.
func Backup(ctx context.Context, o BackupOptions) (Result, error) {
	r := Result{Op: OpBackup}
	loc, err := ParseURI(o.To)
	if err != nil {
		return r, err
	}
	if err := checkOwnerValue(o.Owner); err != nil {
		return r, err
	}
	if o.Compression, err = ParseCompression(string(o.Compression)); err != nil {
		return r, err
	}
	if _, ok := ctx.Deadline(); !ok {
		return r, fmt.Errorf("%w: the backup has no deadline", ErrInvalid)
	}
	log := o.Log.WithValues("to", loc.URI)

	st, err := openStore(ctx, loc, o.S3)
	if err != nil {
		return r, err
	}
	prev, err := st.stat(ctx)
	if err != nil {
		return r, err
	}
	if err := checkOwner(loc, prev, o.Owner); err != nil {
		return r, err
	}

	cli, err := etcd.New(ctx, o.Etcd)
	if err != nil {
		return r, err
	}
	defer func() { _ = cli.Close() }()
	statusCtx, cancel := context.WithTimeout(ctx, callTimeout)
	statuses, err := cli.Status(statusCtx)
	cancel()
	if err != nil {
		return r, err
	}
	member, err := ChooseMember(statuses)
	if err != nil {
		return r, err
	}
	log.Info("Taking a snapshot", "member", member.Name, "endpoint", member.Endpoint, "revision", member.Revision, "compression", o.Compression)

	start := time.Now()
	info, written, err := stream(ctx, cli, member.Endpoint, st, o.Owner, prev, o.Compression)
	if err != nil {
		return r, err
	}
	log.Info("Stored the snapshot", "member", member.Name, "dbSizeBytes", info.Size, "sizeBytes", written.SizeBytes,
		"seconds", time.Since(start).Seconds())

	if err := readBack(ctx, st, written); err != nil {
		return r, err
	}
	log.Info("Read the artifact back", "sha256", written.SHA256)
	r.Artifact = &Artifact{URI: loc.URI, SizeBytes: written.SizeBytes, SHA256: written.SHA256, Compression: string(o.Compression)}
	r.Snapshot = &Snapshot{Member: member.Name, Revision: member.Revision, EtcdVersion: member.Version, DBSizeBytes: info.Size}
	return r, nil
}

// written is what stream stored.
type written struct {
	SizeBytes int64
	SHA256    string
	Version   string
}

// errStopped ends a snapshot whose upload has stopped.
var errStopped = errors.New("the store stopped reading")

// stream pipes a snapshot of the member at endpoint through the compressor
// and a SHA-256 into st. The snapshot runs in its own goroutine and the
// store reads from a pipe: the store sees the end of the stream only when
// the snapshot and the compressor ended well, and sees their error
// otherwise, so a cut snapshot never becomes a stored artifact.
func stream(ctx context.Context, cli *etcd.Client, endpoint string, st store, owner string, prev stored, c Compression) (etcd.SnapshotInfo, written, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	sum := &counter{h: sha256.New()}
	type outcome struct {
		info etcd.SnapshotInfo
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		info, err := snapshotInto(ctx, cli, endpoint, io.MultiWriter(sum, pw), c)
		_ = pw.CloseWithError(err) // nil: the reader's io.EOF
		done <- outcome{info, err}
	}()
	version, putErr := st.put(ctx, pr, owner, prev, func() fileMeta {
		return fileMeta{SHA256: sum.sum(), SizeBytes: sum.n, Compression: c}
	})
	// A store that stopped reading, on an error or not, ends the snapshot.
	_ = pr.CloseWithError(errStopped)
	if putErr != nil {
		cancel()
	}
	snap := <-done
	switch {
	case snap.err != nil && !errors.Is(snap.err, errStopped):
		return etcd.SnapshotInfo{}, written{}, snap.err
	case putErr != nil:
		return etcd.SnapshotInfo{}, written{}, putErr
	case snap.err != nil:
		return etcd.SnapshotInfo{}, written{}, snap.err
	}
	return snap.info, written{SizeBytes: sum.n, SHA256: sum.sum(), Version: version}, nil
}

// snapshotInto writes the member's snapshot, compressed, to w.
func snapshotInto(ctx context.Context, cli *etcd.Client, endpoint string, w io.Writer, c Compression) (etcd.SnapshotInfo, error) {
	zw, err := c.compressor(w)
	if err != nil {
		return etcd.SnapshotInfo{}, err
	}
	info, err := cli.SnapshotFrom(ctx, endpoint, zw)
	if err != nil {
		_ = zw.Close()
		return etcd.SnapshotInfo{}, err
	}
	if err := zw.Close(); err != nil {
		return etcd.SnapshotInfo{}, fmt.Errorf("compressing the snapshot: %w", err)
	}
	return info, nil
}

// readBack reads the stored artifact and checks that it is the bytes that
// were written: their size and SHA-256.
func readBack(ctx context.Context, st store, w written) error {
	body, size, err := st.open(ctx, w.Version)
	if err != nil {
		return fmt.Errorf("reading the artifact back: %w", err)
	}
	defer body.Close()
	sum := &counter{h: sha256.New()}
	if _, err := io.Copy(sum, body); err != nil {
		return fmt.Errorf("reading the artifact back: %w", err)
	}
	if size >= 0 && size != sum.n {
		return fmt.Errorf("%w: the store says the artifact has %d bytes and sent %d", ErrChecksum, size, sum.n)
	}
	if sum.n != w.SizeBytes || sum.sum() != w.SHA256 {
		return fmt.Errorf("%w: read back %d bytes with SHA-256 %s, wrote %d with %s", ErrChecksum, sum.n, sum.sum(), w.SizeBytes, w.SHA256)
	}
	return nil
}

// counter hashes and counts what is written to it.
type counter struct {
	h hash.Hash
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	c.h.Write(p)
	c.n += int64(len(p))
	return len(p), nil
}

func (c *counter) sum() string { return hex.EncodeToString(c.h.Sum(nil)) }
