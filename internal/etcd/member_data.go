package etcd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// The calls below ask one member, at its client URL, about its own copy of
// the store: what a backup takes and what a verification compares. Each
// goes to the endpoint given (the Endpoint of the member's MemberStatus, or
// a lone member's URL) and fails fast when that member is down.

// KVHash is a member's hash of the key-value history that it keeps up to a
// revision, as etcd's HashKV returns it.
type KVHash struct {
	// Hash covers every revision of every key from CompactRevision to
	// Revision. Two stores hold the same history up to Revision when their
	// hashes, and their CompactRevisions, are equal.
	Hash uint32
	// Revision is the revision hashed: the one asked for, or the member's
	// latest when 0 was asked for.
	Revision int64
	// CompactRevision is the member's compaction when it hashed; the history
	// before it is gone. Hashes of stores compacted at different revisions
	// do not compare.
	CompactRevision int64
}

// HashKV returns the hash of the key-value history of the member at
// endpoint up to revision rev, or up to its latest revision when rev is 0.
// A rev older than the member's compaction fails with ErrCompacted. It
// needs root's rights when auth is on.
func (c *Client) HashKV(ctx context.Context, endpoint string, rev int64) (KVHash, error) {
	var h KVHash
	op := "hashing the key-values of " + endpoint + " at " + revString(rev)
	err := c.onMember(ctx, op, endpoint, func(ctx context.Context, conn *grpc.ClientConn) error {
		resp, err := pb.NewMaintenanceClient(conn).HashKV(ctx, &pb.HashKVRequest{Revision: rev}, failFast)
		if err != nil {
			return err
		}
		h = KVHash{Hash: resp.Hash, Revision: resp.HashRevision, CompactRevision: resp.CompactRevision}
		// Servers before v3.5.5 do not say which revision they hashed:
		// the one asked for, else their latest, in the header.
		if h.Revision == 0 {
			h.Revision = rev
			if rev == 0 {
				h.Revision = resp.Header.GetRevision()
			}
		}
		return nil
	})
	if err != nil {
		return KVHash{}, err
	}
	return h, nil
}

// KeyCount returns how many keys the store of the member at endpoint held
// at revision rev (0: its latest). It reads the member's own copy
// (serializable), so it needs no quorum; a revision the member has not
// applied yet is refused.
func (c *Client) KeyCount(ctx context.Context, endpoint string, rev int64) (int64, error) {
	var n int64
	op := "counting the keys of " + endpoint + " at " + revString(rev)
	err := c.onMember(ctx, op, endpoint, func(ctx context.Context, conn *grpc.ClientConn) error {
		// From the smallest key to the end of the key space: every key.
		resp, err := pb.NewKVClient(conn).Range(ctx, &pb.RangeRequest{
			Key: []byte{0}, RangeEnd: []byte{0}, Revision: rev, CountOnly: true, Serializable: true,
		}, failFast)
		if err != nil {
			return err
		}
		n = resp.Count
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// SnapshotFrom streams a snapshot of the store of the member at endpoint to
// w, as Snapshot does from whichever member the client picks. It checks the
// SHA-256 that etcd appends to the database as the data passes (and returns
// the SHA-256 of all it wrote, from the same pass): a stream
// that ends early, or whose data does not match it, fails with
// ErrSnapshotChecksum, so a caller that writes w somewhere durable can
// refuse to keep it. w receives every byte, the SHA-256 included, which
// etcdutl snapshot restore checks again.
func (c *Client) SnapshotFrom(ctx context.Context, endpoint string, w io.Writer) (SnapshotInfo, error) {
	var info SnapshotInfo
	err := c.onMember(ctx, "taking a snapshot from "+endpoint, endpoint, func(ctx context.Context, conn *grpc.ClientConn) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel() // ends the stream when w fails
		stream, err := pb.NewMaintenanceClient(conn).Snapshot(ctx, &pb.SnapshotRequest{}, failFast)
		if err != nil {
			return err
		}
		check := newTrailerCheck()
		first := true
		var size int64 // the database's, as the first message says
		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			if first {
				info.Version = resp.Version
				size = int64(resp.RemainingBytes) + int64(len(resp.Blob))
				first = false
			}
			if _, err := w.Write(resp.Blob); err != nil {
				return err
			}
			check.write(resp.Blob)
			info.Size += int64(len(resp.Blob))
		}
		if got := info.Size - sha256.Size; got != size {
			return fmt.Errorf("%w: the member announced %d bytes of database and sent %d, with its SHA-256", ErrSnapshotChecksum, size, got)
		}
		ok, whole := check.finish()
		if !ok {
			return fmt.Errorf("%w: the SHA-256 at the end of the stream is not that of the %d bytes before it", ErrSnapshotChecksum, size)
		}
		info.SHA256 = hex.EncodeToString(whole)
		return nil
	})
	if err != nil {
		return SnapshotInfo{}, err
	}
	return info, nil
}

// trailerCheck hashes a stream but for its last sha256.Size bytes, which it
// keeps back, to compare them with the hash at the end.
type trailerCheck struct {
	h    hash.Hash
	tail []byte // the last bytes seen, at most sha256.Size
}

func newTrailerCheck() *trailerCheck {
	return &trailerCheck{h: sha256.New(), tail: make([]byte, 0, 2*sha256.Size)}
}

func (t *trailerCheck) write(p []byte) {
	if len(p) >= sha256.Size {
		t.h.Write(t.tail)
		t.h.Write(p[:len(p)-sha256.Size])
		t.tail = append(t.tail[:0], p[len(p)-sha256.Size:]...)
		return
	}
	t.tail = append(t.tail, p...)
	if over := len(t.tail) - sha256.Size; over > 0 {
		t.h.Write(t.tail[:over])
		t.tail = append(t.tail[:0], t.tail[over:]...)
	}
}

// finish tells whether the last bytes were the SHA-256 of those before
// them, and returns the SHA-256 of the whole stream, from the same pass.
func (t *trailerCheck) finish() (ok bool, whole []byte) {
	ok = len(t.tail) == sha256.Size && bytes.Equal(t.h.Sum(nil), t.tail) // Sum leaves the state as it was
	t.h.Write(t.tail)
	t.tail = t.tail[:0]
	return ok, t.h.Sum(nil)
}

func revString(rev int64) string {
	if rev == 0 {
		return "its latest revision"
	}
	return "revision " + strconv.FormatInt(rev, 10)
}
