package agent

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/agentapi"
)

// TestFetchCatchesDamage damages stored artifacts, a flipped byte and a cut
// end, in S3 and in files, and shows who catches it: with the backup's
// SHA-256, fetch does, for good, and leaves no output; without it, a
// compressed artifact fails its format's own checks in fetch, and an
// uncompressed one is caught by etcdutl snapshot restore, which checks the
// SHA-256 that etcd appends to the snapshot.
func TestFetchCatchesDamage(t *testing.T) {
	t.Parallel()
	live := startLive(t, 1, "root")
	live.put(t, "key-", 200, 1024)
	bucket := newBucket(t)
	dir := t.TempDir()

	damages := map[string]func([]byte) []byte{
		"a flipped byte": func(b []byte) []byte {
			b = append([]byte(nil), b...)
			b[len(b)/2] ^= 0x40
			return b
		},
		"a cut end": func(b []byte) []byte { return b[:len(b)-len(b)/3] },
	}
	for _, c := range []Compression{None, Gzip, Zstd} {
		for _, dest := range []string{"s3", "file"} {
			to := "file://" + filepath.Join(dir, "good-"+string(c)+".db")
			if dest == "s3" {
				to = "s3://" + bucket + "/good-" + string(c) + ".db"
			}
			backup, err := Backup(stepCtx(t), BackupOptions{Etcd: live.Config, To: to, S3: s3Opts(), Compression: c, Owner: "uid-1"})
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			good, _ := storedAt(t, to)

			for name, damage := range damages {
				t.Run(string(c)+" in "+dest+" with "+name, func(t *testing.T) {
					g := NewWithT(t)
					// The damaged copy, stored as the store would hold it.
					bad := "file://" + filepath.Join(t.TempDir(), "bad.db")
					if dest == "s3" {
						bad = "s3://" + bucket + "/bad-" + string(c) + "-" + name
						putObject(t, bucket, bad[len("s3://"+bucket+"/"):], damage(good), map[string]string{ownerKey: "uid-1"})
					} else {
						g.Expect(os.WriteFile(bad[len("file://"):], damage(good), 0o600)).To(Succeed())
					}

					// An output of an earlier attempt must not survive.
					out := filepath.Join(t.TempDir(), "snapshot.db")
					g.Expect(os.WriteFile(out, []byte("stale"), 0o600)).To(Succeed())
					_, err := Fetch(stepCtx(t), FetchOptions{From: bad, S3: s3Opts(), Compression: c, SHA256: backup.Artifact.SHA256, Out: out})
					g.Expect(err).To(MatchError(ErrChecksum))
					g.Expect(ExitCode(err)).To(Equal(agentapi.ExitTerminal))
					entries, _ := os.ReadDir(filepath.Dir(out))
					g.Expect(entries).To(BeEmpty(), "no output, no temporary file")

					// The SHA-256 unknown.
					_, err = Fetch(stepCtx(t), FetchOptions{From: bad, S3: s3Opts(), Compression: c, Out: out})
					if c != None {
						g.Expect(err).To(MatchError(ErrCorrupt), "the format's own checks")
						g.Expect(ExitCode(err)).To(Equal(agentapi.ExitTerminal))
						return
					}
					g.Expect(err).NotTo(HaveOccurred(), "nothing in fetch can tell")
					restored := filepath.Join(t.TempDir(), "data")
					msg, err := etcdutl(t, restoreSnapshot(out, restored, 2380)...)
					g.Expect(err).To(HaveOccurred(), "etcdutl restored a damaged snapshot:\n%s", msg)
				})
			}
		}
	}
}

// TestFetchFailures: an artifact that is not there, and arguments that
// cannot work, are terminal.
func TestFetchFailures(t *testing.T) {
	t.Parallel()
	bucket := newBucket(t)
	out := filepath.Join(t.TempDir(), "snapshot.db")
	tests := []struct {
		name    string
		opts    FetchOptions
		wantErr error
	}{
		{name: "a missing object", opts: FetchOptions{From: "s3://" + bucket + "/missing.db"}, wantErr: ErrNotFound},
		{name: "a missing bucket", opts: FetchOptions{From: "s3://no-such-bucket-here/x.db"}, wantErr: ErrNotFound},
		{name: "a missing file", opts: FetchOptions{From: "file:///nonexistent/x.db"}, wantErr: ErrNotFound},
		{name: "a bad SHA-256", opts: FetchOptions{From: "s3://" + bucket + "/x.db", SHA256: "xyz"}, wantErr: ErrInvalid},
		{name: "a relative output", opts: FetchOptions{From: "s3://" + bucket + "/x.db", Out: "snapshot.db"}, wantErr: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o := tt.opts
			o.S3 = s3Opts()
			if o.Out == "" {
				o.Out = out
			}
			_, err := Fetch(stepCtx(t), o)
			g.Expect(err).To(MatchError(tt.wantErr))
			g.Expect(ExitCode(err)).To(Equal(agentapi.ExitTerminal))
		})
	}
}
