package agent

import (
	"cmp"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tend-dev/tend/internal/agentapi"
)

// TestPrepareInstall restores a real snapshot into a member's data
// directory as the restore Job does (prepare, etcdutl snapshot restore into
// .tend-restore, install), shows that etcd starts on the result with the
// data, and that each step is idempotent: a retried pod finds its own work
// done, and data of another restore, or of none, is refused.
func TestPrepareInstall(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	live := startLive(t, 1, "root")
	live.put(t, "key-", 30, 64)
	to := "file://" + filepath.Join(t.TempDir(), "backup.db")
	backup, err := Backup(stepCtx(t), BackupOptions{Etcd: live.Config, To: to, Owner: "uid-1"})
	g.Expect(err).NotTo(HaveOccurred())
	snapshot := filepath.Join(t.TempDir(), "snapshot.db")
	_, err = Fetch(stepCtx(t), FetchOptions{From: to, SHA256: backup.Artifact.SHA256, Out: snapshot})
	g.Expect(err).NotTo(HaveOccurred())

	dataDir := t.TempDir()
	local := newLocal(t, filepath.Join(dataDir, RestoreDir))
	restore := func() {
		t.Helper()
		out, err := etcdutl(t, append(restoreSnapshot(snapshot, filepath.Join(dataDir, RestoreDir), local.PeerPort), "--bump-revision=1000", "--mark-compacted")...)
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	}
	job := func(id string) error {
		t.Helper()
		if _, err := Prepare(dataDir, id, false); err != nil {
			return err
		}
		restore()
		r, err := Install(dataDir, id, false)
		g.Expect(r.Op).To(Equal(agentapi.OpInstall))
		return err
	}

	// A leftover of an earlier, failed attempt is cleared by prepare.
	g.Expect(os.MkdirAll(filepath.Join(dataDir, RestoreDir, "member", "junk"), 0o700)).To(Succeed())
	g.Expect(job("restore-1")).To(Succeed())
	db := filepath.Join(dataDir, "member", "snap", "db")
	installed, err := os.ReadFile(db)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(filepath.Join(dataDir, RestoreDir)).NotTo(BeAnExistingFile())
	g.Expect(installedBy(dataDir)).To(Equal("restore-1"))

	// A retried pod of the same restore: every step succeeds, and the
	// installed data stays as it was.
	g.Expect(job("restore-1")).To(Succeed())
	again, err := os.ReadFile(db)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(installed))
	_, err = Install(dataDir, "restore-1", false)
	g.Expect(err).NotTo(HaveOccurred(), "install alone, again")

	// Another restore is refused, for good, at either step.
	_, err = Prepare(dataDir, "restore-2", false)
	g.Expect(err).To(MatchError(ErrRefused))
	g.Expect(err).To(MatchError(ContainSubstring("restore restore-1 installed, not restore restore-2")))
	g.Expect(ExitCode(err)).To(Equal(agentapi.ExitTerminal))
	g.Expect(os.MkdirAll(filepath.Join(dataDir, RestoreDir, "member"), 0o700)).To(Succeed())
	_, err = Install(dataDir, "restore-2", false)
	g.Expect(err).To(MatchError(ErrRefused))
	g.Expect(os.RemoveAll(filepath.Join(dataDir, RestoreDir))).To(Succeed())

	// etcd starts on the installed data and serves the backup's keys, at
	// the bumped revision.
	local.DataDir = dataDir
	local.start(t)
	local.waitReady(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{local.URL}})
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	resp, err := cli.Get(stepCtx(t), "key-", clientv3.WithPrefix(), clientv3.WithCountOnly())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Count).To(Equal(int64(30)))
	g.Expect(resp.Header.Revision).To(BeNumerically(">=", backup.Snapshot.Revision+1000))
}

// TestPrepareInstallRefusals: a data directory with etcd data that no
// restore installed is refused; an install without restored data may be
// retried; arguments that cannot work are terminal.
func TestPrepareInstallRefusals(t *testing.T) {
	t.Parallel()
	t.Run("data that no restore installed", func(t *testing.T) {
		g := NewWithT(t)
		dataDir := t.TempDir()
		g.Expect(os.MkdirAll(filepath.Join(dataDir, "member", "wal"), 0o700)).To(Succeed())
		_, err := Prepare(dataDir, "restore-1", false)
		g.Expect(err).To(MatchError(ErrRefused))
		g.Expect(err).To(MatchError(ContainSubstring("no restore installed")))
		_, err = Install(dataDir, "restore-1", false)
		g.Expect(err).To(MatchError(ErrRefused))
		g.Expect(filepath.Join(dataDir, "member", "wal")).To(BeADirectory(), "left alone")
	})
	t.Run("install without a restore", func(t *testing.T) {
		g := NewWithT(t)
		dataDir := t.TempDir()
		_, err := Install(dataDir, "restore-1", false)
		g.Expect(err).To(MatchError(ContainSubstring("did etcdutl snapshot restore run?")))
		g.Expect(ExitCode(err)).To(Equal(agentapi.ExitFailed))
		g.Expect(filepath.Join(dataDir, RestoredMarker)).NotTo(BeAnExistingFile())
	})
	t.Run("a marker whose member data is gone", func(t *testing.T) {
		g := NewWithT(t)
		dataDir := t.TempDir()
		g.Expect(os.WriteFile(filepath.Join(dataDir, RestoredMarker), []byte("restore-0\n"), 0o600)).To(Succeed())
		_, err := Prepare(dataDir, "restore-1", false)
		g.Expect(err).NotTo(HaveOccurred(), "nothing of restore-0's is left to protect")
	})
	t.Run("bad arguments", func(t *testing.T) {
		g := NewWithT(t)
		for _, args := range [][2]string{{"relative", "id"}, {t.TempDir(), ""}, {t.TempDir(), "two\nlines"}} {
			_, err := Prepare(args[0], args[1], false)
			g.Expect(err).To(MatchError(ErrInvalid), "%q", args)
			_, err = Install(args[0], args[1], false)
			g.Expect(err).To(MatchError(ErrInvalid), "%q", args)
		}
	})
}

// TestPrepareReplace: an in-place restore moves the member data it
// replaces aside, keeps it until the restored data is installed, and a
// retried prepare after the move finds nothing more to do.
func TestPrepareReplace(t *testing.T) {
	t.Parallel()
	for _, installedBefore := range []string{"", "restore-0"} {
		t.Run("installed by "+cmp.Or(installedBefore, "no restore"), func(t *testing.T) {
			g := NewWithT(t)
			dataDir := t.TempDir()
			old := filepath.Join(dataDir, "member", "wal", "0.wal")
			g.Expect(os.MkdirAll(filepath.Dir(old), 0o700)).To(Succeed())
			g.Expect(os.WriteFile(old, []byte("old"), 0o600)).To(Succeed())
			if installedBefore != "" {
				g.Expect(os.WriteFile(filepath.Join(dataDir, RestoredMarker), []byte(installedBefore+"\n"), 0o600)).To(Succeed())
			}

			_, err := Prepare(dataDir, "restore-1", true)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(filepath.Join(dataDir, ReplacedDir, "member", "wal", "0.wal")).To(BeAnExistingFile(), "kept until install")
			g.Expect(filepath.Join(dataDir, "member")).NotTo(BeADirectory())
			_, err = Prepare(dataDir, "restore-1", true)
			g.Expect(err).NotTo(HaveOccurred(), "a retried prepare")
			g.Expect(filepath.Join(dataDir, ReplacedDir, "member", "wal", "0.wal")).To(BeAnExistingFile(), "a retry keeps what the first moved aside")

			// etcdutl's place in the Job: restored data appears.
			g.Expect(os.MkdirAll(filepath.Join(dataDir, RestoreDir, "member", "snap"), 0o700)).To(Succeed())
			_, err = Install(dataDir, "restore-1", true)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(filepath.Join(dataDir, "member", "snap")).To(BeADirectory())
			g.Expect(filepath.Join(dataDir, ReplacedDir)).NotTo(BeADirectory(), "removed once installed")
			marker, err := os.ReadFile(filepath.Join(dataDir, RestoredMarker))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(marker)).To(Equal("restore-1\n"))
		})
	}
}
