package agent

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/agentapi"
)

// TestDelete deletes what an owner's backup wrote, in S3 and in files:
// again is done too (nothing there); another owner's artifact, or one that
// Tend did not write, is refused and stays.
func TestDelete(t *testing.T) {
	t.Parallel()
	live := startLive(t, 1, "root")
	live.put(t, "key-", 10, 64)
	bucket := newBucket(t)
	dir := t.TempDir()

	for _, to := range []string{"s3://" + bucket + "/ns/b.db.gz", "file://" + filepath.Join(dir, "b.db.gz")} {
		t.Run(to, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Backup(stepCtx(t), BackupOptions{Etcd: live.Config, To: to, S3: s3Opts(), Compression: Gzip, Owner: "uid-1"})
			g.Expect(err).NotTo(HaveOccurred())
			del := func(owner string) error {
				r, err := Delete(stepCtx(t), DeleteOptions{URI: to, S3: s3Opts(), Owner: owner})
				g.Expect(r.Op).To(Equal(agentapi.OpDelete))
				return err
			}

			err = del("uid-2")
			g.Expect(err).To(MatchError(ErrRefused))
			g.Expect(ExitCode(err)).To(Equal(agentapi.ExitTerminal))
			_, owner := storedAt(t, to)
			g.Expect(owner).To(Equal("uid-1"), "still there")

			g.Expect(del("uid-1")).To(Succeed())
			_, err = Fetch(stepCtx(t), FetchOptions{From: to, S3: s3Opts(), Compression: Gzip, Out: filepath.Join(t.TempDir(), "x")})
			g.Expect(err).To(MatchError(ErrNotFound), "gone")
			g.Expect(del("uid-1")).To(Succeed(), "nothing there is done")
		})
	}

	t.Run("the file and its record are both gone", func(t *testing.T) {
		g := NewWithT(t)
		entries, err := os.ReadDir(dir)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(entries).To(BeEmpty())
	})

	t.Run("an object that Tend did not write", func(t *testing.T) {
		g := NewWithT(t)
		putObject(t, bucket, "foreign.db", []byte("x"), nil)
		_, err := Delete(stepCtx(t), DeleteOptions{URI: "s3://" + bucket + "/foreign.db", S3: s3Opts(), Owner: "uid-1"})
		g.Expect(err).To(MatchError(ErrRefused))
		data, _ := getObject(t, bucket, "foreign.db")
		g.Expect(string(data)).To(Equal("x"))
	})

	t.Run("a file that Tend did not write", func(t *testing.T) {
		g := NewWithT(t)
		path := filepath.Join(t.TempDir(), "foreign.db")
		g.Expect(os.WriteFile(path, []byte("x"), 0o600)).To(Succeed())
		_, err := Delete(stepCtx(t), DeleteOptions{URI: "file://" + path, Owner: "uid-1"})
		g.Expect(err).To(MatchError(ErrRefused))
		g.Expect(path).To(BeAnExistingFile())
	})

	t.Run("a bucket that is gone", func(t *testing.T) {
		_, err := Delete(stepCtx(t), DeleteOptions{URI: "s3://no-such-bucket-here/x.db", S3: s3Opts(), Owner: "uid-1"})
		NewWithT(t).Expect(err).NotTo(HaveOccurred(), "its objects are gone with it")
	})
}
