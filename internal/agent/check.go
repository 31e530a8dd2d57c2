package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"k8s.io/utils/clock"

	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/etcd"
)

// ErrDiverged: the members' key-value stores differ at one revision, with
// the same compaction: their histories diverged, and no retry mends that
// (Terminal). Check's error also wraps etcd's ErrCorrupt, the error of
// etcd's own corruption check, which finds the same thing.
var ErrDiverged = errors.New("the members' key-value stores diverged")

// CheckOptions are what a check of a rolled cluster needs.
type CheckOptions struct {
	// Etcd reaches the cluster (LoadConnection).
	Etcd etcd.Config
	// RootPassword, when set, logs in as root, for a cluster with auth on
	// that Etcd reaches without a client certificate (http:// endpoints).
	// A client certificate, whose common name is root, suffices otherwise,
	// and the password is not used.
	RootPassword string
	// Version is the etcd version that every member must run, such as
	// "v3.6.16"; the cluster version must then be "3.6.0".
	Version string
	// Interval is the pause between two attempts; zero: checkInterval.
	Interval time.Duration
	// Clock tells the time; nil is the real clock.
	Clock clock.Clock
	// Log receives progress; the zero Logger discards it.
	Log logr.Logger
}

// checkInterval is the pause between two attempts of a check.
const checkInterval = 2 * time.Second

// Check confirms that a cluster whose members were all rolled to a new
// version is whole, and tries again, every Interval until the context's
// deadline, while it is not:
//  1. every member in the member list is a started voting member that
//     answered its status and is healthy (etcd.Client.Status);
//  2. every member runs Version;
//  3. every member reports, at GET /version, Version's minor as the
//     cluster version (X.Y.0 for vX.Y.Z);
//  4. every member's HashKV at the lowest of their revisions is the same,
//     with the same compact revision.
//
// A check that does not pass by the deadline fails with a retryable error,
// which says what the last attempt found. A divergence (4: equal compact
// revisions, different hashes) ends the check at once with ErrDiverged, a
// terminal error, as do a bad Version and an error of etcd that retrying
// cannot change (credentials, certificates). The Result's Check holds what
// the last attempt saw, also when it failed.
func Check(ctx context.Context, o CheckOptions) (agentapi.Result, error) {
	r := agentapi.Result{Op: agentapi.OpCheck}
	want, err := parseCheckVersion(o.Version)
	if err != nil {
		return r, err
	}
	if _, ok := ctx.Deadline(); !ok {
		return r, fmt.Errorf("%w: the check has no deadline", ErrInvalid)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Interval <= 0 {
		o.Interval = checkInterval
	}
	cfg := o.Etcd
	if o.RootPassword != "" && (cfg.TLS == nil || len(cfg.TLS.Certificates) == 0) {
		cfg.Username, cfg.Password = etcd.RootUser, o.RootPassword
	}
	c := &checker{cfg: cfg, want: want, http: versionClient(cfg)}
	defer c.http.CloseIdleConnections()
	defer c.close()

	// last is what the last attempt found, unless the deadline cut that
	// attempt short: then the one before says more.
	var last error
	for attempt := 1; ; attempt++ {
		check, err := c.attempt(ctx)
		switch {
		case err == nil:
			r.Check = check
			o.Log.Info("The cluster passed the check", "clusterVersion", check.ClusterVersion, "revision", check.Revision, "members", len(check.Members))
			return r, nil
		case Terminal(err):
			r.Check = check
			return r, err
		case last == nil || ctx.Err() == nil:
			r.Check, last = check, err
		}
		o.Log.Info("The cluster did not pass the check yet", "attempt", attempt, "reason", err.Error())
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("the cluster did not pass the check in %d attempts (%w); the last: %w", attempt, ctx.Err(), last)
		case <-o.Clock.After(o.Interval):
		}
	}
}

// checkVersion is what a check expects of the members.
type checkVersion struct {
	// Server is every member's version, such as "3.6.16".
	Server string
	// Cluster is the cluster version, such as "3.6.0".
	Cluster string
}

// checkVersionRE is vX.Y.Z, with an optional pre-release.
var checkVersionRE = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// parseCheckVersion reads vX.Y.Z. Its errors wrap ErrInvalid.
func parseCheckVersion(v string) (checkVersion, error) {
	m := checkVersionRE.FindStringSubmatch(v)
	if m == nil {
		return checkVersion{}, fmt.Errorf("%w: version %q is not vX.Y.Z, such as v3.6.16", ErrInvalid, v)
	}
	return checkVersion{Server: strings.TrimPrefix(v, "v"), Cluster: m[1] + "." + m[2] + ".0"}, nil
}

// checker runs the attempts of one check, on one client.
type checker struct {
	cfg  etcd.Config
	want checkVersion
	http *http.Client
	cli  *etcd.Client
}

func (c *checker) close() {
	if c.cli != nil {
		_ = c.cli.Close()
	}
}

// attempt checks the cluster once. Its CheckResult is nil when it did not
// get the member list.
func (c *checker) attempt(ctx context.Context) (*agentapi.CheckResult, error) {
	if c.cli == nil {
		cli, err := withTimeout(ctx, func(ctx context.Context) (*etcd.Client, error) { return etcd.New(ctx, c.cfg) })
		if err != nil {
			return nil, err
		}
		c.cli = cli
	}
	statuses, err := withTimeout(ctx, c.cli.Status)
	if err != nil {
		return nil, err
	}
	check := &agentapi.CheckResult{Members: make([]agentapi.CheckedMember, len(statuses))}
	for i, s := range statuses {
		check.Members[i] = agentapi.CheckedMember{Name: s.Name, ID: s.ID.String(), Version: s.Version, Revision: s.Revision}
	}
	if problems := memberProblems(statuses, c.want.Server); len(problems) > 0 {
		return check, fmt.Errorf("members not ready: %s", strings.Join(problems, "; "))
	}

	clusterVersions := make([]string, len(statuses))
	errs := make([]error, len(statuses))
	eachMember(statuses, func(i int, s etcd.MemberStatus) {
		clusterVersions[i], errs[i] = withTimeout(ctx, func(ctx context.Context) (string, error) {
			return c.clusterVersion(ctx, s.Endpoint)
		})
	})
	if err := errors.Join(errs...); err != nil {
		return check, err
	}
	if problems := clusterVersionProblems(statuses, clusterVersions, c.want.Cluster); len(problems) > 0 {
		return check, fmt.Errorf("cluster version not %s: %s", c.want.Cluster, strings.Join(problems, "; "))
	}
	check.ClusterVersion = c.want.Cluster

	rev := slices.MinFunc(statuses, func(a, b etcd.MemberStatus) int { return cmp.Compare(a.Revision, b.Revision) }).Revision
	if rev <= 0 {
		return check, fmt.Errorf("a member reports revision %d: nothing to hash", rev)
	}
	hashes := make([]memberHash, len(statuses))
	eachMember(statuses, func(i int, s etcd.MemberStatus) {
		hashes[i].Member = s.String()
		hashes[i].KVHash, errs[i] = withTimeout(ctx, func(ctx context.Context) (etcd.KVHash, error) {
			return c.cli.HashKV(ctx, s.Endpoint, rev)
		})
	})
	if err := errors.Join(errs...); err != nil {
		return check, err
	}
	for i, h := range hashes {
		check.Members[i].Hash = h.Hash
	}
	check.Revision = rev
	return check, compareHashes(hashes)
}

// eachMember calls f for every member at once, and waits for all.
func eachMember(statuses []etcd.MemberStatus, f func(int, etcd.MemberStatus)) {
	var wg sync.WaitGroup
	for i, s := range statuses {
		wg.Go(func() { f(i, s) })
	}
	wg.Wait()
}

// memberProblems says, for each member that is not a started, healthy
// voting member running version, why.
func memberProblems(statuses []etcd.MemberStatus, version string) []string {
	var problems []string
	for _, s := range statuses {
		switch {
		case !s.Started():
			problems = append(problems, s.String()+": not started")
		case s.IsLearner:
			problems = append(problems, s.String()+": a learner")
		case !s.Answered || !s.Healthy:
			problems = append(problems, fmt.Sprintf("%s: unhealthy: %v", s.Member, s.Err))
		case s.Version != version:
			problems = append(problems, fmt.Sprintf("%s: runs %s, not %s", s.Member, s.Version, version))
		}
	}
	return problems
}

// clusterVersionProblems says which members report another cluster
// version than want; versions are theirs, in the order of statuses.
func clusterVersionProblems(statuses []etcd.MemberStatus, versions []string, want string) []string {
	var problems []string
	for i, s := range statuses {
		if versions[i] != want {
			problems = append(problems, fmt.Sprintf("%s: %q", s.Member, versions[i]))
		}
	}
	return problems
}

// maxVersionBody bounds what GET /version may answer.
const maxVersionBody = 64 << 10

// clusterVersion asks the member at endpoint for the cluster version, at
// GET /version, as {"etcdserver":"3.6.16","etcdcluster":"3.6.0"}. It is
// "not_decided" until the members have agreed on one.
func (c *checker) clusterVersion(ctx context.Context, endpoint string) (string, error) {
	versionURL := strings.TrimSuffix(endpoint, "/") + "/version"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, versionURL, nil)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrInvalid, versionURL, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", err // the URL and the cause
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxVersionBody))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", versionURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s answered %s", versionURL, resp.Status)
	}
	var v struct {
		Cluster string `json:"etcdcluster"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return "", fmt.Errorf("%s answered no version: %w", versionURL, err)
	}
	return v.Cluster, nil
}

// versionClient is an HTTP client that reaches the members as cfg does:
// with its TLS configuration and its Dial function, and no proxy.
func versionClient(cfg etcd.Config) *http.Client {
	tr := &http.Transport{}
	if cfg.TLS != nil {
		tr.TLSClientConfig = cfg.TLS.Clone()
	}
	if cfg.Dial != nil {
		tr.DialContext = func(ctx context.Context, _, addr string) (net.Conn, error) { return cfg.Dial(ctx, addr) }
	}
	return &http.Client{Transport: tr}
}

// memberHash is one member's HashKV.
type memberHash struct {
	// Member names the member, for messages.
	Member string
	etcd.KVHash
}

// compareHashes tells whether the members' stores are equal: every hash
// at the same revision, with the same compact revision, equal. Different
// revisions or compact revisions (a compaction that has not reached every
// member yet) make hashes that do not compare: a retryable error. Equal
// revisions and compact revisions with different hashes are a divergence:
// ErrDiverged, terminal.
func compareHashes(hashes []memberHash) error {
	if len(hashes) == 0 {
		return errors.New("no member's hash to compare")
	}
	first := hashes[0]
	var list []string
	for _, h := range hashes {
		list = append(list, fmt.Sprintf("%s: %d at %d, compacted at %d", h.Member, h.Hash, h.Revision, h.CompactRevision))
	}
	for _, h := range hashes[1:] {
		if h.Revision != first.Revision {
			return fmt.Errorf("the members hashed different revisions: %s", strings.Join(list, "; "))
		}
	}
	for _, h := range hashes[1:] {
		if h.CompactRevision != first.CompactRevision {
			return fmt.Errorf("the members are compacted at different revisions, a compaction in flight; the hashes do not compare: %s", strings.Join(list, "; "))
		}
	}
	for _, h := range hashes[1:] {
		if h.Hash != first.Hash {
			hashList := make([]string, len(hashes))
			for i, h := range hashes {
				hashList[i] = fmt.Sprintf("%s: %d", h.Member, h.Hash)
			}
			return &divergedError{msg: fmt.Sprintf("%s: at revision %d, compacted at %d, the hashes differ: %s",
				ErrDiverged, first.Revision, first.CompactRevision, strings.Join(hashList, "; "))}
		}
	}
	return nil
}

// divergedError is ErrDiverged with the figures, and etcd's ErrCorrupt.
type divergedError struct{ msg string }

func (e *divergedError) Error() string   { return e.msg }
func (e *divergedError) Unwrap() []error { return []error{ErrDiverged, rpctypes.ErrCorrupt} }
