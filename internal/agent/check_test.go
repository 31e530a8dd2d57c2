package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/etcd"
)

// runningVersion is the etcd version that the test cluster's members run,
// as "3.6.16".
func runningVersion(t *testing.T, live *liveCluster) string {
	t.Helper()
	g := NewWithT(t)
	cli, err := etcd.New(stepCtx(t), live.Config)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = cli.Close() }()
	statuses, err := cli.Status(stepCtx(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(statuses[0].Version).NotTo(BeEmpty())
	return statuses[0].Version
}

// otherPatch is version with another patch number: the same cluster
// version, another server version.
func otherPatch(t *testing.T, version string) string {
	t.Helper()
	parts := strings.Split(version, ".")
	NewWithT(t).Expect(parts).To(HaveLen(3))
	patch, err := strconv.Atoi(parts[2])
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return fmt.Sprintf("%s.%s.%d", parts[0], parts[1], patch+1000)
}

// TestCheck checks a healthy 3-member cluster: it passes, and the Result
// names every member with its version and its hash at one revision. A
// version that the members do not run fails, retryably, once the deadline
// passes, after attempts that were each logged; so does a member that is
// down, until it is back.
func TestCheck(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	live := startLive(t, 3, "root")
	live.put(t, "key-", 50, 128)
	_, err := live.cli.Compact(stepCtx(t), 10)
	g.Expect(err).NotTo(HaveOccurred())
	version := runningVersion(t, live)
	minor := version[:strings.LastIndex(version, ".")] + ".0"
	opts := CheckOptions{Etcd: live.Config, Version: "v" + version, Interval: 200 * time.Millisecond}

	r, err := Check(stepCtx(t), opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Op).To(Equal(agentapi.OpCheck))
	c := r.Check
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.ClusterVersion).To(Equal(minor))
	g.Expect(c.Revision).To(BeNumerically(">=", 51))
	var names []string
	for _, m := range live.Members() {
		names = append(names, m.Name)
	}
	g.Expect(c.Members).To(HaveLen(3))
	for _, m := range c.Members {
		g.Expect(names).To(ContainElement(m.Name))
		g.Expect(etcd.ParseMemberID(m.ID)).NotTo(BeZero())
		g.Expect(m.Version).To(Equal(version))
		g.Expect(m.Revision).To(BeNumerically(">=", c.Revision))
		g.Expect(m.Hash).To(Equal(c.Members[0].Hash))
	}
	g.Expect(c.Members[0].Hash).NotTo(BeZero())

	t.Run("another version: retryable, each attempt logged", func(t *testing.T) {
		g := NewWithT(t)
		var logged []string
		o := opts
		o.Version = "v" + otherPatch(t, version)
		o.Log = funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})
		// Long enough for attempts to finish on a loaded machine: the test
		// counts what they say, not how many fit in a time.
		r, err := Check(shortCtx(t, 8*time.Second), o)
		g.Expect(err).To(MatchError(ContainSubstring("runs %s, not %s", version, otherPatch(t, version))))
		g.Expect(err).To(MatchError(ContainSubstring("did not pass the check")))
		g.Expect(Terminal(err)).To(BeFalse())
		g.Expect(ExitCode(err)).To(Equal(agentapi.ExitFailed))
		g.Expect(r.Check.Members).To(HaveLen(3), "what the last attempt saw")
		g.Expect(r.Check.ClusterVersion).To(BeEmpty())
		g.Expect(logged).NotTo(BeEmpty())
		g.Expect(logged[0]).To(ContainSubstring("The cluster did not pass the check yet"))
		g.Expect(logged[0]).To(ContainSubstring("runs " + version))
	})

	t.Run("a version that is not vX.Y.Z", func(t *testing.T) {
		g := NewWithT(t)
		o := opts
		o.Version = version // no v
		_, err := Check(stepCtx(t), o)
		g.Expect(err).To(MatchError(ErrInvalid))
		g.Expect(ExitCode(err)).To(Equal(agentapi.ExitTerminal))
	})

	// Last: a member goes down, and comes back.
	down := live.Members()[1]
	down.Kill()
	r, err = Check(shortCtx(t, 8*time.Second), opts)
	g.Expect(err).To(MatchError(ContainSubstring(down.Name + " (")))
	g.Expect(err).To(MatchError(ContainSubstring("unhealthy")))
	g.Expect(ExitCode(err)).To(Equal(agentapi.ExitFailed))
	g.Expect(r.Check.Members).To(HaveLen(3))
	down.Restart(t)
	r, err = Check(stepCtx(t), opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Check.Members).To(HaveLen(3))
}

// TestCheckAuth: on a cluster with auth on, the client certificate whose
// common name is root suffices, HashKV included; the root password is not
// needed.
func TestCheckAuth(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	live := startLive(t, 1, "root")
	live.put(t, "key-", 10, 64)
	admin, err := etcd.New(stepCtx(t), live.Config)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = admin.Close() })
	g.Expect(admin.EnableAuth(stepCtx(t), "s3cret-root")).To(Succeed())

	version := runningVersion(t, live)
	for _, password := range []string{"", "wrong: the certificate is used"} {
		r, err := Check(stepCtx(t), CheckOptions{Etcd: live.Config, RootPassword: password, Version: "v" + version})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Check.Members).To(HaveLen(1))
		g.Expect(r.Check.Members[0].Hash).NotTo(BeZero())
	}
}

func TestParseCheckVersion(t *testing.T) {
	tests := []struct {
		version string
		want    checkVersion
		wantErr bool
	}{
		{version: "v3.6.16", want: checkVersion{Server: "3.6.16", Cluster: "3.6.0"}},
		{version: "v3.5.0", want: checkVersion{Server: "3.5.0", Cluster: "3.5.0"}},
		{version: "v10.20.30", want: checkVersion{Server: "10.20.30", Cluster: "10.20.0"}},
		{version: "v3.7.0-rc.1", want: checkVersion{Server: "3.7.0-rc.1", Cluster: "3.7.0"}},
		{version: "", wantErr: true},
		{version: "3.6.16", wantErr: true},
		{version: "v3.6", wantErr: true},
		{version: "v3.6.x", wantErr: true},
		{version: "v03.6.1", wantErr: true},
		{version: "v3.6.16 ", wantErr: true},
		{version: "latest", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			g := NewWithT(t)
			got, err := parseCheckVersion(tt.version)
			if tt.wantErr {
				g.Expect(err).To(MatchError(ErrInvalid))
				g.Expect(err).To(MatchError(ContainSubstring("is not vX.Y.Z")))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestMemberProblems(t *testing.T) {
	ok := func(id etcd.MemberID, name string) etcd.MemberStatus {
		return etcd.MemberStatus{
			Member:   etcd.Member{ID: id, Name: name, ClientURLs: []string{"https://" + name + ":2379"}},
			Endpoint: "https://" + name + ":2379", Answered: true, Healthy: true, Version: "3.6.16", Revision: 10,
		}
	}
	tests := []struct {
		name     string
		statuses func() []etcd.MemberStatus
		want     []string
	}{
		{name: "all healthy voters of the version", statuses: func() []etcd.MemberStatus {
			return []etcd.MemberStatus{ok(1, "a"), ok(2, "b"), ok(3, "c")}
		}},
		{name: "a learner", statuses: func() []etcd.MemberStatus {
			l := ok(4, "d")
			l.IsLearner = true
			return []etcd.MemberStatus{ok(1, "a"), l}
		}, want: []string{"d (4): a learner"}},
		{name: "a member that has not started", statuses: func() []etcd.MemberStatus {
			return []etcd.MemberStatus{ok(1, "a"), {Member: etcd.Member{ID: 5, PeerURLs: []string{"https://e:2380"}, IsLearner: true}}}
		}, want: []string{"5 (not started, https://e:2380): not started"}},
		{name: "one that did not answer", statuses: func() []etcd.MemberStatus {
			b := ok(2, "b")
			b.Answered, b.Healthy, b.Err = false, false, errors.New("connection refused")
			return []etcd.MemberStatus{ok(1, "a"), b}
		}, want: []string{"b (2): unhealthy: connection refused"}},
		{name: "one without a leader", statuses: func() []etcd.MemberStatus {
			b := ok(2, "b")
			b.Healthy, b.Err = false, etcd.ErrNoLeader
			return []etcd.MemberStatus{ok(1, "a"), b}
		}, want: []string{"b (2): unhealthy: no leader"}},
		{name: "two of another version", statuses: func() []etcd.MemberStatus {
			b, c := ok(2, "b"), ok(3, "c")
			b.Version, c.Version = "3.5.35", "3.6.15"
			return []etcd.MemberStatus{ok(1, "a"), b, c}
		}, want: []string{"b (2): runs 3.5.35, not 3.6.16", "c (3): runs 3.6.15, not 3.6.16"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(memberProblems(tt.statuses(), "3.6.16")).To(Equal(tt.want))
		})
	}
}

func TestClusterVersionProblems(t *testing.T) {
	statuses := []etcd.MemberStatus{
		{Member: etcd.Member{ID: 1, Name: "a"}},
		{Member: etcd.Member{ID: 2, Name: "b"}},
	}
	g := NewWithT(t)
	g.Expect(clusterVersionProblems(statuses, []string{"3.6.0", "3.6.0"}, "3.6.0")).To(BeEmpty())
	g.Expect(clusterVersionProblems(statuses, []string{"3.5.0", "3.6.0"}, "3.6.0")).To(Equal([]string{`a (1): "3.5.0"`}))
	g.Expect(clusterVersionProblems(statuses, []string{"not_decided", ""}, "3.6.0")).To(Equal([]string{`a (1): "not_decided"`, `b (2): ""`}))
}

func TestCompareHashes(t *testing.T) {
	h := func(member string, hash uint32, rev, compact int64) memberHash {
		return memberHash{Member: member, KVHash: etcd.KVHash{Hash: hash, Revision: rev, CompactRevision: compact}}
	}
	tests := []struct {
		name         string
		hashes       []memberHash
		wantErr      string
		wantTerminal bool
	}{
		{name: "equal", hashes: []memberHash{h("a", 7, 100, 10), h("b", 7, 100, 10), h("c", 7, 100, 10)}},
		{name: "a lone member", hashes: []memberHash{h("a", 7, 100, 0)}},
		{name: "none", wantErr: "no member's hash"},
		{name: "a compaction in flight",
			hashes:  []memberHash{h("a", 7, 100, 10), h("b", 9, 100, 50), h("c", 9, 100, 50)},
			wantErr: "compacted at different revisions"},
		{name: "different revisions",
			hashes:  []memberHash{h("a", 7, 100, 10), h("b", 9, 101, 10)},
			wantErr: "hashed different revisions"},
		{name: "a divergence",
			hashes:       []memberHash{h("a", 7, 100, 10), h("b", 7, 100, 10), h("c", 8, 100, 10)},
			wantErr:      "at revision 100, compacted at 10, the hashes differ: a: 7; b: 7; c: 8",
			wantTerminal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := compareHashes(tt.hashes)
			if tt.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			g.Expect(Terminal(err)).To(Equal(tt.wantTerminal))
			g.Expect(errors.Is(err, ErrDiverged)).To(Equal(tt.wantTerminal))
			if tt.wantTerminal {
				g.Expect(ExitCode(err)).To(Equal(agentapi.ExitTerminal))
				g.Expect(err).To(MatchError(rpctypes.ErrCorrupt), "etcd's own name for it")
				g.Expect(err.Error()).To(HavePrefix(ErrDiverged.Error()))
			} else {
				g.Expect(ExitCode(err)).To(Equal(agentapi.ExitFailed))
			}
		})
	}
}

// TestCheckResultFits: the Result of a check of the largest cluster, with
// long names and an error, fits in a termination message and reads back.
func TestCheckResultFits(t *testing.T) {
	g := NewWithT(t)
	c := &agentapi.CheckResult{ClusterVersion: "3.6.0", Revision: 1 << 40}
	for i := range 9 {
		c.Members = append(c.Members, agentapi.CheckedMember{
			Name: fmt.Sprintf("%s-%d", strings.Repeat("n", 63), i), ID: "8e9e05c52164694d",
			Version: "3.6.16", Revision: 1 << 40, Hash: 1<<32 - 1,
		})
	}
	r := Failed(agentapi.Result{Op: agentapi.OpCheck, Check: c}, errors.New(strings.Repeat("a long reason; ", 500)))
	b, err := r.Encode()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(b)).To(BeNumerically("<=", agentapi.MaxMessage))
	back, err := agentapi.ParseResult(string(b), agentapi.OpCheck)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.Check).To(Equal(c))

	one, err := json.Marshal(c.Members[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(one)).To(HavePrefix(`{"name":`))
	g.Expect(string(one)).To(ContainSubstring(`"id":"8e9e05c52164694d","version":"3.6.16","revision":`))
}
