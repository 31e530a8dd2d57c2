package etcdserver

import (
	"strconv"
	"syscall"
	"testing"

	"github.com/tend-dev/tend/internal/testing/logtail"
	"github.com/tend-dev/tend/internal/testing/loopback"
)

// Standalone is an etcd that StartForceNewCluster started.
type Standalone struct {
	p   *process
	log *logtail.Buffer
}

// StartForceNewCluster runs etcd with --force-new-cluster on the data
// directory of a member of a cluster that lost its quorum, as the recovery
// Job's sidecar does: as member name, listening in plain HTTP on clientURL,
// peerURL and a metrics URL of its own on 127.0.0.1, and advertising
// advertiseClientURL (the member's real client URL, which it does not
// listen on). It passes no --initial-* flag: etcd reads the membership from
// the data. It does not wait for etcd to serve. The process is killed when
// the test ends, and its output is logged if the test failed.
func StartForceNewCluster(t testing.TB, bin, dataDir, name, clientURL, peerURL, advertiseClientURL string) *Standalone {
	t.Helper()
	args := []string{"--name=" + name, "--data-dir=" + dataDir, "--force-new-cluster",
		"--listen-client-urls=" + clientURL, "--advertise-client-urls=" + advertiseClientURL,
		"--listen-peer-urls=" + peerURL,
		"--listen-metrics-urls=http://127.0.0.1:" + strconv.Itoa(loopback.TestPort(t)),
		"--unsafe-no-fsync=true"}
	s := &Standalone{log: logtail.New(logTail)}
	var err error
	if s.p, err = startProcess(bin, args, s.log); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.p.kill()
		if t.Failed() {
			t.Logf("the etcd --force-new-cluster on %s:\n%s", dataDir, s.log.String())
		}
	})
	return s
}

// Stop sends etcd SIGTERM, as the kubelet stops a sidecar, waits until it
// has exited, and says how it ended, such as "exit status 0" or
// "signal: terminated".
func (s *Standalone) Stop() string {
	if s.p.running() {
		_ = syscall.Kill(s.p.cmd.Process.Pid, syscall.SIGTERM)
	}
	<-s.p.exited
	return s.p.exitReason()
}

// Log returns the end of etcd's output.
func (s *Standalone) Log() string { return s.log.String() }

// Stop stops m with SIGTERM, as the kubelet stops a pod, waits until it
// has exited, and says how it ended. etcd closes its WAL on the way out,
// which a SIGKILL (Kill) does not let it do: what it has buffered there,
// such as the last commit index it learned, is then lost. Its data stays,
// for Restart.
func (m *Member) Stop() string {
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	if p == nil {
		return "never started"
	}
	if p.running() {
		_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	}
	<-p.exited
	return p.exitReason()
}
