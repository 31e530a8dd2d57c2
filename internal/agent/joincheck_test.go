package agent

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/testing/etcdserver"
)

// TestHasMemberData: etcd data is a write-ahead log with something in it,
// or a backend; a directory that is missing, empty or holds only empty
// directories is not.
func TestHasMemberData(t *testing.T) {
	tests := []struct {
		name  string
		dirs  []string
		files []string
		want  bool
	}{
		{name: "no data directory"},
		{name: "an empty data directory", dirs: []string{"."}},
		{name: "an empty member directory", dirs: []string{"member"}},
		{name: "an empty wal and snap", dirs: []string{"member/wal", "member/snap"}},
		{name: "a restore's leftovers outside member", files: []string{"restore/member/wal/0.wal"}},
		{name: "a wal", files: []string{"member/wal/0000000000000000-0000000000000000.wal"}, want: true},
		{name: "only a preallocated wal segment", files: []string{"member/wal/0.tmp"}, want: true},
		{name: "a backend without a wal: etcd would start with an empty raft log", files: []string{"member/snap/db"}, want: false},
		{name: "a raft snapshot without a backend", dirs: []string{"member/wal"}, files: []string{"member/snap/0000000000000002-0000000000000010.snap"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			dataDir := filepath.Join(t.TempDir(), "etcd")
			for _, d := range tt.dirs {
				g.Expect(os.MkdirAll(filepath.Join(dataDir, d), 0o700)).To(Succeed())
			}
			for _, f := range tt.files {
				g.Expect(os.MkdirAll(filepath.Dir(filepath.Join(dataDir, f)), 0o700)).To(Succeed())
				g.Expect(os.WriteFile(filepath.Join(dataDir, f), []byte("x"), 0o600)).To(Succeed())
			}
			got, err := hasMemberData(dataDir)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// TestDecodeMembers reads the member lists that etcd v3.5.35 and v3.6.16
// served at GET /members (peer port) for a started member and a learner
// just added: IDs above 2^53 keep every bit.
func TestDecodeMembers(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    []peerMember
		wantErr string
	}{
		{
			name: "v3.5.35",
			body: `[{"id":1109283151588988621,"peerURLs":["http://127.0.0.1:23135"],"name":"a","clientURLs":["http://127.0.0.1:23035"]},{"id":10123888287495131897,"peerURLs":["http://127.0.0.1:23335"],"isLearner":true}]` + "\n",
			want: []peerMember{
				{ID: 1109283151588988621, PeerURLs: []string{"http://127.0.0.1:23135"}, Name: "a", ClientURLs: []string{"http://127.0.0.1:23035"}},
				{ID: 10123888287495131897, PeerURLs: []string{"http://127.0.0.1:23335"}, IsLearner: true},
			},
		},
		{
			name: "v3.6.16",
			body: `[{"id":10901502045207431035,"peerURLs":["http://127.0.0.1:23336"],"isLearner":true},{"id":16372724149455553407,"peerURLs":["http://127.0.0.1:23136"],"name":"a","clientURLs":["http://127.0.0.1:23036"]}]` + "\n",
			want: []peerMember{
				{ID: 10901502045207431035, PeerURLs: []string{"http://127.0.0.1:23336"}, IsLearner: true},
				{ID: 16372724149455553407, PeerURLs: []string{"http://127.0.0.1:23136"}, Name: "a", ClientURLs: []string{"http://127.0.0.1:23036"}},
			},
		},
		{name: "empty", body: "[]\n", wantErr: "the member list is empty"},
		{name: "not a list", body: "bad path\n", wantErr: "the member list is not etcd's"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := decodeMembers([]byte(tt.body))
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// TestJoinDecision: an empty data directory may join under a member that
// has never started, or under none; not under one that has run.
func TestJoinDecision(t *testing.T) {
	const self = "https://m1.peers.ns.svc.cluster.local:2380"
	voter := func(id uint64, name, peer string) peerMember {
		return peerMember{ID: id, Name: name, PeerURLs: []string{peer}, ClientURLs: []string{"https://" + name + ":2379"}}
	}
	tests := []struct {
		name    string
		members []peerMember
		want    agentapi.JoinCheckResult
	}{
		{
			name:    "a started voter",
			members: []peerMember{voter(0xa0, "m0", "https://m0.peers.ns.svc.cluster.local:2380"), voter(0xa1, "m1", self)},
			want:    agentapi.JoinCheckResult{Decision: JoinLostData, MemberID: "a1"},
		},
		{
			name:    "a learner that started",
			members: []peerMember{{ID: 0xa1, Name: "m1", PeerURLs: []string{self}, ClientURLs: []string{"https://m1:2379"}, IsLearner: true}},
			want:    agentapi.JoinCheckResult{Decision: JoinLostData, MemberID: "a1"},
		},
		{
			name:    "a name without client URLs",
			members: []peerMember{{ID: 0xa1, Name: "m1", PeerURLs: []string{self}}},
			want:    agentapi.JoinCheckResult{Decision: JoinLostData, MemberID: "a1"},
		},
		{
			name:    "client URLs without a name",
			members: []peerMember{{ID: 0xa1, PeerURLs: []string{self}, ClientURLs: []string{"https://m1:2379"}}},
			want:    agentapi.JoinCheckResult{Decision: JoinLostData, MemberID: "a1"},
		},
		{
			name:    "a learner just added",
			members: []peerMember{voter(0xa0, "m0", "https://m0.peers.ns.svc.cluster.local:2380"), {ID: 0xb1, PeerURLs: []string{self}, IsLearner: true}},
			want:    agentapi.JoinCheckResult{Decision: JoinNotStarted, MemberID: "b1"},
		},
		{
			name:    "the URL among several, in another case, with a slash",
			members: []peerMember{{ID: 0xa1, Name: "m1", PeerURLs: []string{"https://10.0.0.1:2380", "HTTPS://M1.peers.ns.svc.cluster.local:2380/"}}},
			want:    agentapi.JoinCheckResult{Decision: JoinLostData, MemberID: "a1"},
		},
		{
			name:    "not in the list",
			members: []peerMember{voter(0xa0, "m0", "https://m0.peers.ns.svc.cluster.local:2380")},
			want:    agentapi.JoinCheckResult{Decision: JoinNotMember},
		},
		{
			name:    "another port",
			members: []peerMember{voter(0xa1, "m1", "https://m1.peers.ns.svc.cluster.local:2381")},
			want:    agentapi.JoinCheckResult{Decision: JoinNotMember},
		},
		{
			name:    "http, not https",
			members: []peerMember{voter(0xa1, "m1", "http://m1.peers.ns.svc.cluster.local:2380")},
			want:    agentapi.JoinCheckResult{Decision: JoinNotMember},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, _ := joinDecision(tt.members, self)
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// TestJoinCheckRefusesOptions: options that cannot work are terminal,
// whatever the data directory holds.
func TestJoinCheckRefusesOptions(t *testing.T) {
	const peerURL = "http://127.0.0.1:2380"
	valid := func() JoinCheckOptions {
		return JoinCheckOptions{DataDir: t.TempDir(), Name: "m1", PeerURL: peerURL,
			InitialCluster: "m0=http://127.0.0.1:2381,m1=" + peerURL, State: "existing"}
	}
	tests := []struct {
		name    string
		change  func(o *JoinCheckOptions)
		ctx     context.Context
		wantErr string
	}{
		{name: "no data directory", change: func(o *JoinCheckOptions) { o.DataDir = "" }, wantErr: "the data directory is empty"},
		{name: "no name", change: func(o *JoinCheckOptions) { o.Name = "" }, wantErr: "the member's name is empty"},
		{name: "no state", change: func(o *JoinCheckOptions) { o.State = "" }, wantErr: `state "" is neither new nor existing`},
		{name: "no peer URL", change: func(o *JoinCheckOptions) { o.PeerURL = "" }, wantErr: `peer URL: "" is not http(s)://host:port`},
		{name: "a peer URL with a path", change: func(o *JoinCheckOptions) { o.PeerURL += "/members" }, wantErr: "is not http(s)://host:port"},
		{name: "https without certificates", change: func(o *JoinCheckOptions) { o.PeerURL = "https://127.0.0.1:2380" }, wantErr: "is https, and no peer TLS directory is given"},
		{name: "no initial cluster", change: func(o *JoinCheckOptions) { o.InitialCluster = "" }, wantErr: `initial cluster entry "" is not name=peerURL`},
		{name: "an entry without a name", change: func(o *JoinCheckOptions) { o.InitialCluster = "=" + peerURL }, wantErr: "is not name=peerURL"},
		{name: "an entry that is no URL", change: func(o *JoinCheckOptions) { o.InitialCluster = "m0=127.0.0.1:2381" }, wantErr: "initial cluster entry m0: "},
		{name: "no peer but itself", change: func(o *JoinCheckOptions) { o.InitialCluster = "m1=" + peerURL }, wantErr: "names no member but m1"},
		{name: "a peer TLS directory without files", change: func(o *JoinCheckOptions) { o.PeerTLSDir = t.TempDir() }, wantErr: "reading the peers' CA"},
		{name: "no deadline", ctx: context.Background(), wantErr: "no deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o := valid()
			if tt.change != nil {
				tt.change(&o)
			}
			ctx := tt.ctx
			if ctx == nil {
				ctx = shortCtx(t, 5*time.Second)
			}
			r, err := JoinCheck(ctx, o)
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			g.Expect(Terminal(err)).To(BeTrue())
			g.Expect(ExitCode(err)).To(Equal(agentapi.ExitTerminal))
			g.Expect(r.Op).To(Equal(agentapi.OpJoinCheck))
			g.Expect(r.JoinCheck).To(BeNil())
		})
	}
}

// TestJoinCheckPassesOverAHungPeer: a peer that accepts the connection and
// never answers costs one request's timeout; the next peer, a real etcd,
// decides. Its answer for a learner just added lets the member join; once
// the learner has run, the same answer refuses an empty data directory.
func TestJoinCheckPassesOverAHungPeer(t *testing.T) {
	g := NewWithT(t)
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer hung.Close()
	go func() {
		for {
			conn, err := hung.Accept()
			if err != nil {
				return
			}
			defer conn.Close() // held open, unanswered, until the test ends
		}
	}()

	c := etcdserver.Start(t, etcdserver.Options{Members: 1})
	m0 := c.Members()[0]
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.ClientURLs(), DialTimeout: 10 * time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	learner := c.NewMember(t)
	added, err := cli.MemberAddAsLearner(stepCtx(t), []string{learner.PeerURL})
	g.Expect(err).NotTo(HaveOccurred())
	wantID := strconv.FormatUint(added.Member.ID, 16)

	hungEntry := "hung=http://" + hung.Addr().String()
	members := m0.Name + "=" + m0.PeerURL + "," + learner.Name + "=" + learner.PeerURL
	var logged []string
	o := JoinCheckOptions{
		DataDir: t.TempDir(), Name: learner.Name, PeerURL: learner.PeerURL, InitialCluster: hungEntry + "," + members,
		State: "existing", RequestTimeout: 300 * time.Millisecond,
		Log: funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{}),
	}
	r, err := JoinCheck(stepCtx(t), o)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(logged).To(ContainElement(And(ContainSubstring(`"msg"="The peer did not answer" "peer"="hung"`), ContainSubstring("context deadline exceeded"))))
	g.Expect(r.JoinCheck).To(Equal(&agentapi.JoinCheckResult{Decision: JoinNotStarted, MemberID: wantID, Peer: m0.PeerURL}))

	// The learner starts on its own data directory, and publishes its name.
	learner.Join(t, members)
	g.Eventually(func() (string, error) {
		list, err := cli.MemberList(stepCtx(t))
		if err != nil {
			return "", err
		}
		for _, m := range list.Members {
			if m.ID == added.Member.ID {
				return m.Name, nil
			}
		}
		return "", nil
	}).WithTimeout(30 * time.Second).Should(Equal(learner.Name))
	r, err = JoinCheck(stepCtx(t), o)
	g.Expect(err).To(MatchError(ErrLostData))
	g.Expect(err).To(MatchError(ContainSubstring("member " + learner.Name + " (" + wantID + ") has run before and its data directory " + o.DataDir + " is empty")))
	g.Expect(ExitCode(err)).To(Equal(agentapi.ExitFailed))
	g.Expect(r.JoinCheck).To(Equal(&agentapi.JoinCheckResult{Decision: JoinLostData, MemberID: wantID, Peer: m0.PeerURL}))

	// Its own data directory holds data: no peer is asked.
	o.DataDir, o.InitialCluster = learner.DataDir, hungEntry
	r, err = JoinCheck(stepCtx(t), o)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.JoinCheck).To(Equal(&agentapi.JoinCheckResult{Decision: JoinHasData}))
}
