package agent

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tend-dev/tend/internal/etcd"
)

// A segment of the archive holds consecutive revisions, each with every
// change it made and the time the archive received it. Its bytes:
//
//	"TENDSEG1" | header length (uint32, big-endian) | header (JSON) | payload
//
// where the payload, compressed as the header says, is per revision:
// uvarint revision, varint receive time (Unix nanoseconds), uvarint number
// of changes, and per change a kind byte (put, leased put, delete), the
// uvarint length of the key and the key, for a put the uvarint length of
// the value and the value, and for a leased put the lease's ID and TTL
// (varints). The header's SHA-256 and size are the
// uncompressed payload's, so a segment that does not read back whole is
// refused whatever its compression.

// segmentMagic opens every segment.
const segmentMagic = "TENDSEG1"

// maxSegmentHeader bounds the header that a reader accepts, and
// segmentHeaderBytes is the most a segment's magic, length and header take.
const (
	maxSegmentHeader   = 1 << 16
	segmentHeaderBytes = int64(len(segmentMagic)) + 4 + maxSegmentHeader
)

// The kinds of a change in a payload.
const (
	changePut       byte = 0
	changeLeasedPut byte = 1
	changeDelete    byte = 2
)

// ArchivedRevision is one revision of the archive.
type ArchivedRevision struct {
	etcd.Revision
	// Time is when the archive received the revision from etcd: after the
	// write was acknowledged, by at most the archive's lag then. A restore
	// to a time takes the revisions received at or before it, so it never
	// holds a write made after it.
	Time time.Time
}

// segmentHeader describes a segment.
type segmentHeader struct {
	// Owner is the archive's owner (the EtcdCluster's UID).
	Owner string `json:"owner"`
	// First and Last are its first and last revision: every revision
	// between them is in it.
	First int64 `json:"first"`
	Last  int64 `json:"last"`
	// FirstTime and LastTime are when the first and the last were received.
	FirstTime time.Time `json:"firstTime"`
	LastTime  time.Time `json:"lastTime"`
	// Changes counts the changes of all its revisions.
	Changes int `json:"changes"`
	// Compression of the payload.
	Compression Compression `json:"compression"`
	// SHA256 and Size are the uncompressed payload's.
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// encodeSegment writes revs, which must be consecutive, as one segment of
// owner's archive.
func encodeSegment(owner string, revs []ArchivedRevision, c Compression) ([]byte, segmentHeader, error) {
	if len(revs) == 0 {
		return nil, segmentHeader{}, errors.New("a segment needs at least one revision")
	}
	var payload bytes.Buffer
	var num [binary.MaxVarintLen64]byte
	uvarint := func(v uint64) { payload.Write(num[:binary.PutUvarint(num[:], v)]) }
	h := segmentHeader{
		Owner: owner, First: revs[0].Revision.Revision, Last: revs[len(revs)-1].Revision.Revision,
		FirstTime: revs[0].Time.UTC(), LastTime: revs[len(revs)-1].Time.UTC(), Compression: c,
	}
	for i, r := range revs {
		if r.Revision.Revision != h.First+int64(i) {
			return nil, segmentHeader{}, fmt.Errorf("revision %d follows %d in a segment: its revisions must be consecutive", r.Revision.Revision, h.First+int64(i)-1)
		}
		uvarint(uint64(r.Revision.Revision))
		payload.Write(num[:binary.PutVarint(num[:], r.Time.UnixNano())])
		uvarint(uint64(len(r.Changes)))
		for _, ch := range r.Changes {
			switch {
			case ch.Delete:
				payload.WriteByte(changeDelete)
			case ch.Lease != 0:
				payload.WriteByte(changeLeasedPut)
			default:
				payload.WriteByte(changePut)
			}
			uvarint(uint64(len(ch.Key)))
			payload.Write(ch.Key)
			if !ch.Delete {
				uvarint(uint64(len(ch.Value)))
				payload.Write(ch.Value)
			}
			if !ch.Delete && ch.Lease != 0 {
				payload.Write(num[:binary.PutVarint(num[:], ch.Lease)])
				payload.Write(num[:binary.PutVarint(num[:], ch.LeaseTTL)])
			}
		}
		h.Changes += len(r.Changes)
	}
	sum := sha256.Sum256(payload.Bytes())
	h.SHA256, h.Size = hex.EncodeToString(sum[:]), int64(payload.Len())

	head, err := json.Marshal(h)
	if err != nil {
		return nil, segmentHeader{}, err
	}
	var out bytes.Buffer
	out.WriteString(segmentMagic)
	_ = binary.Write(&out, binary.BigEndian, uint32(len(head)))
	out.Write(head)
	w, err := c.compressor(&out)
	if err != nil {
		return nil, segmentHeader{}, err
	}
	if _, err := w.Write(payload.Bytes()); err != nil {
		return nil, segmentHeader{}, err
	}
	if err := w.Close(); err != nil {
		return nil, segmentHeader{}, err
	}
	return out.Bytes(), h, nil
}

// readSegmentHeader reads a segment's header from r and leaves r at the
// payload. Its errors wrap ErrCorrupt.
func readSegmentHeader(r io.Reader) (segmentHeader, error) {
	var h segmentHeader
	magic := make([]byte, len(segmentMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != segmentMagic {
		return h, fmt.Errorf("%w: not an archive segment (no %s at its start)", ErrCorrupt, segmentMagic)
	}
	var n uint32
	if err := binary.Read(r, binary.BigEndian, &n); err != nil || n > maxSegmentHeader {
		return h, fmt.Errorf("%w: the segment's header length is missing or above %d bytes", ErrCorrupt, maxSegmentHeader)
	}
	head := make([]byte, n)
	if _, err := io.ReadFull(r, head); err != nil {
		return h, fmt.Errorf("%w: the segment ends in its header", ErrCorrupt)
	}
	if err := json.Unmarshal(head, &h); err != nil {
		return h, fmt.Errorf("%w: the segment's header does not parse: %w", ErrCorrupt, err)
	}
	if h.First <= 0 || h.Last < h.First {
		return h, fmt.Errorf("%w: the segment's header says revisions %d to %d", ErrCorrupt, h.First, h.Last)
	}
	return h, nil
}

// decodeSegment reads a whole segment and checks it: its payload's size and
// SHA-256, and that it holds every revision from First to Last once, in
// order. Its errors wrap ErrCorrupt or ErrChecksum.
func decodeSegment(data []byte) (segmentHeader, []ArchivedRevision, error) {
	r := bytes.NewReader(data)
	h, err := readSegmentHeader(r)
	if err != nil {
		return h, nil, err
	}
	d, err := h.Compression.decompressor(r)
	if err != nil {
		return h, nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	defer d.Close()
	payload, err := io.ReadAll(io.LimitReader(d, h.Size+1))
	if err != nil {
		return h, nil, fmt.Errorf("%w: the segment's payload does not decompress: %w", ErrCorrupt, err)
	}
	sum := sha256.Sum256(payload)
	if int64(len(payload)) != h.Size || hex.EncodeToString(sum[:]) != h.SHA256 {
		return h, nil, fmt.Errorf("%w: the segment of revisions %d to %d holds %d bytes with SHA-256 %x; its header says %d bytes with %s", ErrChecksum, h.First, h.Last, len(payload), sum, h.Size, h.SHA256)
	}
	revs, err := parsePayload(payload, h)
	if err != nil {
		return h, nil, fmt.Errorf("%w: the segment of revisions %d to %d: %w", ErrCorrupt, h.First, h.Last, err)
	}
	return h, revs, nil
}

// parsePayload reads a payload whose checksum was checked.
func parsePayload(payload []byte, h segmentHeader) ([]ArchivedRevision, error) {
	br := bufio.NewReader(bytes.NewReader(payload))
	bytesOf := func() ([]byte, error) {
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return nil, err
		}
		if n > uint64(h.Size) {
			return nil, fmt.Errorf("a length of %d bytes in a payload of %d", n, h.Size)
		}
		b := make([]byte, n)
		_, err = io.ReadFull(br, b)
		return b, err
	}
	revs := make([]ArchivedRevision, 0, h.Last-h.First+1)
	for want := h.First; want <= h.Last; want++ {
		rev, err := binary.ReadUvarint(br)
		if err != nil {
			return nil, err
		}
		if int64(rev) != want {
			return nil, fmt.Errorf("revision %d where %d should be", rev, want)
		}
		nanos, err := binary.ReadVarint(br)
		if err != nil {
			return nil, err
		}
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return nil, err
		}
		if n > uint64(h.Changes) {
			return nil, fmt.Errorf("revision %d has %d changes, more than the segment's %d", rev, n, h.Changes)
		}
		r := ArchivedRevision{Revision: etcd.Revision{Revision: want, Changes: make([]etcd.Change, 0, n)}, Time: time.Unix(0, nanos).UTC()}
		for range n {
			kind, err := br.ReadByte()
			if err != nil {
				return nil, err
			}
			var ch etcd.Change
			if ch.Key, err = bytesOf(); err != nil {
				return nil, err
			}
			switch kind {
			case changeDelete:
				ch.Delete = true
			case changePut, changeLeasedPut:
				if ch.Value, err = bytesOf(); err != nil {
					return nil, err
				}
				if kind == changeLeasedPut {
					if ch.Lease, err = binary.ReadVarint(br); err != nil {
						return nil, err
					}
					if ch.LeaseTTL, err = binary.ReadVarint(br); err != nil {
						return nil, err
					}
				}
			default:
				return nil, fmt.Errorf("a change of unknown kind %d in revision %d", kind, rev)
			}
			r.Changes = append(r.Changes, ch)
		}
		revs = append(revs, r)
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		return nil, errors.New("bytes after the last revision")
	}
	return revs, nil
}
