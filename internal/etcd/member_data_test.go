package etcd

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/testing/etcdserver"
)

// TestHashKVAndKeyCount shows that every member of a cluster reports the
// same hash and the same key count at a revision, whatever came after it;
// that the hash moves with the history; and that a compaction past the
// revision makes both calls fail with ErrCompacted.
func TestHashKVAndKeyCount(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 3})
	c := clientOf(t, cluster)
	ctx := callCtx(t)
	put(t, c, 20)
	statuses := allHealthy(t, c, 3)

	// The latest revision of the first member, which has applied all 20.
	latest, err := c.HashKV(ctx, statuses[0].Endpoint, 0)
	g.Expect(err).NotTo(HaveOccurred())
	rev := latest.Revision
	g.Expect(rev).To(BeNumerically(">", 20))
	g.Expect(latest.CompactRevision).To(BeNumerically("<=", 1))

	// Changes after rev: the history up to rev stays as it was.
	_, err = c.cli.Put(ctx, "key-0000", "changed")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.cli.Delete(ctx, "key-0001")
	g.Expect(err).NotTo(HaveOccurred())
	after := allHealthy(t, c, 3)

	for _, s := range after {
		g.Expect(s.Revision).To(BeNumerically(">=", rev+2), "member %s", s.Name)
		h, err := c.HashKV(ctx, s.Endpoint, rev)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(h).To(Equal(latest), "member %s at revision %d", s.Name, rev)
		n, err := c.KeyCount(ctx, s.Endpoint, rev)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(int64(20)), "member %s", s.Name)

		now, err := c.HashKV(ctx, s.Endpoint, 0)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(now.Revision).To(Equal(rev + 2))
		g.Expect(now.Hash).NotTo(Equal(latest.Hash))
		n, err = c.KeyCount(ctx, s.Endpoint, 0)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(int64(19)))
	}

	_, err = c.cli.Compact(ctx, rev+1)
	g.Expect(err).NotTo(HaveOccurred())
	endpoint := after[0].Endpoint
	g.Eventually(func() error {
		_, err := c.HashKV(callCtx(t), endpoint, rev)
		return err
	}).WithTimeout(10*time.Second).Should(MatchError(ErrCompacted), "every member applies the compaction")
	_, err = c.KeyCount(ctx, endpoint, rev)
	g.Expect(err).To(MatchError(ErrCompacted))
	g.Expect(Classify(err)).To(Equal(Transient))
	h, err := c.HashKV(ctx, endpoint, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.CompactRevision).To(Equal(rev + 1))
}

// TestSnapshotFrom takes a snapshot from each member in turn, shows that
// the member asked is the one that sent it, and that the file is a whole
// snapshot that etcdutl reads.
func TestSnapshotFrom(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 2, TLS: true})
	c := clientOf(t, cluster)
	put(t, c, 50)
	statuses := allHealthy(t, c, 2)
	storageVersionWritten(t, c, cluster.ClientURLs()...)

	dir := t.TempDir()
	taken := map[string]bool{}
	for _, s := range statuses {
		path := filepath.Join(dir, s.Name+".db")
		var buf bytes.Buffer
		info, err := c.SnapshotFrom(callCtx(t), s.Endpoint, &buf)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(info.Size).To(Equal(int64(buf.Len())))
		sum := sha256.Sum256(buf.Bytes())
		g.Expect(info.SHA256).To(Equal(hex.EncodeToString(sum[:])))
		g.Expect(info.Version).To(Equal("3.6.0"))
		g.Expect(os.WriteFile(path, buf.Bytes(), 0o600)).To(Succeed())

		// The member asked says that it sent a snapshot; the other has
		// sent none but those it was asked for before.
		taken[s.Name] = true
		for _, m := range cluster.Members() {
			sent := strings.Count(m.Log(), "sending database snapshot to client")
			g.Expect(sent == 1).To(Equal(taken[m.Name]), "member %s sent %d snapshots", m.Name, sent)
		}

		out, err := exec.Command(cluster.Bin.Etcdutl, "snapshot", "status", path, "--write-out=json").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
		var status struct {
			Revision int64 `json:"revision"`
			TotalKey int   `json:"totalKey"`
		}
		g.Expect(json.Unmarshal(out, &status)).To(Succeed(), "%s", out)
		g.Expect(status.Revision).To(BeNumerically(">=", s.Revision))
		g.Expect(status.TotalKey).To(BeNumerically(">=", 50))
	}

	// A member that is down fails at once, with nothing written.
	m := cluster.Members()[1]
	m.Kill()
	var buf bytes.Buffer
	_, err := c.SnapshotFrom(callCtx(t), m.ClientURL, &buf)
	g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
	g.Expect(Classify(err)).To(Equal(Transient))
	g.Expect(buf.Len()).To(BeZero())
}

func TestSnapshotFromWriterFails(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{})
	c := clientOf(t, cluster)
	_, err := c.SnapshotFrom(callCtx(t), cluster.ClientURLs()[0], failingWriter{})
	g.Expect(err).To(MatchError(ContainSubstring("disk full")))
}

// TestTrailerCheck feeds the check a database and its SHA-256, cut into
// pieces of every size, and damaged or cut short.
func TestTrailerCheck(t *testing.T) {
	data := bytes.Repeat([]byte("etcd snapshot data "), 100)
	sum := sha256.Sum256(data)
	whole := append(append([]byte(nil), data...), sum[:]...)
	flipped := append([]byte(nil), whole...)
	flipped[10] ^= 1
	badSum := append([]byte(nil), whole...)
	badSum[len(badSum)-1] ^= 1
	tests := []struct {
		name   string
		stream []byte
		want   bool
	}{
		{name: "whole", stream: whole, want: true},
		{name: "a flipped data byte", stream: flipped},
		{name: "a flipped checksum byte", stream: badSum},
		{name: "the last byte missing", stream: whole[:len(whole)-1]},
		{name: "the checksum missing", stream: data},
		{name: "shorter than a checksum", stream: whole[:10]},
		{name: "empty", stream: nil},
		{name: "a checksum of nothing", stream: func() []byte { s := sha256.Sum256(nil); return s[:] }(), want: true},
	}
	for _, tt := range tests {
		for _, piece := range []int{1, 7, 31, 32, 33, 64, 1000, 1 << 20} {
			t.Run(fmt.Sprintf("%s in pieces of %d", tt.name, piece), func(t *testing.T) {
				c := newTrailerCheck()
				for rest := tt.stream; len(rest) > 0; {
					n := min(piece, len(rest))
					c.write(rest[:n])
					rest = rest[n:]
				}
				ok, whole := c.finish()
				g := NewWithT(t)
				g.Expect(ok).To(Equal(tt.want))
				sum := sha256.Sum256(tt.stream)
				g.Expect(whole).To(Equal(sum[:]), "the SHA-256 of the whole stream")
			})
		}
	}
}
