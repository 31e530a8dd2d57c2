package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/etcd"
)

// someRevisions are revisions 41 to 44 with every kind of change: a
// transaction of several keys, a leased put, an empty value, a range
// delete, and binary keys.
func someRevisions() []ArchivedRevision {
	at := time.Date(2026, 11, 28, 14, 3, 0, 0, time.UTC)
	return []ArchivedRevision{
		{Revision: etcd.Revision{Revision: 41, Changes: []etcd.Change{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}}}, Time: at},
		{Revision: etcd.Revision{Revision: 42, Changes: []etcd.Change{{Key: []byte("lease/x"), Value: []byte("held"), Lease: 0x7a11, LeaseTTL: 60}}}, Time: at.Add(time.Millisecond)},
		{Revision: etcd.Revision{Revision: 43, Changes: []etcd.Change{{Key: []byte("empty"), Value: []byte{}}}}, Time: at.Add(2 * time.Millisecond)},
		{Revision: etcd.Revision{Revision: 44, Changes: []etcd.Change{{Key: []byte("a"), Delete: true}, {Key: []byte{0, 0xff, '\n'}, Delete: true}}}, Time: at.Add(time.Second)},
	}
}

func TestSegmentRoundTrip(t *testing.T) {
	for _, c := range []Compression{None, Gzip, Zstd} {
		t.Run(string(c), func(t *testing.T) {
			g := NewWithT(t)
			in := someRevisions()
			data, h, err := encodeSegment("uid-1", in, c)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(h).To(SatisfyAll(
				HaveField("Owner", "uid-1"), HaveField("First", int64(41)), HaveField("Last", int64(44)),
				HaveField("Changes", 6), HaveField("FirstTime", in[0].Time), HaveField("LastTime", in[3].Time),
			))
			got, out, err := decodeSegment(data)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(h))
			g.Expect(out).To(HaveLen(4))
			for i := range in {
				g.Expect(out[i].Revision.Revision).To(Equal(in[i].Revision.Revision))
				g.Expect(out[i].Time).To(BeTemporally("==", in[i].Time))
				g.Expect(out[i].Changes).To(HaveLen(len(in[i].Changes)))
				for j, ch := range in[i].Changes {
					o := out[i].Changes[j]
					g.Expect(string(o.Key)).To(Equal(string(ch.Key)))
					g.Expect(string(o.Value)).To(Equal(string(ch.Value)))
					g.Expect(o.Delete).To(Equal(ch.Delete))
					g.Expect(o.Lease).To(Equal(ch.Lease))
					g.Expect(o.LeaseTTL).To(Equal(ch.LeaseTTL))
				}
			}
		})
	}
}

func TestSegmentRefusesDamage(t *testing.T) {
	g := NewWithT(t)
	data, _, err := encodeSegment("uid-1", someRevisions(), None)
	g.Expect(err).NotTo(HaveOccurred())

	// A flipped byte in the payload: the checksum.
	flipped := append([]byte(nil), data...)
	flipped[len(flipped)-3] ^= 0x40
	_, _, err = decodeSegment(flipped)
	g.Expect(err).To(MatchError(ErrChecksum))

	// A segment cut short.
	_, _, err = decodeSegment(data[:len(data)-5])
	g.Expect(err).To(MatchError(ErrChecksum))

	// Not a segment at all, and a header that lies about its revisions.
	_, _, err = decodeSegment([]byte("PK\x03\x04 something else"))
	g.Expect(err).To(MatchError(ErrCorrupt))
	lying := strings.Replace(string(data), `"last":44`, `"last":45`, 1)
	_, _, err = decodeSegment([]byte(lying))
	g.Expect(err).To(HaveOccurred())
	g.Expect(Terminal(err)).To(BeTrue())
}

func TestSegmentNeedsConsecutiveRevisions(t *testing.T) {
	g := NewWithT(t)
	revs := someRevisions()
	_, _, err := encodeSegment("uid-1", []ArchivedRevision{revs[0], revs[2]}, None)
	g.Expect(err).To(MatchError(ContainSubstring("consecutive")))
	_, _, err = encodeSegment("uid-1", nil, None)
	g.Expect(err).To(HaveOccurred())
}

func TestSegmentNames(t *testing.T) {
	g := NewWithT(t)
	g.Expect(segmentName(42)).To(Equal("segments/00000000000000000042.seg"))
	first, ok := segmentFirst(segmentName(9_000_000_000))
	g.Expect(ok).To(BeTrue())
	g.Expect(first).To(Equal(int64(9_000_000_000)))
	// Names sort as revisions do.
	g.Expect(segmentName(9) < segmentName(10)).To(BeTrue())
	for _, bad := range []string{"segments/42.seg", "segments/00000000000000000042.seg.tmp", "segments/0000000000000000004x.seg", "segments/00000000000000000000.seg"} {
		_, ok := segmentFirst(bad)
		g.Expect(ok).To(BeFalse(), bad)
	}
}

func TestDirFolderWritesOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := dirFolder{dir: t.TempDir()}
	g.Expect(f.putNew(ctx, "segments/a", []byte("one"), "uid")).To(Succeed())
	g.Expect(f.putNew(ctx, "segments/a", []byte("two"), "uid")).To(MatchError(errExists))
	data, err := f.get(ctx, "segments/a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal("one"))
	g.Expect(f.putNew(ctx, "segments/b", []byte("b"), "uid")).To(Succeed())
	names, err := f.list(ctx, "segments")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names).To(Equal([]string{"a", "b"}), "no temporary file is left")
	_, err = f.get(ctx, "missing")
	g.Expect(err).To(MatchError(ErrNotFound))
}

func TestTickOf(t *testing.T) {
	g := NewWithT(t)
	g.Expect(tickOf(10 * time.Second)).To(Equal(time.Second))
	g.Expect(tickOf(2 * time.Second)).To(Equal(200 * time.Millisecond))
	g.Expect(tickOf(time.Second)).To(Equal(100 * time.Millisecond))
}

func TestArchivePrefixLeavesRoomForSegments(t *testing.T) {
	g := NewWithT(t)
	longest := strings.Repeat("p", maxKeyLen-len("/"+segmentName(0)))
	for _, tt := range []struct {
		key string
		ok  bool
	}{{key: longest, ok: true}, {key: longest + "p", ok: false}} {
		loc, err := ParseURI("s3://bucket/" + tt.key)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = openFolder(context.Background(), loc, S3Options{Endpoint: "http://127.0.0.1:1", Region: "us-east-1"})
		if tt.ok {
			g.Expect(err).NotTo(HaveOccurred())
		} else {
			g.Expect(err).To(MatchError(ErrInvalid))
		}
	}
}
