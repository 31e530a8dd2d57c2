package agent

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/tend-dev/tend/internal/testing/repo"
)

// BenchmarkBackup compares a backup with a direct `etcdctl snapshot save`
// of the same member, to a file on the same disk: each iteration runs
// both, and reports both rates (MB of database per second) and their
// ratio, agent/etcdctl. The backup also compresses, hashes, and reads the
// file back; etcdctl only writes and syncs. The database holds
// TEND_BENCH_MB (default 64) MB of hex values, which compress to about
// half, as etcd's data does. It reports figures and never fails on time.
//
//	go test -run '^$' -bench BenchmarkBackup -benchtime 3x ./internal/agent
func BenchmarkBackup(b *testing.B) {
	g := NewWithT(b)
	mb := 64
	if v := os.Getenv("TEND_BENCH_MB"); v != "" {
		var err error
		mb, err = strconv.Atoi(v)
		g.Expect(err).NotTo(HaveOccurred())
	}
	live := startLive(b, 1, "root")
	raw := make([]byte, 128<<10)
	for i := range mb * 4 { // 4 values of 256 KiB (hex) per MB
		_, _ = rand.Read(raw)
		_, err := live.cli.Put(stepCtx(b), fmt.Sprintf("bench-%06d", i), hex.EncodeToString(raw))
		g.Expect(err).NotTo(HaveOccurred())
	}
	etcdctl := etcdctlPath(b)
	dir := b.TempDir()
	ctlArgs := []string{
		"--endpoints=" + live.ClientURLs()[0],
		"--cacert=" + filepath.Join(live.ConnectionDir, ConnectionCAFile),
		"--cert=" + filepath.Join(live.ClientTLSDir, ClientCertFile),
		"--key=" + filepath.Join(live.ClientTLSDir, ClientKeyFile),
		"snapshot", "save", filepath.Join(dir, "etcdctl.db"),
	}

	for _, c := range []Compression{None, Gzip, Zstd} {
		b.Run(string(c), func(b *testing.B) {
			var ctl, ag, ctlCPU, agCPU time.Duration
			var dbBytes int64
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				cmd := exec.Command(etcdctl, ctlArgs...)
				out, err := cmd.CombinedOutput()
				ctl += time.Since(start)
				g.Expect(err).NotTo(HaveOccurred(), "%s", out)
				ctlCPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()

				to := "file://" + filepath.Join(dir, fmt.Sprintf("agent-%s-%d.db", c, i))
				cpu0 := processCPU(b)
				start = time.Now()
				r, err := Backup(stepCtx(b), BackupOptions{Etcd: live.Config, To: to, Compression: c, Owner: "bench"})
				ag += time.Since(start)
				agCPU += processCPU(b) - cpu0
				g.Expect(err).NotTo(HaveOccurred())
				dbBytes = r.Snapshot.DBSizeBytes
				g.Expect(os.Remove(strings.TrimPrefix(to, "file://"))).To(Succeed())
			}
			n := float64(b.N) * float64(dbBytes) / 1e6
			ctlRate, agRate := n/ctl.Seconds(), n/ag.Seconds()
			b.ReportMetric(ctlRate, "etcdctl-MB/s")
			b.ReportMetric(agRate, "agent-MB/s")
			b.ReportMetric(agRate/ctlRate, "agent/etcdctl")
			b.ReportMetric(float64(dbBytes)/1e6, "db-MB")
			// CPU seconds of the client per GB of database: what the two
			// share the machine's cores with the member for.
			b.ReportMetric(ctlCPU.Seconds()/n*1000, "etcdctl-cpu-s/GB")
			b.ReportMetric(agCPU.Seconds()/n*1000, "agent-cpu-s/GB")
		})
	}
}

// etcdctlPath asks the toolchain for etcdctl, built from the pinned etcd.
func etcdctlPath(b *testing.B) string {
	root, err := repo.Root()
	NewWithT(b).Expect(err).NotTo(HaveOccurred())
	out, err := exec.Command(filepath.Join(root, "hack", "toolchain.sh"), "etcdctl").Output()
	NewWithT(b).Expect(err).NotTo(HaveOccurred(), "hack/toolchain.sh etcdctl")
	return strings.TrimSpace(string(out))
}

// processCPU is the CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	NewWithT(b).Expect(syscall.Getrusage(syscall.RUSAGE_SELF, &ru)).To(Succeed())
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
