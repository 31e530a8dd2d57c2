package etcdserver

import (
	"os/exec"
	"strconv"
	"testing"

	"github.com/tend-dev/tend/internal/testing/logtail"
	"github.com/tend-dev/tend/internal/testing/loopback"
)

// StartOnDataDir runs etcd, as a one-member cluster named name, on a data
// directory that etcdutl snapshot restore made (what the verify pod's
// sidecar does), in plain HTTP on clientURL and peerURL, with extra flags
// after Tend's. It does not wait for etcd to serve: callers test their
// own waits. The process is killed when the test ends, and its output is
// logged if the test failed.
func StartOnDataDir(t testing.TB, bin, dataDir, name, clientURL, peerURL string, extra ...string) {
	t.Helper()
	args := append([]string{"--name=" + name, "--data-dir=" + dataDir,
		"--listen-client-urls=" + clientURL, "--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=" + name + "=" + peerURL,
		"--listen-metrics-urls=http://127.0.0.1:" + strconv.Itoa(loopback.TestPort(t)),
		"--unsafe-no-fsync=true"}, extra...)
	log := logtail.New(64 << 10)
	p, err := startProcess(bin, args, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("the etcd on %s:\n%s", dataDir, log.String())
		}
	})
}

// StartRestored restores snapshot into dataDir with bin's etcdutl, as a
// Job's restore container does, starts etcd on it with StartOnDataDir (a
// one-member cluster named name, extra flags after Tend's) on free
// loopback ports, and returns its client URL. It does not wait either.
func StartRestored(t testing.TB, bin Binaries, snapshot, dataDir, name string, extra ...string) string {
	t.Helper()
	clientURL := "http://127.0.0.1:" + strconv.Itoa(loopback.TestPort(t))
	peerURL := "http://127.0.0.1:" + strconv.Itoa(loopback.TestPort(t))
	out, err := exec.Command(bin.Etcdutl, "snapshot", "restore", snapshot, "--data-dir="+dataDir, "--name="+name,
		"--initial-cluster="+name+"="+peerURL, "--initial-advertise-peer-urls="+peerURL).CombinedOutput()
	if err != nil {
		t.Fatalf("etcdutl snapshot restore %s: %v\n%s", snapshot, err, out)
	}
	StartOnDataDir(t, bin.Etcd, dataDir, name, clientURL, peerURL, extra...)
	return clientURL
}
