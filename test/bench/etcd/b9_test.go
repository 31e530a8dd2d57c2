//go:build e2e

package etcd

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/tend-dev/tend/internal/agent"
	"github.com/tend-dev/tend/internal/agentapi"
)

// B9's settings. Pass them after -args when running this package alone.
var (
	flagB9Sizes = flag.String("b9.sizes", "100MB,1GB",
		"B9: the database sizes to measure at, in MB or GB (10^6, 10^9 bytes of values), in order; the source is filled up to each")
	flagB9Samples = flag.Int("b9.samples", 3,
		"B9: samples of every figure at each size (at least 3 where a ratio decides a goal); -benchtime does not change it")
	flagB9Restore = flag.Bool("b9.restore", true,
		"B9: measure the restore of a new cluster at each size")
	flagB9Members = flag.Int("b9.restore-members", 3,
		"B9: members of the restored clusters")
	flagB9Timeout = flag.Duration("b9.timeout", 10*time.Minute,
		"B9: the longest wait for one step (a fill, a pod, a restore); a step that takes longer fails the benchmark")
)

// BenchmarkB9 is issue 6's B9 on the local cluster: the throughput of tend
// backup to S3 (moto) with each compression against etcdctl snapshot save
// from the same member, the time of a verification, and the restore of a
// new cluster against etcdutl snapshot restore alone, at each database
// size, in one run. See doc.go.
func BenchmarkB9(b *testing.B) {
	sizes, err := parseB9Sizes(*flagB9Sizes)
	if err != nil {
		b.Fatalf("-b9.sizes: %v", err)
	}
	if *flagB9Samples < 1 || *flagB9Members < 1 {
		b.Fatal("-b9.samples and -b9.restore-members must be at least 1")
	}
	start := time.Now()
	r := getRig(b)
	ns := r.cluster.Namespace(b)
	src := r.b9StartSource(b, ns)
	var done []*b9Figures
	for _, size := range sizes {
		f := newB9Figures(size)
		ok := b.Run(size.label, func(b *testing.B) {
			// The testing package calls a benchmark again for
			// -benchtime Nx with N > 1; the samples are taken once.
			if !f.measured {
				f.measured = true
				r.b9Measure(b, src, f)
			}
			for unit, v := range f.metrics() {
				b.ReportMetric(v, unit)
			}
		})
		done = append(done, f)
		if !ok {
			break
		}
	}
	var sb strings.Builder
	for _, f := range done {
		f.write(&sb)
	}
	fmt.Fprintf(&sb, "\nSamples per figure: %d (-b9.samples); each tend backup and restore Job ran as the contract lays it out, "+
		"on the one node (2 cores) with moto as S3; B9 took %.1f min.\n", *flagB9Samples, time.Since(start).Minutes())
	b.Log("\n" + sb.String())
	fmt.Fprintf(os.Stdout, "\nB9, etcd backup and restore on the local cluster (test/bench/etcd):\n%s", sb.String())
	r.deleteNamespace(b, ns)
}

// b9Variant is one way of taking a backup: the anchor (etcdctl), tend
// backup with a compression to S3, tend backup to a file, or moto's own
// upload and download of as many bytes.
type b9Variant string

const (
	b9Anchor   b9Variant = "etcdctl"
	b9FileNone b9Variant = "file"
	b9Moto     b9Variant = "moto"
)

// b9Measure fills the source up to f's size, then takes the samples of
// every figure: -b9.samples rounds of the throughput figures, each round
// running every variant once, in an order that rotates; the None backups
// to S3 are verified as they would be for an EtcdBackup; then the
// restores. Every sample starts after a sync(2), so that none pays for the
// writeback of the one before.
func (r *rig) b9Measure(b *testing.B, src *b9Source, f *b9Figures) {
	start := time.Now()
	f.dbBytes = src.fillTo(b, f.size.bytes)
	tag := strings.ToLower(f.size.label)
	timeout := *flagB9Timeout

	// A first snapshot reads the database into the page cache, so that
	// no variant pays for a cold read alone.
	warm := r.runPod(b, src.pods.etcdctlPod("warm-"+tag), timeout)
	size, err := snapshotStatusSize(r.mustLog(b, warm, "status", false))
	if err != nil {
		b.Fatalf("pod %s: %v", warm.Name, err)
	}
	f.snapshotBytes = size
	r.deletePod(b, warm)

	variants := []b9Variant{b9Anchor}
	for _, c := range b9Compressions {
		variants = append(variants, b9Variant(c))
	}
	variants = append(variants, b9FileNone, b9Moto)
	var restoreKey, restoreSHA string
	for round := range *flagB9Samples {
		for _, v := range rotation(variants, round) {
			name := fmt.Sprintf("%s-%s-%d", strings.ToLower(string(v)), tag, round)
			key := fmt.Sprintf("b9/%s/%s.db", tag, name)
			syscall.Sync()
			switch v {
			case b9Anchor:
				r.b9Etcdctl(b, src, f, name)
			case b9FileNone:
				r.b9FileBackup(b, src, f, name)
			case b9Moto:
				if f.snapshotBytes == 0 {
					b.Fatal("moto's ceiling needs the snapshot's size, which the warm-up's etcdutl snapshot status gives")
				}
				up, down := src.motoCeiling(b, key, f.snapshotBytes)
				f.motoUp, f.motoDown = append(f.motoUp, up), append(f.motoDown, down)
				b9Logf(b, "B9 %s: moto took %.1f MB/s and gave %.1f MB/s", name, up, down)
			default:
				c := agent.Compression(v)
				verify := c == agent.None
				res := r.b9Backup(b, src, f, name, key, c, verify)
				if !verify {
					src.deleteObject(b, key)
					continue
				}
				if restoreKey != "" {
					src.deleteObject(b, restoreKey)
				}
				restoreKey, restoreSHA = key, res.Artifact.SHA256
			}
		}
	}
	b9Logf(b, "B9 %s: backups and verifications measured after %.1f s", f.size.label, time.Since(start).Seconds())

	if *flagB9Restore {
		f.members = *flagB9Members
		for round := range *flagB9Samples {
			for _, anchor := range rotation([]bool{true, false}, round) {
				name := fmt.Sprintf("restore-%s-%d", tag, round)
				syscall.Sync()
				if anchor {
					r.b9Etcdutl(b, src, f, "etcdutl-"+name, restoreKey, restoreSHA)
				} else {
					r.b9Restore(b, src, f, name, restoreKey, restoreSHA)
				}
			}
		}
	}
	src.deleteObject(b, restoreKey)
	b9Logf(b, "B9 %s: measured in %.1f s", f.size.label, time.Since(start).Seconds())
}

// b9Etcdctl takes one sample of the anchor: etcdctl snapshot save.
func (r *rig) b9Etcdctl(b *testing.B, src *b9Source, f *b9Figures, name string) {
	b.Helper()
	pod := r.runPod(b, src.pods.etcdctlPod(name), *flagB9Timeout)
	took, err := etcdctlTook(r.mustLog(b, pod, "save", false))
	if err != nil {
		b.Fatalf("pod %s: %v", pod.Name, err)
	}
	size, err := snapshotStatusSize(r.mustLog(b, pod, "status", false))
	if err != nil {
		b.Fatalf("pod %s: %v", pod.Name, err)
	}
	f.snapshotBytes = size
	f.etcdctl = append(f.etcdctl, mbPerSecond(size, took.Seconds()))
	b9Logf(b, "B9 %s: etcdctl snapshot save took %.2f s for %d bytes", name, took.Seconds(), size)
	r.deletePod(b, pod)
}

// b9Backup takes one sample of tend backup with compression c to key,
// verified when verify is set, and returns the backup's Result.
func (r *rig) b9Backup(b *testing.B, src *b9Source, f *b9Figures, name, key string, c agent.Compression, verify bool) agentapi.Result {
	b.Helper()
	pod := r.runPod(b, src.pods.backupPod(name, key, c, verify), *flagB9Timeout)
	res := result(b, pod, agentapi.OpBackup, agentapi.OpBackup)
	if res.Snapshot == nil || res.Artifact == nil {
		b.Fatalf("pod %s: the backup's Result lacks the snapshot or the artifact: %+v", pod.Name, res)
	}
	size := res.Snapshot.DBSizeBytes
	cs := string(c)
	backupLog := r.mustLog(b, pod, agentapi.OpBackup, true)
	f.tend[cs] = append(f.tend[cs], mbPerSecond(size, stepSeconds(b, pod, agentapi.OpBackup, res)))
	f.stored[cs] = float64(res.Artifact.SizeBytes) / float64(size)
	stream, ok := agentLogSeconds(backupLog, "Stored the snapshot")
	if ok {
		f.stream[cs] = append(f.stream[cs], mbPerSecond(size, stream))
	}
	b9Logf(b, "B9 %s: tend backup %.2f MB/s (stream %.2f s) for %d bytes, stored %d", name, f.tend[cs][len(f.tend[cs])-1], stream, size, res.Artifact.SizeBytes)
	if verify {
		r.b9Verification(b, pod, f, backupLog)
	}
	r.deletePod(b, pod)
	return res
}

// b9FileBackup takes one sample of tend backup --compression=None to a
// file on the node, where etcdctl saves its snapshot.
func (r *rig) b9FileBackup(b *testing.B, src *b9Source, f *b9Figures, name string) {
	b.Helper()
	pod := r.runPod(b, src.pods.fileBackupPod(name), *flagB9Timeout)
	res := result(b, pod, agentapi.OpBackup, agentapi.OpBackup)
	if res.Snapshot == nil {
		b.Fatalf("pod %s: the backup's Result lacks the snapshot: %+v", pod.Name, res)
	}
	seconds := stepSeconds(b, pod, agentapi.OpBackup, res)
	size := res.Snapshot.DBSizeBytes
	f.file = append(f.file, mbPerSecond(size, seconds))
	stream, ok := agentLogSeconds(r.mustLog(b, pod, agentapi.OpBackup, false), "Stored the snapshot")
	if ok {
		f.fileStream = append(f.fileStream, mbPerSecond(size, stream))
	}
	b9Logf(b, "B9 %s: tend backup to a file took %.2f s (stream %.2f s) for %d bytes", name, seconds, stream, size)
	r.deletePod(b, pod)
}

// b9Verification reads the verification's figures from a backup pod with
// the verify steps; backupLog is the backup step's, with the kubelet's
// stamps.
func (r *rig) b9Verification(b *testing.B, pod *corev1.Pod, f *b9Figures, backupLog string) {
	b.Helper()
	fetch := result(b, pod, agentapi.OpFetch, agentapi.OpFetch)
	verify := result(b, pod, agentapi.OpVerify, agentapi.OpVerify)
	if verify.Verification == nil || !verify.Verification.Matches {
		b.Fatalf("pod %s: the verification did not match: %+v", pod.Name, verify.Verification)
	}
	from, err := lastStamp(backupLog)
	if err != nil {
		b.Fatalf("pod %s, backup: %v", pod.Name, err)
	}
	verifyLog := r.mustLog(b, pod, agentapi.OpVerify, true)
	to, err := lastStamp(verifyLog)
	if err != nil {
		b.Fatalf("pod %s, verify: %v", pod.Name, err)
	}
	start, end := r.etcdutlSpan(b, pod, "restore")
	fetchSeconds := stepSeconds(b, pod, agentapi.OpFetch, fetch)
	verifySeconds := stepSeconds(b, pod, agentapi.OpVerify, verify)
	f.verify = append(f.verify, to.Sub(from).Seconds())
	f.verifyAgent = append(f.verifyAgent, float64(verify.Verification.DurationSeconds))
	f.verifyFetch = append(f.verifyFetch, fetchSeconds)
	f.verifyRestore = append(f.verifyRestore, end.Sub(start).Seconds())
	f.verifyStep = append(f.verifyStep, verifySeconds)
	b9Logf(b, "B9 %s: verified in %.2f s (agent: %d s): fetch %.2f s, etcdutl %.2f s, verify %.2f s; %d keys at revision %d",
		pod.Name, to.Sub(from).Seconds(), verify.Verification.DurationSeconds, fetchSeconds, end.Sub(start).Seconds(),
		verifySeconds, verify.Verification.Keys, verify.Verification.Revision)
}

// stepSeconds is the durationSeconds of the Result of the agent step that
// container ran: the step's own work, from its flags read to its Result.
func stepSeconds(b *testing.B, pod *corev1.Pod, container string, res agentapi.Result) float64 {
	b.Helper()
	if res.DurationSeconds <= 0 {
		b.Fatalf("pod %s, %s: the Result has no durationSeconds, which the agents' contract promises: %+v", pod.Name, container, res)
	}
	return res.DurationSeconds
}

// b9Logf logs to the benchmark and, at once, to standard error: the
// testing package keeps only the last lines of a benchmark's log, and a
// run of B9 takes minutes.
func b9Logf(b *testing.B, format string, args ...any) {
	b.Helper()
	b.Logf(format, args...)
	fmt.Fprintf(os.Stderr, "b9: "+format+"\n", args...)
}
