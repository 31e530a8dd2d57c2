package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/agent"
	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/etcd"
	"github.com/tend-dev/tend/internal/testing/etcdserver"
	"github.com/tend-dev/tend/internal/testing/loopback"
)

// archiveState reads a running tend archive's /status.
func archiveState(statusURL string) (agentapi.ArchiveState, error) {
	var s agentapi.ArchiveState
	resp, err := http.Get(statusURL) //nolint:noctx // a loopback URL the test built
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// TestAgentsArchiveKilledMidSegment runs tend archive as its pod does,
// under a steady writer, kills it with SIGKILL while revisions wait for
// their segment, starts it again, stops it with SIGTERM, and then replays
// the archive onto the base backup with tend replay --verify: the replay
// reaches the last acknowledged write with the live cluster's HashKV, so
// the archive lost no revision and stored none twice.
func TestAgentsArchiveKilledMidSegment(t *testing.T) {
	g := NewWithT(t)
	cluster, connectionDir, clientTLSDir := liveFiles(t)
	clusterArgs := []string{"--connection-dir=" + connectionDir, "--client-tls-dir=" + clientTLSDir}
	scratch := t.TempDir()
	backupURI := "file://" + filepath.Join(scratch, "base.db")
	backup := runStep(t, "backup", append(append([]string{"backup"}, clusterArgs...), "--to="+backupURI, "--owner=backup-uid")...)
	g.Expect(backup.code).To(Equal(agentapi.ExitOK), backup.output)
	archiveURI := "file://" + filepath.Join(scratch, "archive")

	cfg, err := agent.LoadConnection(connectionDir, clientTLSDir)
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	writer, err := etcd.New(ctx, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	defer writer.Close()
	var mu sync.Mutex
	var acked int64
	stopWriting := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stopWriting:
				return
			default:
			}
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			rev, err := writer.Apply(wctx, etcd.Revision{Changes: []etcd.Change{{Key: []byte(fmt.Sprintf("w-%06d", i)), Value: []byte("v")}}})
			wcancel()
			if err == nil {
				mu.Lock()
				acked = rev
				mu.Unlock()
			}
			time.Sleep(5 * time.Millisecond)
		}
	})

	addr := loopback.TestAddr(t)
	statusURL := "http://" + addr + agentapi.ArchiveStatusPath
	args := append(append([]string{"archive"}, clusterArgs...), "--to="+archiveURI, "--owner=cluster-uid",
		"--base-revision="+strconv.FormatInt(backup.result.Snapshot.Revision, 10),
		"--segment-max-age=500ms", "--status-address="+addr)
	first := startTend(t, args...)
	// Killed while revisions wait for their segment.
	g.Eventually(func() (float64, error) {
		s, err := archiveState(statusURL)
		if s.Segments == 0 {
			return 0, err
		}
		return s.LagSeconds, err
	}).WithTimeout(time.Minute).WithPolling(20 * time.Millisecond).Should(BeNumerically(">", 0.1))
	g.Expect(first.cmd.Process.Kill()).To(Succeed())
	<-first.done

	second := startTend(t, args...)
	time.Sleep(time.Second)
	close(stopWriting)
	wg.Wait()
	mu.Lock()
	last := acked
	mu.Unlock()
	g.Eventually(func() (int64, error) {
		s, err := archiveState(statusURL)
		return s.LastRevision, err
	}).WithTimeout(time.Minute).Should(BeNumerically(">=", last))
	s, err := archiveState(statusURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s).To(SatisfyAll(HaveField("Phase", agentapi.ArchiveArchiving), HaveField("Gaps", BeEmpty()),
		HaveField("FirstRevision", backup.result.Snapshot.Revision+1)))
	resp, err := http.Get("http://" + addr + "/metrics") //nolint:noctx // a loopback URL the test built
	g.Expect(err).NotTo(HaveOccurred())
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	g.Expect(string(metrics)).To(SatisfyAll(
		ContainSubstring("tend_archive_lag_seconds"), ContainSubstring("tend_archive_last_revision "+strconv.FormatInt(s.LastRevision, 10)),
	))
	g.Expect(second.stop(t)).To(Succeed(), "SIGTERM stores what was received and exits 0")

	// The base backup, restored into a local etcd, and the archive replayed
	// onto it up to the end, compared with the live cluster.
	snapshot := filepath.Join(scratch, "snapshot.db")
	fetch := runStep(t, "fetch", "fetch", "--from="+backupURI, "--compression=None", "--out="+snapshot)
	g.Expect(fetch.code).To(Equal(agentapi.ExitOK), fetch.output)
	clientURL := etcdserver.StartRestored(t, cluster.Bin, snapshot, filepath.Join(scratch, "data"), "replay", "--max-txn-ops=100000")

	replay := runStep(t, "replay", append(append([]string{"replay", "--from=" + archiveURI, "--owner=cluster-uid", "--local-endpoint=" + clientURL}, clusterArgs...), "--verify")...)
	g.Expect(replay.code).To(Equal(agentapi.ExitOK), replay.output)
	g.Expect(replay.result.Replayed).To(SatisfyAll(
		HaveField("From", backup.result.Snapshot.Revision),
		HaveField("Reached", BeNumerically(">=", last)),
		HaveField("Verification.Matches", true),
	))
	g.Expect(replay.result.Replayed.Revisions).To(Equal(replay.result.Replayed.Reached - replay.result.Replayed.From))

	// Nothing is older than the base: a prune at its revision keeps all.
	prune := runStep(t, "prune", "prune", "--archive="+archiveURI, "--owner=cluster-uid",
		"--before-revision="+strconv.FormatInt(backup.result.Snapshot.Revision, 10))
	g.Expect(prune.code).To(Equal(agentapi.ExitOK), prune.output)
	g.Expect(prune.result.Pruned.Segments).To(BeZero())
	g.Expect(prune.result.Pruned.Kept).To(Equal(s.Segments))

	wrongOwner := runStep(t, "replay", "replay", "--from="+archiveURI, "--owner=another-uid", "--local-endpoint="+clientURL)
	g.Expect(wrongOwner.code).To(Equal(agentapi.ExitTerminal), wrongOwner.output)
	g.Expect(wrongOwner.result.Error).To(ContainSubstring("belongs to cluster-uid"))
}
