package agent

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/etcd"
)

// backedUp is a backup of a live cluster, fetched, restored with etcdutl
// and running in a local etcd, as in the verify pod.
type backedUp struct {
	result agentapi.Result
	local  *localEtcd
}

// backUpAndRestore runs the verify pod's steps before verify: backup,
// fetch, etcdutl restore, and the local etcd, not waited for.
func backUpAndRestore(t *testing.T, live *liveCluster, c Compression) backedUp {
	t.Helper()
	g := NewWithT(t)
	to := "s3://" + newBucket(t) + "/verify.db"
	r, err := Backup(stepCtx(t), BackupOptions{Etcd: live.Config, To: to, S3: s3Opts(), Compression: c, Owner: "uid-1"})
	g.Expect(err).NotTo(HaveOccurred())
	scratch := t.TempDir()
	snapshot := filepath.Join(scratch, "snapshot.db")
	_, err = Fetch(stepCtx(t), FetchOptions{From: to, S3: s3Opts(), Compression: c, SHA256: r.Artifact.SHA256, Out: snapshot})
	g.Expect(err).NotTo(HaveOccurred())
	local := newLocal(t, filepath.Join(scratch, "data"))
	local.restore(t, snapshot)
	local.start(t)
	return backedUp{result: r, local: local}
}

// TestVerify runs the verification end to end: a restored backup matches
// the live cluster at its revision, also after the live cluster moved on;
// it does not match a cluster with other data, nor a backup result that
// claims a later revision than the snapshot holds; and once the live
// cluster compacted past the revision, the step fails in a way a retry
// (a new backup) fixes.
func TestVerify(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	live := startLive(t, 3, "root")
	live.put(t, "key-", 100, 256)
	b := backUpAndRestore(t, live, Zstd)
	// The live cluster moves on; its history at the snapshot stays.
	live.put(t, "after-", 20, 256)
	_, err := live.cli.Delete(stepCtx(t), "key-00001")
	g.Expect(err).NotTo(HaveOccurred())

	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	since := clock.Now().Add(-42 * time.Second)
	opts := VerifyOptions{Local: b.local.URL, Live: live.Config, Backup: b.result, Since: since}
	r, err := Verify(stepCtx(t), opts)
	g.Expect(err).NotTo(HaveOccurred())
	v := r.Verification
	g.Expect(r.Op).To(Equal(agentapi.OpVerify))
	g.Expect(v.Matches).To(BeTrue())
	g.Expect(v.Revision).To(BeNumerically(">=", b.result.Snapshot.Revision))
	g.Expect(v.Keys).To(Equal(int64(100)))
	g.Expect(v.LiveKeys).To(Equal(int64(100)))
	g.Expect(v.Hash).To(Equal(v.LiveHash))
	g.Expect(v.LiveMember).To(Equal(b.result.Snapshot.Member))
	g.Expect(v.DurationSeconds).To(BeNumerically(">=", 42))

	t.Run("the clock says how long it took", func(t *testing.T) {
		g := NewWithT(t)
		o := opts
		o.Clock, o.Since = clock, since
		r, err := Verify(stepCtx(t), o)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Verification.DurationSeconds).To(Equal(int64(42)))
	})

	t.Run("the backup's member is gone: another answers", func(t *testing.T) {
		g := NewWithT(t)
		o := opts
		o.Backup.Snapshot = &agentapi.Snapshot{Member: "no-such-member", Revision: b.result.Snapshot.Revision}
		r, err := Verify(stepCtx(t), o)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Verification.Matches).To(BeTrue())
		g.Expect(r.Verification.LiveMember).NotTo(Equal("no-such-member"))
	})

	t.Run("a live cluster with other data does not match", func(t *testing.T) {
		g := NewWithT(t)
		other := startLive(t, 1, "root")
		other.put(t, "key-", 150, 256) // more revisions than the snapshot's
		o := opts
		o.Live = other.Config
		o.Backup.Snapshot = &agentapi.Snapshot{Member: other.Members()[0].Name, Revision: b.result.Snapshot.Revision}
		r, err := Verify(stepCtx(t), o)
		g.Expect(err).To(MatchError(ErrMismatch))
		g.Expect(ExitCode(err)).To(Equal(agentapi.ExitTerminal))
		g.Expect(r.Verification).NotTo(BeNil(), "the figures are reported with the mismatch")
		g.Expect(r.Verification.Matches).To(BeFalse())
		g.Expect(r.Verification.Hash).NotTo(Equal(r.Verification.LiveHash))
	})

	t.Run("a snapshot older than the backup says does not match", func(t *testing.T) {
		g := NewWithT(t)
		o := opts
		o.Backup.Snapshot = &agentapi.Snapshot{Member: b.result.Snapshot.Member, Revision: v.Revision + 10}
		r, err := Verify(stepCtx(t), o)
		g.Expect(err).To(MatchError(ErrMismatch))
		g.Expect(err).To(MatchError(ContainSubstring("older than member")))
		g.Expect(r.Verification.Matches).To(BeFalse())
		g.Expect(r.Verification.Hash).To(Equal(r.Verification.LiveHash), "the stores agree; the revision does not")
	})

	t.Run("a backup result that is not one", func(t *testing.T) {
		o := opts
		o.Backup = agentapi.Result{Op: agentapi.OpFetch}
		_, err := Verify(stepCtx(t), o)
		NewWithT(t).Expect(err).To(MatchError(ErrInvalid))
	})

	t.Run("the local etcd never answers", func(t *testing.T) {
		g := NewWithT(t)
		o := opts
		o.Local = "http://127.0.0.1:9"
		_, err := Verify(shortCtx(t, 2*time.Second), o)
		g.Expect(err).To(MatchError(ContainSubstring("waiting for the restored etcd")))
		g.Expect(ExitCode(err)).To(Equal(agentapi.ExitFailed))
	})

	// Last: a compaction past the snapshot's revision ends the history
	// that the verification compares.
	_, err = live.cli.Compact(stepCtx(t), v.Revision+1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error {
		_, err := Verify(stepCtx(t), opts)
		return err
	}).WithTimeout(10 * time.Second).Should(MatchError(etcd.ErrCompacted))
	_, err = Verify(stepCtx(t), opts)
	g.Expect(err).To(MatchError(ContainSubstring("compacted its history past the snapshot's revision")))
	g.Expect(ExitCode(err)).To(Equal(agentapi.ExitFailed), "a new backup will verify")
}

// TestVerifyAuth verifies a backup of a cluster with auth on: the agent
// reaches the live cluster with a client certificate whose common name is
// root, and the restored store, which keeps the cluster's auth, with
// root's password.
func TestVerifyAuth(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	live := startLive(t, 1, "root")
	live.put(t, "key-", 50, 128)
	const password = "s3cret-root"
	admin, err := etcd.New(stepCtx(t), live.Config)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = admin.Close() })
	g.Expect(admin.EnableAuth(stepCtx(t), password)).To(Succeed())

	b := backUpAndRestore(t, live, Gzip)
	opts := VerifyOptions{Local: b.local.URL, Live: live.Config, Backup: b.result}

	_, err = Verify(stepCtx(t), opts)
	g.Expect(err).To(MatchError(etcd.ErrAuth))
	g.Expect(err).To(MatchError(ContainSubstring("set ETCD_ROOT_PASSWORD")))
	g.Expect(err.Error()).NotTo(ContainSubstring(password))
	g.Expect(ExitCode(err)).To(Equal(agentapi.ExitTerminal))

	opts.RootPassword = "wrong"
	_, err = Verify(stepCtx(t), opts)
	g.Expect(err).To(MatchError(etcd.ErrAuth))
	g.Expect(ExitCode(err)).To(Equal(agentapi.ExitTerminal))

	opts.RootPassword = password
	r, err := Verify(stepCtx(t), opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Verification.Matches).To(BeTrue())
	g.Expect(r.Verification.Keys).To(Equal(int64(50)))
}
