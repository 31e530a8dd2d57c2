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

	"github.com/tend-dev/tend/internal/agentapi"
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
func Backup(ctx context.Context, o BackupOptions) (agentapi.Result, error) {
	r := agentapi.Result{Op: agentapi.OpBackup}
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
	r.Artifact = &agentapi.Artifact{URI: loc.URI, SizeBytes: written.SizeBytes, SHA256: written.SHA256, Compression: string(o.Compression)}
	r.Snapshot = &agentapi.Snapshot{Member: member.Name, Revision: member.Revision, EtcdVersion: member.Version, DBSizeBytes: info.Size}
	return r, nil
}

// written is what stream stored.
type written struct {
	SizeBytes int64
	SHA256    string
	Version   string
}

// errStopped is what a writer to a store that stopped reading gets.
var errStopped = errors.New("the store stopped reading")

// stream writes a snapshot of the member at endpoint, through the
// compressor and a SHA-256, into a new artifact of st, and puts it in place
// only when the snapshot and the compressor ended well (etcd's own SHA-256
// included), so a cut snapshot never becomes a stored artifact.
func stream(ctx context.Context, cli *etcd.Client, endpoint string, st store, owner string, prev stored, c Compression) (etcd.SnapshotInfo, written, error) {
	up, err := st.create(ctx, owner, prev)
	if err != nil {
		return etcd.SnapshotInfo{}, written{}, err
	}
	// Uncompressed, the stored bytes are the snapshot's, whose SHA-256
	// SnapshotFrom computes as it checks etcd's: one pass, not two.
	sum := &counter{}
	if c != None {
		sum.h = sha256.New()
	}
	info, err := snapshotInto(ctx, cli, endpoint, io.MultiWriter(sum, up), c)
	if err != nil {
		if storeErr := up.abort(err); storeErr != nil {
			return etcd.SnapshotInfo{}, written{}, storeErr
		}
		return etcd.SnapshotInfo{}, written{}, err
	}
	w := written{SizeBytes: sum.n, SHA256: info.SHA256}
	if sum.h != nil {
		w.SHA256 = sum.sum()
	}
	w.Version, err = up.commit(fileMeta{SHA256: w.SHA256, SizeBytes: w.SizeBytes, Compression: c})
	if err != nil {
		return etcd.SnapshotInfo{}, written{}, err
	}
	return info, w, nil
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
	if _, err := io.CopyBuffer(sum, readerOnly{body}, make([]byte, 1<<20)); err != nil {
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

// counter counts what is written to it, and hashes it when it has a hash.
type counter struct {
	h hash.Hash
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	if c.h != nil {
		c.h.Write(p)
	}
	c.n += int64(len(p))
	return len(p), nil
}

func (c *counter) sum() string { return hex.EncodeToString(c.h.Sum(nil)) }
