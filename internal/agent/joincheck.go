package agent

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/etcd"
)

// The decisions of a join check, as JoinCheck.Decision names them.
const (
	// JoinHasData: the data directory holds etcd data; etcd starts on it.
	JoinHasData = "HasData"
	// JoinNewCluster: --state=new, the first start of a new cluster; etcd
	// itself refuses a member that has been bootstrapped then.
	JoinNewCluster = "NewCluster"
	// JoinNotStarted: the member list holds the peer URL under a member
	// that has never started (no name, no client URLs): a learner just
	// added, which joins with an empty data directory.
	JoinNotStarted = "NotStarted"
	// JoinNotMember: no member has the peer URL; etcd will refuse to join
	// by itself, under no identity.
	JoinNotMember = "NotMember"
	// JoinLostData: a member that has run before has the peer URL, and the
	// data directory is empty. The step fails with ErrLostData.
	JoinLostData = "LostData"
)

// ErrLostData: the member has run before and its data directory is empty.
// Started, etcd would rejoin under the member's old ID with an empty raft
// log, and vote. It is not terminal: the pod waits, retried by the kubelet,
// until the operator has replaced the member (removed its ID and added a
// learner with its peer URL), which a later attempt finds.
var ErrLostData = errors.New("it lost its data and must not rejoin under its old identity; the operator replaces it")

// JoinCheckOptions are what a join check needs: the member's own etcd
// flags, as its StatefulSet template gives them.
type JoinCheckOptions struct {
	// DataDir is etcd's --data-dir.
	DataDir string
	// Name is etcd's --name.
	Name string
	// PeerURL is the member's --initial-advertise-peer-urls: the URL under
	// which the member list knows it.
	PeerURL string
	// InitialCluster is etcd's --initial-cluster, name=peerURL,...: the
	// peers to ask, this member's entries left out.
	InitialCluster string
	// State is etcd's --initial-cluster-state, "new" or "existing".
	State string
	// PeerTLSDir holds the peer certificate Secret (tls.crt, tls.key,
	// ca.crt): the client certificate for the peers, and the CA to verify
	// them. Empty: the peers speak plain HTTP. It is read only when the
	// peers are asked.
	PeerTLSDir string
	// RequestTimeout bounds one request to one peer; zero:
	// joinCheckRequestTimeout.
	RequestTimeout time.Duration
	// Interval is the pause after a round in which no peer answered; zero:
	// joinCheckInterval.
	Interval time.Duration
	// PublishWait bounds a new cluster's wait until the DNS has every
	// member's name (see waitPublished); zero: publishWait; negative: no
	// wait.
	PublishWait time.Duration
	// DNSServers are the DNS servers (host:port) asked for the members'
	// names; empty: /etc/resolv.conf's, with its search domains.
	DNSServers []string
	// Clock tells the time; nil is the real clock.
	Clock clock.Clock
	// Log receives progress; the zero Logger discards it.
	Log logr.Logger
}

const (
	// joinCheckRequestTimeout bounds one request to one peer: a peer that
	// serves answers its member list at once, from memory.
	joinCheckRequestTimeout = 2 * time.Second
	// joinCheckInterval is the pause between two rounds over the peers.
	joinCheckInterval = 500 * time.Millisecond
	// maxMembersBody bounds the member list read from a peer.
	maxMembersBody = 1 << 20
	// The states of --initial-cluster-state.
	stateNew      = "new"
	stateExisting = "existing"
)

// JoinCheck decides whether a member's etcd may start, before it does (an
// init container of every member pod). etcd started with
// --initial-cluster-state=existing on an empty data directory fetches the
// member list from a peer, finds itself there by its peer URL and rejoins
// raft under that ID with an empty log; a member with an empty log votes
// for any candidate, which can elect a member that lacks committed writes.
// etcd refuses a bootstrapped member only with state new. So the check
// passes (ExitOK) when:
//  1. the data directory holds etcd data: member/wal is not empty, or
//     member/snap/db exists;
//  2. the state is new; it first waits, at most PublishWait, until the
//     cluster DNS has every member's name (waitPublished), so that etcd's
//     first lookups do not fetch a negative answer that the DNS caches;
//  3. a peer (each entry of the initial cluster but this member's, in
//     turn, each request bounded by RequestTimeout) returns its member
//     list, and no member has the peer URL, or the one that has it has
//     never started (no name and no client URLs): a learner just added.
//
// It fails with ErrLostData (ExitFailed) when the member with the peer URL
// has started before (a name or client URLs), and with a retryable error
// when no peer answered by the context's deadline: etcd could not have
// joined then either. Bad options, and peer certificates that cannot be
// loaded, are terminal. The Result's JoinCheck says what was decided, also
// on ErrLostData.
func JoinCheck(ctx context.Context, o JoinCheckOptions) (agentapi.Result, error) {
	r := agentapi.Result{Op: agentapi.OpJoinCheck}
	peers, err := checkJoinCheckOptions(o)
	if err != nil {
		return r, err
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.PublishWait == 0 {
		o.PublishWait = publishWait
	}
	data, err := hasMemberData(o.DataDir)
	switch {
	case err != nil:
		return r, err
	case data:
		r.JoinCheck = &agentapi.JoinCheckResult{Decision: JoinHasData}
		o.Log.Info("The data directory holds etcd data", "dataDir", o.DataDir)
		return r, nil
	case o.State == stateNew:
		o.Log.Info("A new cluster's first start", "dataDir", o.DataDir)
		r.JoinCheck = &agentapi.JoinCheckResult{Decision: JoinNewCluster, Unpublished: waitPublished(ctx, o)}
		return r, nil
	}
	if _, ok := ctx.Deadline(); !ok {
		return r, fmt.Errorf("%w: the join check has no deadline", ErrInvalid)
	}
	if o.Interval <= 0 {
		o.Interval = joinCheckInterval
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = joinCheckRequestTimeout
	}
	if len(peers) == 0 {
		return r, fmt.Errorf("%w: the initial cluster names no member but %s to ask for the member list", ErrInvalid, o.Name)
	}
	client, err := peerClient(o.PeerTLSDir)
	if err != nil {
		return r, err
	}
	defer client.CloseIdleConnections()
	o.Log.Info("The data directory is empty: asking the peers for the member list", "dataDir", o.DataDir, "peers", len(peers))

	failures := make([]string, len(peers))
	for round := 1; ; round++ {
		for i, p := range peers {
			members, err := fetchMembers(ctx, client, p.url, o.RequestTimeout)
			if err != nil {
				failures[i] = fmt.Sprintf("%s (%s): %v", p.name, p.url, err)
				o.Log.Info("The peer did not answer", "peer", p.name, "url", p.url, "reason", err.Error())
				continue
			}
			jc, member := joinDecision(members, o.PeerURL)
			jc.Peer = p.url
			r.JoinCheck = &jc
			if jc.Decision == JoinLostData {
				return r, fmt.Errorf("member %s (%s) has run before and its data directory %s is empty: %w", cmp.Or(member.Name, o.Name), jc.MemberID, o.DataDir, ErrLostData)
			}
			o.Log.Info("The member may join with an empty data directory", "decision", jc.Decision, "memberID", jc.MemberID, "peer", p.url)
			return r, nil
		}
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("no peer answered its member list in %d rounds (%w): %s", round, ctx.Err(), strings.Join(failures, "; "))
		case <-o.Clock.After(o.Interval):
		}
	}
}

// peer is an entry of the initial cluster.
type peer struct{ name, url string }

// checkJoinCheckOptions refuses options that cannot work, and returns the
// peers to ask: the initial cluster without this member's entries. Its
// errors wrap ErrInvalid.
func checkJoinCheckOptions(o JoinCheckOptions) ([]peer, error) {
	switch {
	case o.DataDir == "":
		return nil, fmt.Errorf("%w: the data directory is empty", ErrInvalid)
	case o.Name == "":
		return nil, fmt.Errorf("%w: the member's name is empty", ErrInvalid)
	case o.State != stateNew && o.State != stateExisting:
		return nil, fmt.Errorf("%w: state %q is neither %s nor %s", ErrInvalid, o.State, stateNew, stateExisting)
	}
	if err := checkPeerURL(o.PeerURL, o.PeerTLSDir); err != nil {
		return nil, fmt.Errorf("%w: peer URL: %w", ErrInvalid, err)
	}
	var peers []peer
	for entry := range strings.SplitSeq(o.InitialCluster, ",") {
		name, u, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%w: initial cluster entry %q is not name=peerURL", ErrInvalid, entry)
		}
		if err := checkPeerURL(u, o.PeerTLSDir); err != nil {
			return nil, fmt.Errorf("%w: initial cluster entry %s: %w", ErrInvalid, name, err)
		}
		if name != o.Name && !sameURL(u, o.PeerURL) {
			peers = append(peers, peer{name: name, url: strings.TrimSuffix(u, "/")})
		}
	}
	return peers, nil
}

// checkPeerURL refuses a peer URL that is not http(s)://host:port, and an
// https one without the certificates to reach it.
func checkPeerURL(s, tlsDir string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("%q is not http(s)://host:port", s)
	}
	if u.Scheme == "https" && tlsDir == "" {
		return fmt.Errorf("%q is https, and no peer TLS directory is given", s)
	}
	return nil
}

// sameURL tells whether two peer URLs name the same endpoint, as etcd
// compares them without resolving names: scheme and host, in any case, a
// trailing slash aside.
func sameURL(a, b string) bool {
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Host, ub.Host) &&
		strings.TrimSuffix(ua.Path, "/") == strings.TrimSuffix(ub.Path, "/")
}

// hasMemberData tells whether dataDir holds etcd data: a write-ahead log
// (member/wal with any entry in it), which is how etcd decides that it
// has data. A backend (member/snap/db) without a log does not count: etcd
// would rejoin under its old ID with an empty raft log, and vote. A data
// directory that does not exist holds none.
func hasMemberData(dataDir string) (bool, error) {
	wal, err := os.ReadDir(filepath.Join(dataDir, memberDir, "wal"))
	switch {
	case err == nil:
		return len(wal) > 0, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("reading the data directory: %w", err)
}

// peerMember is an entry of the member list that etcd's peer API serves at
// GET /members: membership.Member, JSON-encoded, on v3.5 and v3.6 alike.
// The ID is a decimal number, which may exceed 2^53.
type peerMember struct {
	ID         uint64   `json:"id"`
	PeerURLs   []string `json:"peerURLs"`
	IsLearner  bool     `json:"isLearner,omitempty"`
	Name       string   `json:"name,omitempty"`
	ClientURLs []string `json:"clientURLs,omitempty"`
}

// started tells whether the member has run: it published its name and
// client URLs once it started, and a member added has neither.
func (m peerMember) started() bool { return m.Name != "" || len(m.ClientURLs) > 0 }

// joinDecision decides, from a peer's member list, whether the member
// with peerURL may join with an empty data directory, and returns the
// member that has peerURL, if any.
func joinDecision(members []peerMember, peerURL string) (agentapi.JoinCheckResult, peerMember) {
	for _, m := range members {
		for _, u := range m.PeerURLs {
			if !sameURL(u, peerURL) {
				continue
			}
			jc := agentapi.JoinCheckResult{Decision: JoinNotStarted, MemberID: etcd.MemberID(m.ID).String()}
			if m.started() {
				jc.Decision = JoinLostData
			}
			return jc, m
		}
	}
	return agentapi.JoinCheckResult{Decision: JoinNotMember}, peerMember{}
}

// decodeMembers reads a peer's answer to GET /members.
func decodeMembers(body []byte) ([]peerMember, error) {
	var members []peerMember
	if err := json.Unmarshal(body, &members); err != nil {
		return nil, fmt.Errorf("the member list is not etcd's: %w", err)
	}
	if len(members) == 0 {
		// etcd itself passes over such a peer.
		return nil, errors.New("the member list is empty")
	}
	return members, nil
}

// fetchMembers asks the peer at peerURL for its member list, as etcd's
// own join does (GetClusterFromRemotePeers), within timeout.
func fetchMembers(ctx context.Context, client *http.Client, peerURL string, timeout time.Duration) ([]peerMember, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, peerURL+"/members", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMembersBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /members: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return decodeMembers(body)
}

// peerClient is the HTTP client of the peer API: with tlsDir, it presents
// the peer certificate (tls.crt, tls.key) and trusts ca.crt alone. It uses
// no proxy: the peers are reached as etcd reaches them. Its errors wrap
// ErrInvalid.
func peerClient(tlsDir string) (*http.Client, error) {
	transport := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	if tlsDir != "" {
		caFile := filepath.Join(tlsDir, ClientCAFile)
		ca, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("%w: reading the peers' CA: %w", ErrInvalid, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrInvalid, caFile)
		}
		cert, err := tls.LoadX509KeyPair(filepath.Join(tlsDir, ClientCertFile), filepath.Join(tlsDir, ClientKeyFile))
		if err != nil {
			return nil, fmt.Errorf("%w: loading the peer certificate from %s: %w", ErrInvalid, tlsDir, err)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: transport}, nil
}
