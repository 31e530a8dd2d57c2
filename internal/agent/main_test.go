package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tend-dev/tend/internal/aws"
	"github.com/tend-dev/tend/internal/etcd"
	"github.com/tend-dev/tend/internal/testing/etcdserver"
	"github.com/tend-dev/tend/internal/testing/loopback"
	"github.com/tend-dev/tend/internal/testing/moto"
)

// server is the moto_server that this package's tests share for S3.
var server = moto.New()

func TestMain(m *testing.M) { os.Exit(server.Run(m)) }

// stepCtx is the context of one agent step: every step needs a deadline.
func stepCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// shortCtx is a step's context with a deadline of d, for a step that is
// expected to fail by running out of time.
func shortCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// s3Opts reaches the shared moto.
func s3Opts() S3Options {
	return S3Options{Endpoint: server.URL, Region: moto.Region, ForcePathStyle: true}
}

// s3Client is a client of the shared moto, to look at and tamper with
// what the agents stored.
func s3Client(t testing.TB) *s3.Client {
	t.Helper()
	l, err := aws.NewLimiters(aws.LimiterOptions{QPS: 1000, Burst: 1000})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	cfg, err := aws.LoadConfig(stepCtx(t), aws.Connection{Region: moto.Region, EndpointURL: server.URL, Limiters: l})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return aws.NewS3(cfg, aws.S3Options{UsePathStyle: true})
}

// newBucket creates a fresh bucket in the shared moto.
func newBucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("tend-%d-%d", time.Now().UnixNano(), os.Getpid())
	_, err := s3Client(t).CreateBucket(stepCtx(t), &s3.CreateBucketInput{Bucket: &name})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return name
}

// getObject returns an object's bytes and metadata.
func getObject(t testing.TB, bucket, key string) ([]byte, map[string]string) {
	t.Helper()
	out, err := s3Client(t).GetObject(stepCtx(t), &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return data, out.Metadata
}

func headInput(loc Location) *s3.HeadObjectInput {
	return &s3.HeadObjectInput{Bucket: &loc.Bucket, Key: &loc.Key}
}

// putObject writes an object as someone other than the agent would.
func putObject(t testing.TB, bucket, key string, data []byte, meta map[string]string) {
	t.Helper()
	_, err := s3Client(t).PutObject(stepCtx(t), &s3.PutObjectInput{
		Bucket: &bucket, Key: &key, Body: strings.NewReader(string(data)), Metadata: meta,
		ContentLength: awssdk.Int64(int64(len(data))),
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

// liveCluster is a real etcd cluster with the agent's view of it.
type liveCluster struct {
	*etcdserver.Cluster
	// Config is what LoadConnection read from the files that a Job mounts.
	Config etcd.Config
	// ConnectionDir and ClientTLSDir hold those files.
	ConnectionDir, ClientTLSDir string
	cli                         *clientv3.Client
}

// startLive starts a TLS cluster and writes its connection files, with a
// client certificate whose common name is cn.
func startLive(t testing.TB, members int, cn string) *liveCluster {
	t.Helper()
	g := NewWithT(t)
	c := etcdserver.Start(t, etcdserver.Options{Members: members, TLS: true})
	l := &liveCluster{Cluster: c, ConnectionDir: t.TempDir(), ClientTLSDir: t.TempDir()}
	clientTLS, err := c.PKI.ClientTLSAs(cn)
	g.Expect(err).NotTo(HaveOccurred())
	writeClientTLS(t, l.ClientTLSDir, c.PKI.CAFile, clientTLS)
	g.Expect(os.WriteFile(filepath.Join(l.ConnectionDir, ConnectionEndpointsFile), []byte(strings.Join(c.ClientURLs(), ",")), 0o600)).To(Succeed())
	ca, err := os.ReadFile(c.PKI.CAFile)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(l.ConnectionDir, ConnectionCAFile), ca, 0o600)).To(Succeed())
	l.Config, err = LoadConnection(l.ConnectionDir, l.ClientTLSDir)
	g.Expect(err).NotTo(HaveOccurred())
	l.cli, err = clientv3.New(clientv3.Config{Endpoints: c.ClientURLs(), TLS: clientTLS, DialTimeout: 10 * time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = l.cli.Close() })
	return l
}

// writeClientTLS writes a client certificate Secret's files.
func writeClientTLS(t testing.TB, dir, caFile string, cfg *tls.Config) {
	t.Helper()
	g := NewWithT(t)
	cert := cfg.Certificates[0]
	g.Expect(os.WriteFile(filepath.Join(dir, ClientCertFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600)).To(Succeed())
	keyDER, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, ClientKeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)).To(Succeed())
	ca, err := os.ReadFile(caFile)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, ClientCAFile), ca, 0o600)).To(Succeed())
}

// put writes n keys with values of size bytes (random, so that they do not
// compress), under prefix, and returns the revision of the last.
func (l *liveCluster) put(t testing.TB, prefix string, n, size int) int64 {
	t.Helper()
	g := NewWithT(t)
	var rev int64
	value := make([]byte, size)
	for i := range n {
		_, _ = rand.Read(value)
		resp, err := l.cli.Put(stepCtx(t), fmt.Sprintf("%s%05d", prefix, i), string(value))
		g.Expect(err).NotTo(HaveOccurred())
		rev = resp.Header.Revision
	}
	return rev
}

// etcdutl runs etcdutl with args and returns its output.
func etcdutl(t testing.TB, args ...string) (string, error) {
	t.Helper()
	bin, err := etcdserver.FindBinaries()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	out, err := exec.Command(bin.Etcdutl, args...).CombinedOutput()
	return string(out), err
}

// restoreSnapshot runs etcdutl snapshot restore as the verify pod's restore
// container does, with a peer URL on port peerPort.
func restoreSnapshot(snapshot, dataDir string, peerPort int) []string {
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	return []string{"snapshot", "restore", snapshot, "--data-dir=" + dataDir, "--name=verify",
		"--initial-cluster=verify=" + peer, "--initial-advertise-peer-urls=" + peer}
}

// localEtcd is an etcd that runs on a restored data directory, as the
// verify pod's sidecar does.
type localEtcd struct {
	URL      string
	PeerPort int
	DataDir  string
}

// newLocal reserves the ports of a local etcd on dataDir.
func newLocal(t testing.TB, dataDir string) *localEtcd {
	return &localEtcd{
		URL:      "http://127.0.0.1:" + strconv.Itoa(loopback.TestPort(t)),
		PeerPort: loopback.TestPort(t),
		DataDir:  dataDir,
	}
}

// restore restores snapshot into the local etcd's data directory, and
// fails the test if etcdutl refuses it.
func (l *localEtcd) restore(t testing.TB, snapshot string) {
	t.Helper()
	out, err := etcdutl(t, restoreSnapshot(snapshot, l.DataDir, l.PeerPort)...)
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "%s", out)
}

// start runs etcd on the data directory and kills it when the test ends.
// It does not wait: Verify's own wait is part of what is tested.
func (l *localEtcd) start(t testing.TB) {
	t.Helper()
	bin, err := etcdserver.FindBinaries()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	etcdserver.StartOnDataDir(t, bin.Etcd, l.DataDir, "verify", l.URL, "http://127.0.0.1:"+strconv.Itoa(l.PeerPort))
}

// waitReady waits until the local etcd serves /readyz.
func (l *localEtcd) waitReady(t testing.TB) {
	t.Helper()
	NewWithT(t).Eventually(func() (int, error) {
		resp, err := http.Get(l.URL + "/readyz") //nolint:noctx // a loopback URL the test built
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(http.StatusOK))
}
