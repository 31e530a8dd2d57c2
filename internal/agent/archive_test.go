package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/etcd"
	"github.com/tend-dev/tend/internal/testing/etcdserver"
)

// runArchiver runs an archiver of o until the returned stop is called,
// which returns Run's error.
func runArchiver(t *testing.T, o ArchiveOptions) (*Archiver, func() error) {
	t.Helper()
	a, err := NewArchiver(o)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute):
			t.Fatal("the archiver did not stop within a minute")
			return nil
		}
	}
	t.Cleanup(func() { _ = stop() })
	return a, stop
}

// waitArchived waits until the archiver has stored revision rev.
func waitArchived(t *testing.T, a *Archiver, rev int64) {
	t.Helper()
	NewWithT(t).Eventually(func() int64 { return a.State().LastRevision }).
		WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(BeNumerically(">=", rev), "state: %+v", a.State())
}

// readArchive reads every segment of the archive at uri, checks that they
// chain (each starts where the one before ended), and returns the
// revisions.
func readArchive(t *testing.T, uri string) []ArchivedRevision {
	t.Helper()
	g := NewWithT(t)
	f, names := archiveFolder(t, uri)
	var out []ArchivedRevision
	for _, n := range names {
		data, err := f.get(stepCtx(t), n)
		g.Expect(err).NotTo(HaveOccurred())
		h, revs, err := decodeSegment(data)
		g.Expect(err).NotTo(HaveOccurred(), n)
		first, _ := segmentFirst(n)
		g.Expect(h.First).To(Equal(first), "a segment is named by its first revision")
		if len(out) > 0 {
			g.Expect(h.First).To(Equal(out[len(out)-1].Revision.Revision+1), "segment %s follows revision %d", n, out[len(out)-1].Revision.Revision)
		}
		out = append(out, revs...)
	}
	return out
}

// replayTo restores the base backup into a fresh local etcd that takes
// large transactions, as the replay Job's does, and replays the archive
// onto it.
func replayTo(t *testing.T, b backedUpFile, o ReplayOptions) (*localEtcd, agentapi.Result, error) {
	t.Helper()
	local := startReplayEtcd(t, b.snapshot)
	o.Local = local.URL
	r, err := Replay(stepCtx(t), o)
	return local, r, err
}

// startReplayEtcd restores the snapshot into a fresh etcd that takes
// large transactions, as a replay Job's scratch etcd, and starts it.
func startReplayEtcd(tb testing.TB, snapshot string) *localEtcd {
	tb.Helper()
	local := newLocal(tb, filepath.Join(tb.TempDir(), "data"))
	local.restore(tb, snapshot)
	bin, err := etcdserver.FindBinaries()
	NewWithT(tb).Expect(err).NotTo(HaveOccurred())
	etcdserver.StartOnDataDir(tb, bin.Etcd, local.DataDir, "replay", local.URL, "http://127.0.0.1:"+strconv.Itoa(local.PeerPort),
		"--max-txn-ops=100000", "--max-request-bytes=134217728")
	return local
}

// backedUpFile is a base backup, fetched to a snapshot file.
type backedUpFile struct {
	result   agentapi.Result
	snapshot string
}

// baseBackup backs the live cluster up to S3 and fetches the snapshot.
func baseBackup(t testing.TB, live *liveCluster, bucket string) backedUpFile {
	t.Helper()
	g := NewWithT(t)
	to := "s3://" + bucket + "/base.db"
	r, err := Backup(stepCtx(t), BackupOptions{Etcd: live.Config, To: to, S3: s3Opts(), Compression: Zstd, Owner: "backup-uid"})
	g.Expect(err).NotTo(HaveOccurred())
	snapshot := filepath.Join(t.TempDir(), "snapshot.db")
	_, err = Fetch(stepCtx(t), FetchOptions{From: to, S3: s3Opts(), Compression: Zstd, SHA256: r.Artifact.SHA256, Out: snapshot})
	g.Expect(err).NotTo(HaveOccurred())
	return backedUpFile{result: r, snapshot: snapshot}
}

// TestArchiveAndReplay archives a cluster's writes of every kind (puts,
// a transaction, a leased key, a range delete) to moto in several
// segments, across a stop and a start again of the agent, and replays the
// archive onto the base backup: to a revision in the middle, to a time,
// and to the end, each reaching the live cluster's HashKV at that
// revision (lease IDs included: the replay grants the leases again, and
// keeps them alive while it runs); the last compared by the replay itself
// (--verify).
func TestArchiveAndReplay(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	live := startLive(t, 1, "root")
	live.put(t, "before-", 40, 64)
	bucket := newBucket(t)
	base := baseBackup(t, live, bucket)
	uri := "s3://" + bucket + "/archives/kv"
	o := ArchiveOptions{
		Etcd: live.Config, To: uri, S3: s3Opts(), Owner: "cluster-uid", BaseRevision: base.result.Snapshot.Revision,
		Compression: Zstd, MaxAge: 200 * time.Millisecond, MaxBytes: 2048,
	}
	a, stop := runArchiver(t, o)

	live.put(t, "k-", 30, 100)
	_, err := live.cli.Txn(stepCtx(t)).Then(
		clientv3.OpPut("txn-a", "1"), clientv3.OpPut("txn-b", "2"), clientv3.OpDelete("before-00000"),
	).Commit()
	g.Expect(err).NotTo(HaveOccurred())
	lease, err := live.cli.Grant(stepCtx(t), 600)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = live.cli.Put(stepCtx(t), "leased", "v", clientv3.WithLease(lease.ID))
	g.Expect(err).NotTo(HaveOccurred())
	// A lease that expires: its key's delete is in the history.
	short, err := live.cli.Grant(stepCtx(t), 2)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = live.cli.Put(stepCtx(t), "short-lived", "v", clientv3.WithLease(short.ID))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() (int64, error) {
		resp, err := live.cli.Get(stepCtx(t), "short-lived", clientv3.WithCountOnly())
		if err != nil {
			return -1, err
		}
		return resp.Count, nil
	}).WithTimeout(30 * time.Second).Should(BeZero())
	beforeDelete := live.put(t, "last-before-delete-", 1, 10)
	del, err := live.cli.Delete(stepCtx(t), "k-0000", clientv3.WithPrefix())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(del.Deleted).To(Equal(int64(10)))
	waitArchived(t, a, del.Header.Revision)
	g.Expect(a.State()).To(SatisfyAll(
		HaveField("Phase", agentapi.ArchiveArchiving),
		HaveField("FirstRevision", base.result.Snapshot.Revision+1),
		HaveField("Segments", BeNumerically(">", 1)),
	))
	g.Expect(stop()).To(Succeed())

	// Started again, it goes on from its last segment.
	a, stop = runArchiver(t, o)
	after := live.put(t, "after-", 20, 100)
	waitArchived(t, a, after)
	g.Expect(a.State().FirstRevision).To(Equal(base.result.Snapshot.Revision + 1))
	g.Expect(a.State().Gaps).To(BeEmpty())
	g.Expect(stop()).To(Succeed())

	revs := readArchive(t, uri)
	g.Expect(revs[0].Revision.Revision).To(Equal(base.result.Snapshot.Revision + 1))
	g.Expect(revs[len(revs)-1].Revision.Revision).To(Equal(after), "every revision once, in order, up to the last write")
	var leased, deletes int
	for _, r := range revs {
		for _, ch := range r.Changes {
			if ch.Lease != 0 {
				leased++
			}
			if ch.Delete {
				deletes++
			}
		}
	}
	g.Expect(leased).To(Equal(2))
	for _, r := range revs {
		for _, ch := range r.Changes {
			if ch.Lease == int64(lease.ID) {
				g.Expect(ch.LeaseTTL).To(Equal(int64(600)))
			}
		}
	}
	g.Expect(deletes).To(Equal(12), "the range delete's 10, the transaction's and the expired lease's")

	liveHash := func(rev int64) uint32 {
		h, err := live.cli.HashKV(stepCtx(t), live.ClientURLs()[0], rev)
		g.Expect(err).NotTo(HaveOccurred())
		return h.Hash
	}
	localHash := func(l *localEtcd, rev int64) uint32 {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{l.URL}, DialTimeout: 10 * time.Second})
		g.Expect(err).NotTo(HaveOccurred())
		defer cli.Close()
		h, err := cli.HashKV(stepCtx(t), l.URL, rev)
		g.Expect(err).NotTo(HaveOccurred())
		return h.Hash
	}

	t.Run("to the revision before the range delete", func(t *testing.T) {
		g := NewWithT(t)
		l, r, err := replayTo(t, base, ReplayOptions{From: uri, S3: s3Opts(), Owner: "cluster-uid", Target: ReplayTarget{Revision: beforeDelete}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Replayed.Reached).To(Equal(beforeDelete))
		g.Expect(r.Replayed.From).To(Equal(base.result.Snapshot.Revision))
		g.Expect(r.Replayed.LeasedPuts).To(Equal(int64(2)))
		g.Expect(localHash(l, beforeDelete)).To(Equal(liveHash(beforeDelete)))
	})
	t.Run("saved as a snapshot that restores to the same store", func(t *testing.T) {
		g := NewWithT(t)
		out := filepath.Join(t.TempDir(), "replayed.db")
		// No owner given, as a new cluster's restore from the archive of a
		// deleted one: the manifest's owner is taken.
		_, r, err := replayTo(t, base, ReplayOptions{From: uri, S3: s3Opts(), Target: ReplayTarget{Revision: beforeDelete}, Out: out})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Replayed.Reached).To(Equal(beforeDelete))
		l := newLocal(t, filepath.Join(t.TempDir(), "data"))
		l.restore(t, out)
		l.start(t)
		l.waitReady(t)
		g.Expect(localHash(l, beforeDelete)).To(Equal(liveHash(beforeDelete)))
	})
	t.Run("to the time the range delete was received", func(t *testing.T) {
		g := NewWithT(t)
		var at time.Time
		for _, r := range revs {
			if r.Revision.Revision == del.Header.Revision {
				at = r.Time
			}
		}
		l, r, err := replayTo(t, base, ReplayOptions{From: uri, S3: s3Opts(), Owner: "cluster-uid", Target: ReplayTarget{Time: at}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Replayed.Reached).To(BeNumerically(">=", del.Header.Revision))
		g.Expect(r.Replayed.ReachedTime).NotTo(BeTemporally(">", at))
		g.Expect(localHash(l, r.Replayed.Reached)).To(Equal(liveHash(r.Replayed.Reached)))
	})
	t.Run("to the end, verified against the live cluster", func(t *testing.T) {
		g := NewWithT(t)
		_, r, err := replayTo(t, base, ReplayOptions{From: uri, S3: s3Opts(), Owner: "cluster-uid", Live: live.Config})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Replayed.Reached).To(Equal(after))
		g.Expect(r.Replayed.Verification).To(SatisfyAll(HaveField("Matches", true), HaveField("Revision", after)))
	})
	t.Run("past the end of the archive", func(t *testing.T) {
		g := NewWithT(t)
		_, _, err := replayTo(t, base, ReplayOptions{From: uri, S3: s3Opts(), Owner: "cluster-uid", Target: ReplayTarget{Revision: after + 100}})
		g.Expect(err).To(MatchError(ErrNotFound))
		g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("ends at revision %d", after))))
	})
	t.Run("of another owner", func(t *testing.T) {
		g := NewWithT(t)
		_, _, err := replayTo(t, base, ReplayOptions{From: uri, S3: s3Opts(), Owner: "someone-else"})
		g.Expect(err).To(MatchError(ErrRefused))
		g.Expect(err).To(MatchError(ContainSubstring("belongs to cluster-uid")))
	})
}

// TestReplayOfAnArchiveWithNothingAfterItsBase: an archive whose agent
// ran but received no write since the base replays to the base (the
// newest state it knows); a revision past the base is not archived, and
// the replay says so.
func TestReplayOfAnArchiveWithNothingAfterItsBase(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	live := startLive(t, 1, "root")
	live.put(t, "k-", 5, 10)
	bucket := newBucket(t)
	base := baseBackup(t, live, bucket)
	uri := "s3://" + bucket + "/archives/idle"
	a, stop := runArchiver(t, ArchiveOptions{Etcd: live.Config, To: uri, S3: s3Opts(), Owner: "uid", BaseRevision: base.result.Snapshot.Revision,
		Compression: Zstd, MaxAge: 100 * time.Millisecond, MaxBytes: 2048})
	g.Eventually(func() string { return a.State().Phase }).WithTimeout(30 * time.Second).Should(Equal(agentapi.ArchiveArchiving))
	g.Expect(stop()).To(Succeed())

	_, r, err := replayTo(t, base, ReplayOptions{From: uri, S3: s3Opts(), Owner: "uid"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Replayed.Reached).To(Equal(base.result.Snapshot.Revision))
	g.Expect(r.Replayed.Revisions).To(BeZero())

	_, _, err = replayTo(t, base, ReplayOptions{From: uri, S3: s3Opts(), Owner: "uid", Target: ReplayTarget{Revision: base.result.Snapshot.Revision + 1}})
	g.Expect(err).To(MatchError(ErrNotFound))
	g.Expect(err).To(MatchError(ContainSubstring("holds no segment")))
}

// TestArchiveRefusals: an archive that another cluster owns is left alone;
// a base older than etcd's compaction breaks the archive, which says so.
func TestArchiveRefusals(t *testing.T) {
	t.Parallel()
	live := startLive(t, 1, "root")
	first := live.put(t, "a-", 20, 10)

	t.Run("another owner's archive", func(t *testing.T) {
		g := NewWithT(t)
		uri := "file://" + t.TempDir() + "/archive"
		o := ArchiveOptions{Etcd: live.Config, To: uri, Owner: "first-uid", BaseRevision: first, Compression: None, MaxAge: 100 * time.Millisecond, MaxBytes: 1 << 20}
		a, stop := runArchiver(t, o)
		rev := live.put(t, "b-", 2, 10)
		waitArchived(t, a, rev)
		g.Expect(stop()).To(Succeed())

		o.Owner = "second-uid"
		a, err := NewArchiver(o)
		g.Expect(err).NotTo(HaveOccurred())
		err = a.Run(stepCtx(t))
		g.Expect(err).To(MatchError(ErrRefused))
		g.Expect(err).To(MatchError(ContainSubstring("belongs to first-uid")))
		g.Expect(a.State()).To(SatisfyAll(HaveField("Phase", agentapi.ArchiveBroken), HaveField("Cause", agentapi.ArchiveCauseRefused)))
		g.Expect(readArchive(t, uri)[0].Revision.Revision).To(Equal(first+1), "the first owner's segments are untouched")
	})

	t.Run("compacted past the base", func(t *testing.T) {
		g := NewWithT(t)
		rev := live.put(t, "c-", 5, 10)
		_, err := live.cli.Compact(stepCtx(t), rev)
		g.Expect(err).NotTo(HaveOccurred())
		a, err := NewArchiver(ArchiveOptions{Etcd: live.Config, To: "s3://" + newBucket(t) + "/a", S3: s3Opts(), Owner: "uid", BaseRevision: first, Compression: Zstd, MaxAge: time.Second, MaxBytes: 1 << 20})
		g.Expect(err).NotTo(HaveOccurred())
		err = a.Run(stepCtx(t))
		g.Expect(err).To(MatchError(etcd.ErrCompacted))
		s := a.State()
		g.Expect(s.Phase).To(Equal(agentapi.ArchiveBroken))
		g.Expect(s.Cause).To(Equal(agentapi.ArchiveCauseCompacted))
		g.Expect(s.Message).To(ContainSubstring("newer base backup"))
	})

}

// TestArchiveAgentsBesideEachOther: a force-deleted pod runs on beside its
// successor for a moment, and a pod on a node cut off from the apiserver
// beside its replacement for longer. Two agents of one archive both go
// on, each after the segments the other stored first, and the archive
// chains with no gap and no revision stored twice.
func TestArchiveAgentsBesideEachOther(t *testing.T) {
	t.Parallel()
	live := startLive(t, 1, "root")

	t.Run("an agent that read the archive before the other's segments", func(t *testing.T) {
		g := NewWithT(t)
		uri := "s3://" + newBucket(t) + "/successor"
		base := live.put(t, "a-", 1, 10)
		o := ArchiveOptions{Etcd: live.Config, To: uri, S3: s3Opts(), Owner: "uid", BaseRevision: base, Compression: Zstd, MaxAge: time.Hour, MaxBytes: 1 << 20}
		// slow opens the archive first and holds what it receives until
		// it stops; quick stores the same revisions in the meantime.
		slow, stopSlow := runArchiver(t, o)
		g.Eventually(func() string { return slow.State().Phase }).WithTimeout(30 * time.Second).Should(Equal(agentapi.ArchiveArchiving))
		o.MaxAge = 100 * time.Millisecond
		quick, stopQuick := runArchiver(t, o)
		var last int64
		for range 5 {
			last = live.put(t, "b-", 2, 10)
			time.Sleep(200 * time.Millisecond) // past quick's segment age
		}
		waitArchived(t, quick, last)
		g.Expect(quick.State().Segments).To(BeNumerically(">", 1), "quick stored more than one segment: slow meets several")
		g.Eventually(func() int64 { return pendingThrough(slow) }).WithTimeout(30 * time.Second).Should(Equal(last))
		g.Expect(stopQuick()).To(Succeed())

		g.Expect(stopSlow()).To(Succeed(), "slow goes on after quick's segments")
		s := slow.State()
		g.Expect(s.Phase).To(Equal(agentapi.ArchiveArchiving))
		g.Expect(s.LastRevision).To(Equal(last))
		g.Expect(s.Segments).To(Equal(quick.State().Segments))
		g.Expect(s.Bytes).To(BeZero(), "every revision slow held was stored already: it wrote nothing")
		revs := readArchive(t, uri) // chained: no overlap, no gap
		g.Expect(revs[0].Revision.Revision).To(Equal(base + 1))
		g.Expect(revs[len(revs)-1].Revision.Revision).To(Equal(last))
	})

	t.Run("two agents at once", func(t *testing.T) {
		g := NewWithT(t)
		uri := "s3://" + newBucket(t) + "/shared"
		base := live.put(t, "d-", 1, 10)
		o := ArchiveOptions{Etcd: live.Config, To: uri, S3: s3Opts(), Owner: "uid", BaseRevision: base, Compression: Zstd, MaxAge: 100 * time.Millisecond, MaxBytes: 1 << 20}
		one, stopOne := runArchiver(t, o)
		two, stopTwo := runArchiver(t, o)
		var last int64
		for range 20 {
			last = live.put(t, "e-", 3, 10)
			time.Sleep(50 * time.Millisecond)
		}
		waitArchived(t, one, last)
		waitArchived(t, two, last)
		g.Expect(stopOne()).To(Succeed())
		g.Expect(stopTwo()).To(Succeed())
		revs := readArchive(t, uri) // chained: no overlap, no gap
		g.Expect(revs[0].Revision.Revision).To(Equal(base + 1))
		g.Expect(revs[len(revs)-1].Revision.Revision).To(Equal(last))
	})
}

// pendingThrough is the last revision a holds unstored, or 0.
func pendingThrough(a *Archiver) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) == 0 {
		return 0
	}
	return a.pending[len(a.pending)-1].Revision.Revision
}

// TestArchiveStartsAgainFromANewerBase: an agent started from a base newer
// than the archive's last segment says which revisions the archive lacks.
func TestArchiveStartsAgainFromANewerBase(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	live := startLive(t, 1, "root")
	base := live.put(t, "a-", 3, 10)
	uri := "file://" + t.TempDir() + "/archive"
	o := ArchiveOptions{Etcd: live.Config, To: uri, Owner: "uid", BaseRevision: base, Compression: Gzip, MaxAge: 100 * time.Millisecond, MaxBytes: 1 << 20}
	a, stop := runArchiver(t, o)
	rev := live.put(t, "b-", 3, 10)
	waitArchived(t, a, rev)
	g.Expect(stop()).To(Succeed())

	newer := live.put(t, "c-", 5, 10) // not archived: no agent runs
	o.BaseRevision = newer
	a, stop = runArchiver(t, o)
	last := live.put(t, "d-", 2, 10)
	waitArchived(t, a, last)
	g.Expect(a.State().Gaps).To(ConsistOf(SatisfyAll(HaveField("From", rev+1), HaveField("To", newer))))
	g.Expect(a.State().FirstRevision).To(Equal(base + 1))
	g.Expect(stop()).To(Succeed())
	g.Expect(errors.Is(stop(), nil)).To(BeTrue())
}

// refusingFolder is a folder whose writes fail while refuse is set, as a
// store that is down.
type refusingFolder struct {
	folder
	mu     sync.Mutex
	refuse bool
	writes int
}

func (f *refusingFolder) putNew(ctx context.Context, name string, data []byte, owner string) error {
	f.mu.Lock()
	refuse := f.refuse
	f.writes++
	f.mu.Unlock()
	if refuse {
		return errors.New("the store is down")
	}
	return f.folder.putNew(ctx, name, data, owner)
}

func (f *refusingFolder) set(refuse bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse = refuse
}

// TestArchiveHoldsABoundedBacklogWhileTheStoreIsDown: while its writes
// fail, the archiver keeps what it received up to four segments' worth,
// reads no more from etcd, and says how far behind it is; once the store
// is back, every revision is stored, in order.
func TestArchiveHoldsABoundedBacklogWhileTheStoreIsDown(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	live := startLive(t, 1, "root")
	base := live.put(t, "a-", 1, 10)
	dir := t.TempDir() + "/archive"
	f := &refusingFolder{folder: dirFolder{dir: dir}}
	a, err := NewArchiver(ArchiveOptions{Etcd: live.Config, To: "file://" + dir, Owner: "uid", BaseRevision: base, Compression: None, MaxAge: 100 * time.Millisecond, MaxBytes: 1024})
	g.Expect(err).NotTo(HaveOccurred())
	a.folder = f
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		g.Expect(<-done).To(Succeed())
	}()
	g.Eventually(func() string { return a.State().Phase }).Should(Equal(agentapi.ArchiveArchiving))

	f.set(true)
	live.put(t, "b-", 200, 100) // about 30 KiB of changes
	g.Eventually(func() float64 { return a.State().LagSeconds }).WithTimeout(30 * time.Second).Should(BeNumerically(">", 1))
	pending := func() (int, int64) {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.pendingBytes, a.pending[len(a.pending)-1].Revision.Revision
	}
	g.Eventually(func() int { held, _ := pending(); return held }).WithTimeout(30*time.Second).
		Should(BeNumerically(">=", maxBacklog*1024), "it fills its backlog, a segment at each attempt to store")
	held, received := pending()
	last := live.put(t, "c-", 50, 100)
	time.Sleep(3 * archiveRetry)
	nowHeld, nowReceived := pending()
	g.Expect([]int64{int64(nowHeld), nowReceived}).To(Equal([]int64{int64(held), received}), "and then read no more")
	g.Expect(received).To(BeNumerically("<", last))
	g.Expect(a.State().LastRevision).To(BeZero())

	f.set(false)
	waitArchived(t, a, last)
	revs := readArchive(t, "file://"+dir)
	g.Expect(revs[0].Revision.Revision).To(Equal(base + 1))
	g.Expect(revs[len(revs)-1].Revision.Revision).To(Equal(last))
	g.Expect(revs).To(HaveLen(int(last - base)))
}

// TestArchivePrune: segments that only a restore from an older base would
// need are deleted, oldest first, once a newer base is the oldest kept;
// the newer base still replays to the end, the older one no longer can;
// another owner's archive is left alone, and a second prune deletes
// nothing.
func TestArchivePrune(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	live := startLive(t, 1, "root")
	live.put(t, "a-", 10, 10)
	bucket := newBucket(t)
	older := baseBackup(t, live, bucket)
	uri := "s3://" + bucket + "/archive"
	a, stop := runArchiver(t, ArchiveOptions{Etcd: live.Config, To: uri, S3: s3Opts(), Owner: "uid", BaseRevision: older.result.Snapshot.Revision, Compression: Zstd, MaxAge: 50 * time.Millisecond, MaxBytes: 512})
	live.put(t, "b-", 40, 64)
	newer := baseBackup(t, live, bucket) // overwrites base.db: the older base is fetched already
	last := live.put(t, "c-", 40, 64)
	waitArchived(t, a, last)
	g.Expect(stop()).To(Succeed())
	before := len(readArchive(t, uri))

	_, err := Prune(stepCtx(t), PruneOptions{Archive: uri, S3: s3Opts(), Owner: "someone-else", Before: newer.result.Snapshot.Revision})
	g.Expect(err).To(MatchError(ErrRefused))
	g.Expect(readArchive(t, uri)).To(HaveLen(before))

	r, err := Prune(stepCtx(t), PruneOptions{Archive: uri, S3: s3Opts(), Owner: "uid", Before: newer.result.Snapshot.Revision})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Pruned.Segments).To(BeNumerically(">", 0))
	g.Expect(r.Pruned.Through).To(BeNumerically("<=", newer.result.Snapshot.Revision))
	revs := readArchive(t, uri)
	g.Expect(revs[0].Revision.Revision).To(BeNumerically("<=", newer.result.Snapshot.Revision+1), "the newer base still has every revision after it")
	g.Expect(revs[0].Revision.Revision).To(BeNumerically(">", older.result.Snapshot.Revision+1))
	g.Expect(revs[len(revs)-1].Revision.Revision).To(Equal(last))

	_, rr, err := replayTo(t, newer, ReplayOptions{From: uri, S3: s3Opts(), Owner: "uid", Live: live.Config})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rr.Replayed.Reached).To(Equal(last))
	_, _, err = replayTo(t, older, ReplayOptions{From: uri, S3: s3Opts(), Owner: "uid"})
	g.Expect(err).To(MatchError(ErrNotFound))
	g.Expect(err).To(MatchError(ContainSubstring("starts at revision")))

	again, err := Prune(stepCtx(t), PruneOptions{Archive: uri, S3: s3Opts(), Owner: "uid", Before: newer.result.Snapshot.Revision})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Pruned.Segments).To(BeZero())
}

// TestArchiverPrunesAtStart: an archiver that starts again from a newer
// base with PruneBefore at its revision deletes the segments that only the
// older base needed, beside archiving: its state's first revision and
// count of segments follow the deletions, the newer base replays to the
// end, and the writes after the start are archived with no gap.
func TestArchiverPrunesAtStart(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	live := startLive(t, 1, "root")
	live.put(t, "a-", 10, 10)
	bucket := newBucket(t)
	older := baseBackup(t, live, bucket)
	uri := "s3://" + bucket + "/archive"
	o := ArchiveOptions{Etcd: live.Config, To: uri, S3: s3Opts(), Owner: "uid", BaseRevision: older.result.Snapshot.Revision, Compression: Zstd, MaxAge: 50 * time.Millisecond, MaxBytes: 512}
	a, stop := runArchiver(t, o)
	live.put(t, "b-", 40, 64)
	newer := baseBackup(t, live, bucket)
	waitArchived(t, a, live.put(t, "c-", 40, 64))
	g.Expect(stop()).To(Succeed())
	g.Expect(readArchive(t, uri)[0].Revision.Revision).To(Equal(older.result.Snapshot.Revision + 1))

	o.BaseRevision, o.PruneBefore = newer.result.Snapshot.Revision, newer.result.Snapshot.Revision
	a, stop = runArchiver(t, o)
	last := live.put(t, "d-", 40, 64)
	waitArchived(t, a, last)
	g.Eventually(func() int64 { return a.State().FirstRevision }).WithTimeout(30*time.Second).
		Should(BeNumerically(">", older.result.Snapshot.Revision+1), "the segments only the older base needed go")
	g.Expect(stop()).To(Succeed())

	st := a.State()
	revs := readArchive(t, uri)
	g.Expect(st.FirstRevision).To(Equal(revs[0].Revision.Revision), "the state's first revision is the archive's")
	g.Expect(st.FirstRevision).To(BeNumerically("<=", newer.result.Snapshot.Revision+1), "the newer base keeps every revision after it")
	g.Expect(st.Gaps).To(BeEmpty())
	g.Expect(revs[len(revs)-1].Revision.Revision).To(Equal(last))
	_, names := archiveFolder(t, uri)
	g.Expect(st.Segments).To(Equal(len(names)), "the state counts the segments left")

	_, rr, err := replayTo(t, newer, ReplayOptions{From: uri, S3: s3Opts(), Owner: "uid", Live: live.Config})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rr.Replayed.Reached).To(Equal(last))
}

// archiveFolder opens the archive at uri and lists its segments.
func archiveFolder(t *testing.T, uri string) (folder, []string) {
	t.Helper()
	g := NewWithT(t)
	loc, err := ParseURI(uri)
	g.Expect(err).NotTo(HaveOccurred())
	f, err := openFolder(stepCtx(t), loc, s3Opts())
	g.Expect(err).NotTo(HaveOccurred())
	names, err := listSegments(stepCtx(t), f)
	g.Expect(err).NotTo(HaveOccurred())
	return f, names
}
