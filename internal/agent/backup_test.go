package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/agentapi"
)

// stored returns the bytes and the owner record of what a backup wrote to
// uri, read behind the agent's back.
func storedAt(t *testing.T, uri string) (data []byte, owner string) {
	t.Helper()
	loc, err := ParseURI(uri)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	if loc.IsS3() {
		data, meta := getObject(t, loc.Bucket, loc.Key)
		return data, meta[ownerKey]
	}
	data, err = os.ReadFile(loc.Path)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	raw, err := os.ReadFile(loc.Path + metaSuffix)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var m fileMeta
	NewWithT(t).Expect(json.Unmarshal(raw, &m)).To(Succeed())
	NewWithT(t).Expect(m.SHA256).To(Equal(sha256Hex(data)), "the record's SHA-256")
	return data, m.Owner
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

type snapshotStatus struct {
	Revision int64 `json:"revision"`
	TotalKey int64 `json:"totalKey"`
}

// statusOf reads a snapshot file with etcdutl, which fails on one that is
// not whole.
func statusOf(t *testing.T, path string) snapshotStatus {
	t.Helper()
	out, err := etcdutl(t, "snapshot", "status", path, "--write-out=json")
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "%s", out)
	var s snapshotStatus
	NewWithT(t).Expect(json.Unmarshal([]byte(out), &s)).To(Succeed(), "%s", out)
	return s
}

// TestBackupFetchRoundTrip backs a cluster up with each compression, to S3
// and to a file, and fetches each back: what the backup reports is what
// was stored, the stored bytes are compressed as asked, and the fetched
// snapshot is whole (etcdutl reads it, with every key) and from the member
// with the highest revision.
func TestBackupFetchRoundTrip(t *testing.T) {
	t.Parallel()
	live := startLive(t, 3, "root")
	const keys = 300
	rev := live.put(t, "key-", keys, 512)
	bucket := newBucket(t)
	dir := t.TempDir()

	for _, c := range []Compression{None, Gzip, Zstd} {
		for _, to := range []string{
			"s3://" + bucket + "/ns/backup-" + string(c) + ".db",
			"file://" + filepath.Join(dir, "backups", "backup-"+string(c)+".db"),
		} {
			t.Run(string(c)+" to "+to, func(t *testing.T) {
				g := NewWithT(t)
				r, err := Backup(stepCtx(t), BackupOptions{Etcd: live.Config, To: to, S3: s3Opts(), Compression: c, Owner: "uid-1"})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(r.Op).To(Equal(agentapi.OpBackup))
				g.Expect(r.Snapshot.Revision).To(BeNumerically(">=", rev))
				g.Expect(r.Snapshot.EtcdVersion).To(Equal("3.6.16"))
				g.Expect(r.Snapshot.Member).To(HavePrefix("m"))

				data, owner := storedAt(t, to)
				g.Expect(owner).To(Equal("uid-1"))
				g.Expect(r.Artifact).To(Equal(&agentapi.Artifact{URI: to, SizeBytes: int64(len(data)), SHA256: sha256Hex(data), Compression: string(c)}))

				out := filepath.Join(t.TempDir(), "snapshot.db")
				f, err := Fetch(stepCtx(t), FetchOptions{From: to, S3: s3Opts(), Compression: c, SHA256: r.Artifact.SHA256, Out: out})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(f.Artifact).To(Equal(r.Artifact))
				snap, err := os.ReadFile(out)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(int64(len(snap))).To(Equal(r.Snapshot.DBSizeBytes))
				if c == None {
					g.Expect(snap).To(Equal(data))
				} else {
					g.Expect(len(data)).To(BeNumerically("<", len(snap)), "compressed")
				}
				st := statusOf(t, out)
				g.Expect(st.Revision).To(BeNumerically(">=", r.Snapshot.Revision))
				g.Expect(st.TotalKey).To(BeNumerically(">=", keys))
			})
		}
	}
}

// TestBackupMultipart streams a snapshot larger than several parts to S3:
// the upload is multipart, and the object is the whole snapshot.
func TestBackupMultipart(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	live := startLive(t, 1, "root")
	live.put(t, "big-", 14, 1<<20) // about 14 MiB that does not compress
	to := "s3://" + newBucket(t) + "/big.db.zst"
	opts := s3Opts()
	opts.PartSize = 5 << 20
	r, err := Backup(stepCtx(t), BackupOptions{Etcd: live.Config, To: to, S3: opts, Compression: Zstd, Owner: "uid-1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Artifact.SizeBytes).To(BeNumerically(">", 2*opts.PartSize), "three parts or more")

	loc, _ := ParseURI(to)
	head, err := s3Client(t).HeadObject(stepCtx(t), headInput(loc))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*head.ETag).To(ContainSubstring("-"), "a multipart upload's ETag: %s", *head.ETag)

	out := filepath.Join(t.TempDir(), "snapshot.db")
	_, err = Fetch(stepCtx(t), FetchOptions{From: to, S3: opts, Compression: Zstd, SHA256: r.Artifact.SHA256, Out: out})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(statusOf(t, out).TotalKey).To(BeNumerically(">=", 14))
}

// TestBackupOverwrite: a backup replaces only what its own owner wrote (a
// retried pod), never another owner's artifact, nor one that Tend did not
// write.
func TestBackupOverwrite(t *testing.T) {
	t.Parallel()
	live := startLive(t, 1, "root")
	live.put(t, "key-", 10, 100)
	bucket := newBucket(t)
	dir := t.TempDir()

	for _, to := range []string{"s3://" + bucket + "/owned.db", "file://" + filepath.Join(dir, "owned.db")} {
		t.Run(to, func(t *testing.T) {
			g := NewWithT(t)
			backup := func(owner string) (agentapi.Result, error) {
				return Backup(stepCtx(t), BackupOptions{Etcd: live.Config, To: to, S3: s3Opts(), Compression: None, Owner: owner})
			}
			first, err := backup("uid-1")
			g.Expect(err).NotTo(HaveOccurred())

			// Another owner is refused, for good, and the artifact stays.
			_, err = backup("uid-2")
			g.Expect(err).To(MatchError(ErrRefused))
			g.Expect(err).To(MatchError(ContainSubstring("written by uid-1, not by uid-2")))
			g.Expect(ExitCode(err)).To(Equal(agentapi.ExitTerminal))
			data, owner := storedAt(t, to)
			g.Expect(owner).To(Equal("uid-1"))
			g.Expect(sha256Hex(data)).To(Equal(first.Artifact.SHA256))

			// The same owner, as a retried pod, replaces it.
			live.put(t, "more-", 5, 100)
			second, err := backup("uid-1")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(second.Snapshot.Revision).To(BeNumerically(">", first.Snapshot.Revision))
			data, _ = storedAt(t, to)
			g.Expect(sha256Hex(data)).To(Equal(second.Artifact.SHA256))
		})
	}

	t.Run("an object that Tend did not write", func(t *testing.T) {
		g := NewWithT(t)
		putObject(t, bucket, "foreign.db", []byte("someone's data"), nil)
		_, err := Backup(stepCtx(t), BackupOptions{Etcd: live.Config, To: "s3://" + bucket + "/foreign.db", S3: s3Opts(), Owner: "uid-1"})
		g.Expect(err).To(MatchError(ErrRefused))
		g.Expect(err).To(MatchError(ContainSubstring("not written by Tend")))
		data, _ := getObject(t, bucket, "foreign.db")
		g.Expect(string(data)).To(Equal("someone's data"))
	})

	t.Run("a file that Tend did not write", func(t *testing.T) {
		g := NewWithT(t)
		path := filepath.Join(dir, "foreign.db")
		g.Expect(os.WriteFile(path, []byte("someone's data"), 0o600)).To(Succeed())
		_, err := Backup(stepCtx(t), BackupOptions{Etcd: live.Config, To: "file://" + path, Owner: "uid-1"})
		g.Expect(err).To(MatchError(ErrRefused))
		data, err := os.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(data)).To(Equal("someone's data"))
		entries, err := os.ReadDir(dir)
		g.Expect(err).NotTo(HaveOccurred())
		for _, e := range entries {
			g.Expect(e.Name()).NotTo(ContainSubstring(".tmp-"), "no temporary file is left")
		}
	})
}

// TestBackupFailures: what a backup cannot do, and whether a retry may.
func TestBackupFailures(t *testing.T) {
	t.Parallel()
	live := startLive(t, 1, "root")
	bucket := newBucket(t)

	t.Run("a bucket that does not exist", func(t *testing.T) {
		g := NewWithT(t)
		_, err := Backup(stepCtx(t), BackupOptions{Etcd: live.Config, To: "s3://no-such-bucket-here/x.db", S3: s3Opts(), Owner: "uid-1"})
		g.Expect(err).To(MatchError(ErrNotFound))
		g.Expect(ExitCode(err)).To(Equal(agentapi.ExitTerminal))
	})
	t.Run("no member answers", func(t *testing.T) {
		g := NewWithT(t)
		cfg := live.Config
		cfg.Endpoints = []string{"https://127.0.0.1:9"}
		_, err := Backup(shortCtx(t, 5*time.Second), BackupOptions{Etcd: cfg, To: "s3://" + bucket + "/x.db", S3: s3Opts(), Owner: "uid-1"})
		g.Expect(err).To(HaveOccurred())
		g.Expect(ExitCode(err)).To(Equal(agentapi.ExitFailed), "%v", err)
		_, err = s3Client(t).HeadObject(stepCtx(t), headInput(Location{Bucket: bucket, Key: "x.db"}))
		g.Expect(err).To(HaveOccurred(), "nothing was stored")
	})
	t.Run("a client certificate of another CA", func(t *testing.T) {
		g := NewWithT(t)
		other := startLive(t, 1, "root")
		cfg := live.Config
		cfg.TLS = other.Config.TLS
		_, err := Backup(shortCtx(t, 5*time.Second), BackupOptions{Etcd: cfg, To: "s3://" + bucket + "/y.db", S3: s3Opts(), Owner: "uid-1"})
		g.Expect(err).To(HaveOccurred())
		g.Expect(ExitCode(err)).To(Equal(agentapi.ExitTerminal), "%v", err)
	})
	t.Run("bad arguments", func(t *testing.T) {
		for _, o := range []BackupOptions{
			{To: "s3://" + bucket + "/x.db", Owner: ""},
			{To: "ftp://x/y", Owner: "uid-1"},
			{To: "s3://" + bucket + "/x.db", Owner: "uid-1", Compression: "lz4"},
		} {
			o.Etcd = live.Config
			_, err := Backup(stepCtx(t), o)
			NewWithT(t).Expect(err).To(MatchError(ErrInvalid), "%+v", o)
		}
	})
}

// TestBackupSnapshotCut shows that a backup whose member dies while it
// streams the snapshot stores nothing: the store never sees the end of
// the stream, so the file is never renamed into place and the upload is
// never completed, but aborted: no part stays.
func TestBackupSnapshotCut(t *testing.T) {
	t.Parallel()
	bucket := newBucket(t)
	for _, dest := range []string{"s3", "file"} {
		t.Run(dest, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			live := startLive(t, 1, "root")
			live.put(t, "big-", 40, 1<<20)
			dir := t.TempDir()
			to := "file://" + filepath.Join(dir, "cut.db")
			if dest == "s3" {
				to = "s3://" + bucket + "/cut.db"
			}
			opts := s3Opts()
			opts.PartSize = 5 << 20
			done := make(chan error, 1)
			go func() {
				_, err := Backup(stepCtx(t), BackupOptions{Etcd: live.Config, To: to, S3: opts, Owner: "uid-1"})
				done <- err
			}()
			// Kill the member once it streams: it says so in its log.
			g.Eventually(func() bool {
				return strings.Contains(live.Members()[0].Log(), "sending database snapshot to client") || len(done) > 0
			}).WithPolling(time.Millisecond).WithTimeout(time.Minute).Should(BeTrue())
			live.Members()[0].Kill()
			var err error
			g.Eventually(done).WithTimeout(time.Minute).Should(Receive(&err))
			g.Expect(err).To(HaveOccurred(), "the member died before it sent 40 MiB")
			g.Expect(ExitCode(err)).To(Equal(agentapi.ExitFailed), "%v", err)
			if dest == "s3" {
				_, err := s3Client(t).HeadObject(stepCtx(t), headInput(Location{Bucket: bucket, Key: "cut.db"}))
				g.Expect(err).To(HaveOccurred(), "no object after a cut snapshot")
				g.Expect(multipartUploads(t, s3Client(t), bucket)).To(BeEmpty(), "no parts after a cut snapshot")
				return
			}
			entries, err := os.ReadDir(dir)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(entries).To(BeEmpty(), "no file, no record, no temporary file after a cut snapshot")
		})
	}
}
