package etcd

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/testing/etcdserver"
)

// TestSnapshot takes a snapshot of a cluster with data and checks it with
// etcdutl, which reads the database and verifies its SHA-256 on restore.
func TestSnapshot(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 1})
	c := clientOf(t, cluster)
	const keys = 200
	put(t, c, keys)
	storageVersionWritten(t, c, cluster.ClientURLs()...)

	dir := t.TempDir()
	path := filepath.Join(dir, "snapshot.db")
	f, err := os.Create(path)
	g.Expect(err).NotTo(HaveOccurred())
	info, err := c.Snapshot(callCtx(t), f)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Close()).To(Succeed())

	fi, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Size).To(Equal(fi.Size()))
	g.Expect(info.Version).To(Equal("3.6.0"), "the storage version that restores it")

	out, err := exec.Command(cluster.Bin.Etcdutl, "snapshot", "status", path, "--write-out=json").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	var status struct {
		Revision  int64 `json:"revision"`
		TotalKey  int   `json:"totalKey"`
		TotalSize int64 `json:"totalSize"`
	}
	g.Expect(json.Unmarshal(out, &status)).To(Succeed(), "%s", out)
	g.Expect(status.Revision).To(BeNumerically(">=", keys+1), "every put is in it")
	g.Expect(status.TotalKey).To(BeNumerically(">=", keys))

	restore := func(snapshot string) ([]byte, error) {
		return exec.Command(cluster.Bin.Etcdutl, "snapshot", "restore", snapshot,
			"--data-dir", filepath.Join(dir, "restored-"+filepath.Base(snapshot))).CombinedOutput()
	}
	out, err = restore(path)
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)

	// The check is real: a snapshot that lost its last byte does not restore.
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	cut := filepath.Join(dir, "cut.db")
	g.Expect(os.WriteFile(cut, data[:len(data)-1], 0o600)).To(Succeed())
	out, err = restore(cut)
	g.Expect(err).To(HaveOccurred(), "%s", out)
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestSnapshotWriterFails(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 1})
	c := clientOf(t, cluster)
	_, err := c.Snapshot(callCtx(t), failingWriter{})
	g.Expect(err).To(MatchError(ContainSubstring("taking a snapshot: disk full")))
}
