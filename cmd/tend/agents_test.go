package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/tend-dev/tend/internal/agent"
	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/aws"
	"github.com/tend-dev/tend/internal/etcd"
	"github.com/tend-dev/tend/internal/podspec"
	"github.com/tend-dev/tend/internal/testing/etcdserver"
	"github.com/tend-dev/tend/internal/testing/loopback"
	"github.com/tend-dev/tend/internal/testing/moto"
)

// agentRun is one agent command run through run(), as the container runs
// the binary.
type agentRun struct {
	code   int
	result agentapi.Result
	output string
}

// runStep runs "tend args..." with its termination message in a file of
// its own, and reads the result back as the controller does.
func runStep(t *testing.T, op string, args ...string) agentRun {
	t.Helper()
	path := filepath.Join(t.TempDir(), "termination-log")
	var out bytes.Buffer
	// The flag goes first: a step that stops at a bad flag has not read
	// those after it.
	n := 1
	if args[0] == "restore" || args[0] == "artifact" {
		n = 2
	}
	withPath := append(append(append([]string{}, args[:n]...), "--termination-message-path="+path), args[n:]...)
	code := run(withPath, &out)
	r := agentRun{code: code, output: out.String()}
	msg, err := os.ReadFile(path)
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "every step writes its result; output:\n%s", out.String())
	NewWithT(t).Expect(len(msg)).To(BeNumerically("<=", 4096))
	r.result, err = agentapi.ParseResult(string(msg), op)
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "%s", msg)
	return r
}

// liveFiles starts a TLS etcd cluster and writes the files that a Job
// mounts from its connection ConfigMap and client certificate Secret, with
// a client certificate whose common name is root.
func liveFiles(t *testing.T) (cluster *etcdserver.Cluster, connectionDir, clientTLSDir string) {
	t.Helper()
	g := NewWithT(t)
	cluster = etcdserver.Start(t, etcdserver.Options{TLS: true})
	connectionDir, clientTLSDir = t.TempDir(), t.TempDir()
	ca, err := os.ReadFile(cluster.PKI.CAFile)
	g.Expect(err).NotTo(HaveOccurred())
	root, err := cluster.PKI.ClientTLSAs("root")
	g.Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalECPrivateKey(root.Certificates[0].PrivateKey.(*ecdsa.PrivateKey))
	g.Expect(err).NotTo(HaveOccurred())
	files := map[string][]byte{
		filepath.Join(connectionDir, podspec.ConnectionEndpoints):   []byte(strings.Join(cluster.ClientURLs(), ",")),
		filepath.Join(connectionDir, podspec.ConnectionCA):          ca,
		filepath.Join(clientTLSDir, corev1.TLSCertKey):              pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Certificates[0].Certificate[0]}),
		filepath.Join(clientTLSDir, corev1.TLSPrivateKeyKey):        pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		filepath.Join(clientTLSDir, corev1.ServiceAccountRootCAKey): ca,
	}
	for path, data := range files {
		g.Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
	}
	return cluster, connectionDir, clientTLSDir
}

// TestAgentsVerifyPod runs the steps of a verifying backup Job's pod, with
// the arguments the etcdbackup controller gives them, against a cluster
// with auth on and moto: backup, fetch --from-result, etcdutl restore, the
// etcd sidecar, and verify with the root password from the environment.
// Each step's result is read from its termination message.
func TestAgentsVerifyPod(t *testing.T) {
	g := NewWithT(t)
	motoServer := moto.Start(t)
	// moto takes any key while its auth is off: one that stands out in a log.
	const secretKey = "s3cret-access-key-that-must-not-leak"
	t.Setenv("AWS_SECRET_ACCESS_KEY", secretKey)
	cluster, connectionDir, clientTLSDir := liveFiles(t)
	const password = "root-password"
	cfg, err := agent.LoadConnection(connectionDir, clientTLSDir)
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := etcd.New(ctx, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	defer admin.Close()
	g.Expect(admin.EnableAuth(ctx, password)).To(Succeed())

	l, err := aws.NewLimiters(aws.LimiterOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	awsCfg, err := aws.LoadConfig(ctx, aws.Connection{Region: moto.Region, EndpointURL: motoServer.URL, Limiters: l})
	g.Expect(err).NotTo(HaveOccurred())
	bucket := "backups"
	_, err = aws.NewS3(awsCfg, aws.S3Options{UsePathStyle: true}).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket})
	g.Expect(err).NotTo(HaveOccurred())

	scratch := t.TempDir()
	resultFile := filepath.Join(scratch, "backup.json")
	s3Args := []string{"--s3-endpoint=" + motoServer.URL, "--s3-region=" + moto.Region, "--s3-force-path-style"}
	clusterArgs := []string{"--connection-dir=" + connectionDir, "--client-tls-dir=" + clientTLSDir}

	backup := runStep(t, "backup", append(append(append([]string{"backup"}, clusterArgs...),
		"--to=s3://backups/etcd/ns/b1.db.zst"), append(s3Args, "--compression=Zstd", "--owner=uid-1", "--result-file="+resultFile)...)...)
	g.Expect(backup.code).To(Equal(agentapi.ExitOK), backup.output)
	g.Expect(backup.result.Artifact.URI).To(Equal("s3://backups/etcd/ns/b1.db.zst"))
	g.Expect(backup.result.Artifact.Compression).To(Equal("Zstd"))
	g.Expect(backup.result.Snapshot.Member).To(Equal("m0"))
	g.Expect(backup.result.DurationSeconds).To(BeNumerically(">", 0), "the step's own time")
	saved, err := agent.ReadResultFile(resultFile)
	g.Expect(err).NotTo(HaveOccurred())
	saved.DurationSeconds = backup.result.DurationSeconds // written a moment before the step ended
	g.Expect(saved).To(Equal(backup.result), "the result file holds the termination message's result")
	g.Expect(backup.output).NotTo(ContainSubstring(secretKey), "no secret in the logs")

	snapshot := filepath.Join(scratch, "snapshot.db")
	fetch := runStep(t, "fetch", append(append([]string{"fetch", "--from-result=" + resultFile}, s3Args...), "--out="+snapshot)...)
	g.Expect(fetch.code).To(Equal(agentapi.ExitOK), fetch.output)
	g.Expect(fetch.result.Artifact).To(Equal(backup.result.Artifact))

	clientURL := etcdserver.StartRestored(t, cluster.Bin, snapshot, filepath.Join(scratch, "data"), "verify", "--quota-backend-bytes=8589934592")

	verifyArgs := append(append([]string{"verify", "--local-endpoint=" + clientURL}, clusterArgs...), "--backup-result="+resultFile)
	noPassword := runStep(t, "verify", verifyArgs...)
	g.Expect(noPassword.code).To(Equal(agentapi.ExitTerminal), noPassword.output)
	g.Expect(noPassword.result.Terminal).To(BeTrue())
	g.Expect(noPassword.result.Error).To(ContainSubstring("ETCD_ROOT_PASSWORD"))

	t.Setenv(rootPasswordEnv, password)
	verify := runStep(t, "verify", verifyArgs...)
	g.Expect(verify.code).To(Equal(agentapi.ExitOK), verify.output)
	g.Expect(verify.result.Verification.Matches).To(BeTrue())
	g.Expect(verify.result.Verification.Revision).To(BeNumerically(">=", backup.result.Snapshot.Revision))
	g.Expect(verify.output).NotTo(ContainSubstring(password), "the password is never logged")
	g.Expect(noPassword.output + fetch.output).NotTo(ContainSubstring(secretKey))

	// The owner's delete Job removes the object; a second run finds it gone.
	for range 2 {
		del := runStep(t, "delete", append(append([]string{"artifact", "delete", "--uri=s3://backups/etcd/ns/b1.db.zst"}, s3Args...), "--owner=uid-1")...)
		g.Expect(del.code).To(Equal(agentapi.ExitOK), del.output)
	}
}

// TestAgentsCheck runs tend check as the etcdcluster controller's check
// Job does, on a cluster with auth on and ETCD_ROOT_PASSWORD set: it
// passes with the version the members run, and fails, retryably, with
// another one.
func TestAgentsCheck(t *testing.T) {
	g := NewWithT(t)
	cluster, connectionDir, clientTLSDir := liveFiles(t)
	cfg, err := agent.LoadConnection(connectionDir, clientTLSDir)
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := etcd.New(ctx, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	defer admin.Close()
	const password = "root-password"
	g.Expect(admin.EnableAuth(ctx, password)).To(Succeed())
	t.Setenv("ETCD_ROOT_PASSWORD", password)
	statuses, err := admin.Status(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	version := statuses[0].Version
	args := []string{"check", "--connection-dir=" + connectionDir, "--client-tls-dir=" + clientTLSDir}

	check := runStep(t, "check", append(args, "--version=v"+version)...)
	g.Expect(check.code).To(Equal(agentapi.ExitOK), check.output)
	c := check.result.Check
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.ClusterVersion).To(Equal(version[:strings.LastIndex(version, ".")] + ".0"))
	g.Expect(c.Revision).To(BeNumerically(">", 0))
	g.Expect(c.Members).To(HaveLen(1))
	g.Expect(c.Members[0].Name).To(Equal(cluster.Members()[0].Name))
	g.Expect(c.Members[0].Version).To(Equal(version))
	g.Expect(check.output).NotTo(ContainSubstring(password))

	wrong := runStep(t, "check", append(args, "--version=v"+version+"0", "--timeout=3s")...)
	g.Expect(wrong.code).To(Equal(agentapi.ExitFailed), wrong.output)
	g.Expect(wrong.result.Terminal).To(BeFalse())
	g.Expect(wrong.result.Error).To(ContainSubstring("runs " + version + ", not " + version + "0"))
	g.Expect(wrong.output).To(ContainSubstring("The cluster did not pass the check yet"))
}

// TestAgentsRecover runs tend recover as a quorum-loss recovery Job does:
// a 3-member TLS cluster takes writes (and, in one case, auth), loses all
// its members, and one member's data directory comes back under etcd
// --force-new-cluster, listening on loopback in plain HTTP and advertising
// its real https client URL. The step ends once that etcd is a cluster of
// one, and reports the revision it kept: every write when the members
// were stopped (SIGTERM), and when they were killed (SIGKILL), maybe less:
// etcd keeps only what the survivor's WAL recorded as committed, and it
// buffers a commit index that it learned without a new entry. The store
// holds exactly the keys up to the reported revision. With auth on, etcd
// answers neither the status nor the member list without a user: without
// ETCD_ROOT_PASSWORD the step fails at once, terminally. Stopped by
// SIGTERM, as the kubelet stops the sidecar, etcd leaves a data directory
// that a plain etcd starts on as the same cluster of one.
func TestAgentsRecover(t *testing.T) {
	tests := []struct {
		name   string
		auth   bool
		killed bool
	}{
		{name: "members stopped"},
		{name: "members stopped, auth on", auth: true},
		{name: "members killed", killed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cluster := etcdserver.Start(t, etcdserver.Options{Members: 3, TLS: true})
			rootTLS, err := cluster.PKI.ClientTLSAs("root")
			g.Expect(err).NotTo(HaveOccurred())
			cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.ClientURLs(), TLS: rootTLS, DialTimeout: 10 * time.Second})
			g.Expect(err).NotTo(HaveOccurred())
			defer cli.Close()
			const password = "root-password"
			const keys = 40
			// Key i is written at revision i+2: the store starts at 1.
			var lastRev int64
			put := func(from, to int) {
				for i := from; i < to; i++ {
					resp, err := cli.Put(ctx, fmt.Sprintf("key-%03d", i), fmt.Sprintf("value-%03d", i))
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(resp.Header.Revision).To(Equal(int64(i + 2)))
					lastRev = resp.Header.Revision
				}
			}
			put(0, keys/2)
			if tt.auth {
				admin, err := etcd.New(ctx, etcd.Config{Endpoints: cluster.ClientURLs(), TLS: rootTLS})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(admin.EnableAuth(ctx, password)).To(Succeed())
				g.Expect(admin.Close()).To(Succeed())
			}
			put(keys/2, keys) // as root, by the certificate's common name
			list, err := cli.MemberList(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(list.Members).To(HaveLen(3))
			clusterID := strconv.FormatUint(list.Header.ClusterId, 16)

			// The survivor is a member that has applied every write; then
			// the quorum goes.
			survivor := cluster.Members()[1]
			var survivorID string
			for _, m := range list.Members {
				if m.Name == survivor.Name {
					survivorID = strconv.FormatUint(m.ID, 16)
				}
			}
			g.Eventually(func() (int64, error) {
				st, err := cli.Status(ctx, survivor.ClientURL)
				if err != nil {
					return 0, err
				}
				return st.Header.Revision, nil
			}).WithTimeout(30 * time.Second).Should(Equal(lastRev))
			for _, m := range cluster.Members() {
				if tt.killed {
					m.Kill()
				} else {
					t.Logf("member %s ended on SIGTERM with %q", m.Name, m.Stop())
				}
			}

			clientURL := "http://127.0.0.1:" + strconv.Itoa(loopback.TestPort(t))
			peerURL := "http://127.0.0.1:" + strconv.Itoa(loopback.TestPort(t))
			sidecar := etcdserver.StartForceNewCluster(t, cluster.Bin.Etcd, survivor.DataDir, survivor.Name, clientURL, peerURL, survivor.ClientURL)
			args := []string{"recover", "--endpoint=" + clientURL, "--member=" + survivor.Name, "--timeout=2m"}
			if tt.auth {
				noPassword := runStep(t, "recover", args...)
				g.Expect(noPassword.code).To(Equal(agentapi.ExitTerminal), noPassword.output)
				g.Expect(noPassword.result.Error).To(ContainSubstring("set ETCD_ROOT_PASSWORD"))
				g.Expect(noPassword.result.Error).To(ContainSubstring("user name is empty"))
				g.Expect(noPassword.result.Recovered).To(BeNil())
				t.Setenv(rootPasswordEnv, password)
			}
			rec := runStep(t, "recover", args...)
			g.Expect(rec.code).To(Equal(agentapi.ExitOK), rec.output)
			g.Expect(rec.result.Error).To(BeEmpty())
			kept := rec.result.Recovered
			g.Expect(kept).NotTo(BeNil())
			g.Expect(kept.MemberID).To(Equal(survivorID))
			g.Expect(kept.ClusterID).To(Equal(clusterID), "--force-new-cluster keeps the cluster's ID")
			if tt.killed {
				g.Expect(kept.Revision).To(BeNumerically("<=", lastRev))
				g.Expect(kept.Revision).To(BeNumerically(">=", lastRev-2), "at most the writes of the last commits it had not flushed")
				t.Logf("after SIGKILL the survivor kept revision %d of %d", kept.Revision, lastRev)
			} else {
				g.Expect(kept.Revision).To(Equal(lastRev))
			}
			g.Expect(kept.RaftIndex).To(BeNumerically(">", uint64(kept.Revision)))
			g.Expect(kept.RaftTerm).To(BeNumerically(">", 0))
			g.Expect(rec.output).NotTo(ContainSubstring(password))

			expectOneMemberWithKeys := func(clientURLs ...string) {
				t.Helper()
				cfg := clientv3.Config{Endpoints: []string{clientURL}, DialTimeout: 10 * time.Second}
				if tt.auth {
					cfg.Username, cfg.Password = etcd.RootUser, password
				}
				local, err := clientv3.New(cfg)
				g.Expect(err).NotTo(HaveOccurred())
				defer local.Close()
				list, err := local.MemberList(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(list.Members).To(HaveLen(1))
				g.Expect(list.Members[0].Name).To(Equal(survivor.Name))
				g.Expect(list.Members[0].ClientURLs).To(Equal(clientURLs), "it published the URLs it advertises")
				got, err := local.Get(ctx, "key-", clientv3.WithPrefix())
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got.Header.Revision).To(Equal(kept.Revision))
				g.Expect(got.Kvs).To(HaveLen(int(kept.Revision - 1)))
				for i, kv := range got.Kvs {
					g.Expect(string(kv.Key)).To(Equal(fmt.Sprintf("key-%03d", i)))
					g.Expect(string(kv.Value)).To(Equal(fmt.Sprintf("value-%03d", i)))
				}
				if tt.auth {
					_, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, Username: etcd.RootUser, Password: "wrong", DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
					g.Expect(err).To(MatchError(rpctypes.ErrAuthFailed), "auth is still on")
				}
			}
			expectOneMemberWithKeys(survivor.ClientURL)

			// The kubelet stops the sidecar once the step exited 0; the
			// member's etcd then starts on the volume without the flag.
			t.Logf("etcd --force-new-cluster ended on SIGTERM with %q", sidecar.Stop())
			etcdserver.StartOnDataDir(t, cluster.Bin.Etcd, survivor.DataDir, survivor.Name, clientURL, peerURL)
			again := runStep(t, "recover", args...)
			g.Expect(again.code).To(Equal(agentapi.ExitOK), again.output)
			g.Expect(again.result.Recovered.MemberID).To(Equal(survivorID))
			g.Expect(again.result.Recovered.Revision).To(Equal(kept.Revision))
			expectOneMemberWithKeys(clientURL)
		})
	}
}

// TestAgentsRecoverWholeCluster: tend recover pointed at a member of a
// healthy 3-member cluster, which no --force-new-cluster shrank, waits
// until its timeout, then fails retryably and says why.
func TestAgentsRecoverWholeCluster(t *testing.T) {
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 3})
	m := cluster.Members()[0]
	r := runStep(t, "recover", "recover", "--endpoint="+m.ClientURL, "--member="+m.Name, "--timeout=3s")
	g.Expect(r.code).To(Equal(agentapi.ExitFailed), r.output)
	g.Expect(r.result.Terminal).To(BeFalse())
	g.Expect(r.result.Recovered).To(BeNil())
	g.Expect(r.result.Error).To(ContainSubstring("member " + m.Name + " did not recover in"))
	g.Expect(r.result.Error).To(ContainSubstring("member list still has 3 members: "))
	g.Expect(r.output).To(ContainSubstring("The member has not recovered yet"))
	t.Logf("the error: %s", r.result.Error)
}

// TestAgentsJoinCheck runs tend join-check as a member pod's init
// container does, next to a real 3-member cluster in plain HTTP. A data
// directory with a WAL, and a new cluster's first start, pass without a
// peer. An empty data directory passes under a learner just added, and
// under a peer URL that no member has; under a member that has started
// (m1, still running), it fails with exit 1 and says why, as it does when
// no peer answers.
func TestAgentsJoinCheck(t *testing.T) {
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 3})
	members := cluster.Members()
	var initial []string
	for _, m := range members {
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	closed := "http://127.0.0.1:" + strconv.Itoa(loopback.TestPort(t))
	withWAL := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(withWAL, "member", "wal"), 0o700)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(withWAL, "member", "wal", "0000000000000000-0000000000000000.wal"), []byte("wal"), 0o600)).To(Succeed())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.ClientURLs(), DialTimeout: 10 * time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	learner := cluster.NewMember(t)
	// etcd refuses a new member until its members have been connected
	// for a few seconds ("unhealthy cluster").
	var added *clientv3.MemberAddResponse
	g.Eventually(func() (err error) {
		added, err = cli.MemberAddAsLearner(ctx, []string{learner.PeerURL})
		return err
	}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	learnerID := strconv.FormatUint(added.Member.ID, 16)
	list, err := cli.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var m1ID string
	for _, m := range list.Members {
		if m.Name == members[1].Name {
			m1ID = strconv.FormatUint(m.ID, 16)
		}
	}
	g.Expect(m1ID).NotTo(BeEmpty())
	stranger := "http://127.0.0.1:" + strconv.Itoa(loopback.TestPort(t))

	tests := []struct {
		name, dataDir, member, peerURL, initialCluster, state string
		timeout                                               string
		wantCode                                              int
		want                                                  *agentapi.JoinCheckResult
		wantErr                                               []string
	}{
		{
			name: "a data directory with a WAL, no peer up", dataDir: withWAL, member: "m1", peerURL: members[1].PeerURL,
			initialCluster: "m0=" + closed + ",m1=" + members[1].PeerURL, state: "existing",
			want: &agentapi.JoinCheckResult{Decision: agent.JoinHasData},
		},
		{
			name: "a new cluster's first start, no peer up", member: "m1", peerURL: members[1].PeerURL,
			initialCluster: "m0=" + closed + ",m1=" + members[1].PeerURL, state: "new",
			want: &agentapi.JoinCheckResult{Decision: agent.JoinNewCluster},
		},
		{
			name: "a started member with an empty data directory", member: members[1].Name, peerURL: members[1].PeerURL,
			initialCluster: strings.Join(initial, ","), state: "existing",
			wantCode: agentapi.ExitFailed,
			want:     &agentapi.JoinCheckResult{Decision: agent.JoinLostData, MemberID: m1ID, Peer: members[0].PeerURL},
			wantErr: []string{"member " + members[1].Name + " (" + m1ID + ") has run before and its data directory ",
				" is empty: it lost its data and must not rejoin under its old identity; the operator replaces it"},
		},
		{
			name: "a learner just added", member: learner.Name, peerURL: learner.PeerURL,
			initialCluster: strings.Join(append(initial, learner.Name+"="+learner.PeerURL), ","), state: "existing",
			want: &agentapi.JoinCheckResult{Decision: agent.JoinNotStarted, MemberID: learnerID, Peer: members[0].PeerURL},
		},
		{
			name: "a peer URL that no member has, the first peer down", member: "m9", peerURL: stranger,
			initialCluster: "m8=" + closed + "," + strings.Join(initial, ","), state: "existing",
			want: &agentapi.JoinCheckResult{Decision: agent.JoinNotMember, Peer: members[0].PeerURL},
		},
		{
			name: "no peer answers", member: "m1", peerURL: members[1].PeerURL,
			initialCluster: "m0=" + closed + ",m1=" + members[1].PeerURL, state: "existing", timeout: "2s",
			wantCode: agentapi.ExitFailed,
			wantErr:  []string{"no peer answered its member list in ", "context deadline exceeded", "m0 (" + closed + "): ", "connection refused"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			dataDir := tt.dataDir
			if dataDir == "" {
				dataDir = filepath.Join(t.TempDir(), "etcd")
			}
			args := []string{"join-check", "--data-dir=" + dataDir, "--name=" + tt.member, "--peer-url=" + tt.peerURL,
				"--initial-cluster=" + tt.initialCluster, "--state=" + tt.state}
			if tt.timeout != "" {
				args = append(args, "--timeout="+tt.timeout)
			}
			r := runStep(t, agentapi.OpJoinCheck, args...)
			g.Expect(r.code).To(Equal(tt.wantCode), r.output)
			g.Expect(r.result.Terminal).To(BeFalse())
			g.Expect(r.result.JoinCheck).To(Equal(tt.want))
			if tt.wantErr == nil {
				g.Expect(r.result.Error).To(BeEmpty())
			}
			for _, want := range tt.wantErr {
				g.Expect(r.result.Error).To(ContainSubstring(want))
			}
			if tt.wantCode == agentapi.ExitFailed && tt.want != nil {
				g.Expect(r.result.Error).To(ContainSubstring(dataDir))
			}
		})
	}
	// The cluster has not changed: the step only reads.
	after, err := cli.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.Members).To(HaveLen(4))
}

// TestAgentsJoinCheckTLS: with --peer-tls-dir, the step presents the peer
// certificate and verifies the peers against ca.crt, as the member's etcd
// does: a started member is refused; a CA that did not sign the peers'
// certificates leaves no peer answered.
func TestAgentsJoinCheckTLS(t *testing.T) {
	g := NewWithT(t)
	cluster := etcdserver.Start(t, etcdserver.Options{Members: 3, TLS: true})
	members := cluster.Members()
	var initial []string
	for _, m := range members {
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	peerTLSDir := func(caFile string) string {
		dir := t.TempDir()
		for name, from := range map[string]string{
			corev1.TLSCertKey: cluster.PKI.ServerCertFile, corev1.TLSPrivateKeyKey: cluster.PKI.ServerKeyFile, corev1.ServiceAccountRootCAKey: caFile,
		} {
			data, err := os.ReadFile(from)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(os.WriteFile(filepath.Join(dir, name), data, 0o600)).To(Succeed())
		}
		return dir
	}
	args := []string{"join-check", "--data-dir=" + t.TempDir(), "--name=" + members[2].Name, "--peer-url=" + members[2].PeerURL,
		"--initial-cluster=" + strings.Join(initial, ","), "--state=existing"}

	r := runStep(t, agentapi.OpJoinCheck, append(args, "--peer-tls-dir="+peerTLSDir(cluster.PKI.CAFile))...)
	g.Expect(r.code).To(Equal(agentapi.ExitFailed), r.output)
	g.Expect(r.result.JoinCheck.Decision).To(Equal(agent.JoinLostData))
	g.Expect(r.result.JoinCheck.Peer).To(Equal(members[0].PeerURL))
	g.Expect(r.result.Error).To(ContainSubstring("member " + members[2].Name + " ("))
	g.Expect(r.result.Error).To(ContainSubstring("has run before"))

	other, err := etcdserver.NewPKI(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	r = runStep(t, agentapi.OpJoinCheck, append(args, "--peer-tls-dir="+peerTLSDir(other.CAFile), "--timeout=2s")...)
	g.Expect(r.code).To(Equal(agentapi.ExitFailed), r.output)
	g.Expect(r.result.JoinCheck).To(BeNil())
	g.Expect(r.result.Error).To(ContainSubstring("no peer answered"))
	g.Expect(r.result.Error).To(ContainSubstring("certificate signed by unknown authority"))

	noTLS := runStep(t, agentapi.OpJoinCheck, args...)
	g.Expect(noTLS.code).To(Equal(agentapi.ExitTerminal), noTLS.output)
	g.Expect(noTLS.result.Error).To(ContainSubstring("is https, and no peer TLS directory is given"))
}

// TestAgentsExitCodes: every agent command reports its result and exits 0,
// 1 (a retry may help) or 2 (terminal), also for arguments it cannot use.
func TestAgentsExitCodes(t *testing.T) {
	dataDir := t.TempDir()
	tests := []struct {
		name     string
		op       string
		args     []string
		wantCode int
		wantErr  string
	}{
		{name: "backup without its connection files", op: "backup", args: []string{"backup", "--owner=u"}, wantCode: agentapi.ExitTerminal, wantErr: "reading the cluster's endpoints"},
		{name: "an unknown flag", op: "fetch", args: []string{"fetch", "--nope"}, wantCode: agentapi.ExitTerminal, wantErr: "flag provided but not defined"},
		{name: "a stray argument", op: "delete", args: []string{"artifact", "delete", "extra"}, wantCode: agentapi.ExitTerminal, wantErr: "unexpected arguments"},
		{name: "a timeout of zero", op: "delete", args: []string{"artifact", "delete", "--timeout=0s"}, wantCode: agentapi.ExitTerminal, wantErr: "--timeout must be positive"},
		{name: "fetch with both sources", op: "fetch", args: []string{"fetch", "--from-result=/x", "--from=s3://bucket/k"}, wantCode: agentapi.ExitTerminal, wantErr: "--from-result gives the artifact"},
		{name: "fetch from a missing result file", op: "fetch", args: []string{"fetch", "--from-result=/nonexistent.json", "--out=/tmp/x"}, wantCode: agentapi.ExitTerminal, wantErr: "no such file"},
		{name: "verify without a backup result", op: "verify", args: []string{"verify", "--connection-dir=" + connectionDirOf(t, "http://127.0.0.1:9")}, wantCode: agentapi.ExitTerminal, wantErr: "--backup-result is required"},
		{name: "prepare an empty data directory", op: "prepare", args: []string{"restore", "prepare", "--data-dir=" + dataDir, "--id=r1"}, wantCode: agentapi.ExitOK},
		{name: "install with nothing restored", op: "install", args: []string{"restore", "install", "--data-dir=" + dataDir, "--id=r1"}, wantCode: agentapi.ExitFailed, wantErr: "did etcdutl snapshot restore run?"},
		{name: "install without an id", op: "install", args: []string{"restore", "install", "--data-dir=" + dataDir}, wantCode: agentapi.ExitTerminal, wantErr: "restore id"},
		{name: "delete a file that is not there", op: "delete", args: []string{"artifact", "delete", "--uri=file://" + filepath.Join(dataDir, "gone.db"), "--owner=u"}, wantCode: agentapi.ExitOK},
		{name: "delete without an owner", op: "delete", args: []string{"artifact", "delete", "--uri=file:///x/gone.db"}, wantCode: agentapi.ExitTerminal, wantErr: "owner is empty"},
		{name: "check without a version", op: "check", args: []string{"check", "--connection-dir=" + connectionDirOf(t, "http://127.0.0.1:9")}, wantCode: agentapi.ExitTerminal, wantErr: `version "" is not vX.Y.Z`},
		{name: "check a version without its v", op: "check", args: []string{"check", "--connection-dir=" + connectionDirOf(t, "http://127.0.0.1:9"), "--version=3.6.16"}, wantCode: agentapi.ExitTerminal, wantErr: "is not vX.Y.Z"},
		{name: "check a cluster that does not answer", op: "check", args: []string{"check", "--connection-dir=" + connectionDirOf(t, "http://127.0.0.1:9"), "--version=v3.6.16", "--timeout=1s"}, wantCode: agentapi.ExitFailed, wantErr: "did not pass the check"},
		{name: "recover without a member", op: "recover", args: []string{"recover"}, wantCode: agentapi.ExitTerminal, wantErr: "the member's name is empty"},
		{name: "recover on an https endpoint", op: "recover", args: []string{"recover", "--member=m0", "--endpoint=https://127.0.0.1:2379"}, wantCode: agentapi.ExitTerminal, wantErr: "is not http://host:port"},
		{name: "join-check without a state", op: agentapi.OpJoinCheck, args: []string{"join-check", "--data-dir=" + dataDir, "--name=m0", "--peer-url=http://127.0.0.1:9", "--initial-cluster=m0=http://127.0.0.1:9"}, wantCode: agentapi.ExitTerminal, wantErr: `state "" is neither new nor existing`},
		{name: "join-check without a peer URL", op: agentapi.OpJoinCheck, args: []string{"join-check", "--data-dir=" + dataDir, "--name=m0", "--initial-cluster=m0=http://127.0.0.1:9", "--state=new"}, wantCode: agentapi.ExitTerminal, wantErr: "peer URL"},
		{name: "join-check with a bad initial cluster", op: agentapi.OpJoinCheck, args: []string{"join-check", "--data-dir=" + dataDir, "--name=m0", "--peer-url=http://127.0.0.1:9", "--initial-cluster=http://127.0.0.1:9", "--state=new"}, wantCode: agentapi.ExitTerminal, wantErr: "is not name=peerURL"},
		{name: "recover an etcd that does not answer", op: "recover", args: []string{"recover", "--member=m0", "--endpoint=http://127.0.0.1:9", "--timeout=1s"}, wantCode: agentapi.ExitFailed, wantErr: "no answer to the status request at http://127.0.0.1:9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := runStep(t, tt.op, tt.args...)
			g.Expect(r.code).To(Equal(tt.wantCode), r.output)
			g.Expect(r.result.Terminal).To(Equal(tt.wantCode == agentapi.ExitTerminal))
			if tt.wantErr == "" {
				g.Expect(r.result.Error).To(BeEmpty())
				return
			}
			g.Expect(r.result.Error).To(ContainSubstring(tt.wantErr))
		})
	}
}

func connectionDirOf(t *testing.T, endpoints string) string {
	dir := t.TempDir()
	NewWithT(t).Expect(os.WriteFile(filepath.Join(dir, podspec.ConnectionEndpoints), []byte(endpoints), 0o600)).To(Succeed())
	return dir
}

// TestAgentsWithoutAResult: commands that are not steps write no result.
func TestAgentsWithoutAResult(t *testing.T) {
	tests := []struct {
		args     []string
		wantCode int
		wantOut  string
	}{
		{args: []string{"backup", "-h"}, wantCode: 0, wantOut: "-compression"},
		{args: []string{"restore"}, wantCode: agentapi.ExitTerminal, wantOut: "a subcommand is required: install or prepare"},
		{args: []string{"restore", "undo"}, wantCode: agentapi.ExitTerminal, wantOut: "unknown subcommand"},
		{args: []string{"artifact", "-h"}, wantCode: agentapi.ExitTerminal, wantOut: "a subcommand is required: delete"},
		{args: []string{"help"}, wantCode: 0, wantOut: "restore install"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			g := NewWithT(t)
			var out bytes.Buffer
			g.Expect(run(tt.args, &out)).To(Equal(tt.wantCode))
			g.Expect(out.String()).To(ContainSubstring(tt.wantOut))
		})
	}
}

// TestAgentsUnwritableResult: a step that did its work but cannot say so
// fails, so that its pod is retried rather than taken for silent.
func TestAgentsUnwritableResult(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	code := run([]string{"restore", "prepare", "--data-dir=" + t.TempDir(), "--id=r1", "--termination-message-path=/nonexistent/dir/log"}, &out)
	g.Expect(code).To(Equal(agentapi.ExitFailed), out.String())
	g.Expect(out.String()).To(ContainSubstring("Cannot write the result"))
}

// TestAgentFilesArePodspecs: the agents read the files under the names
// the Jobs mount them with.
func TestAgentFilesArePodspecs(t *testing.T) {
	g := NewWithT(t)
	g.Expect(agent.ConnectionEndpointsFile).To(Equal(podspec.ConnectionEndpoints))
	g.Expect(agent.ConnectionCAFile).To(Equal(podspec.ConnectionCA))
	g.Expect(agent.ClientCertFile).To(Equal(corev1.TLSCertKey))
	g.Expect(agent.ClientKeyFile).To(Equal(corev1.TLSPrivateKeyKey))
	g.Expect(agent.ClientCAFile).To(Equal(corev1.ServiceAccountRootCAKey))
}
