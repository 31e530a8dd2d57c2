package etcd

import (
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// flagMemberChangeInterval is the manager's flag that makes it the anchor
// design: at least this long between two membership changes of a cluster.
const flagMemberChangeInterval = "--etcdcluster-member-change-interval"

// etcd's defaults (--election-timeout, --heartbeat-interval), which the
// members keep unless spec.options sets them: the floor of every figure,
// since no membership change completes faster than a leader can be elected
// when one is lost.
const (
	defaultElectionTimeout = 1000 * time.Millisecond
	defaultHeartbeat       = 100 * time.Millisecond
)

// withInterval returns args without any --etcdcluster-member-change-interval,
// then with it set to interval unless interval is empty. args is not changed.
func withInterval(args []string, interval string) []string {
	out := make([]string, 0, len(args)+1)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == flagMemberChangeInterval {
			i++ // its value is the next argument
			continue
		}
		if strings.HasPrefix(a, flagMemberChangeInterval+"=") {
			continue
		}
		out = append(out, a)
	}
	if interval != "" {
		out = append(out, flagMemberChangeInterval+"="+interval)
	}
	return out
}

// leaderElect says whether args turn on the manager's leader election.
func leaderElect(args []string) bool {
	on := false
	for _, a := range args {
		switch {
		case a == "--leader-elect" || a == "-leader-elect":
			on = true
		case strings.HasPrefix(a, "--leader-elect=") || strings.HasPrefix(a, "-leader-elect="):
			v, err := strconv.ParseBool(a[strings.Index(a, "=")+1:])
			on = err == nil && v
		}
	}
	return on
}

// electionTimeout is the election timeout that the members of sts run with:
// ETCD_ELECTION_TIMEOUT (milliseconds) in a container's environment, which
// is how the builders pass spec.options, or etcd's default.
func electionTimeout(sts *appsv1.StatefulSet) time.Duration {
	for _, c := range sts.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name != "ETCD_ELECTION_TIMEOUT" {
				continue
			}
			if ms, err := strconv.Atoi(e.Value); err == nil && ms > 0 {
				return time.Duration(ms) * time.Millisecond
			}
		}
		if i := slices.IndexFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--election-timeout=") }); i >= 0 {
			if ms, err := strconv.Atoi(strings.TrimPrefix(c.Args[i], "--election-timeout=")); err == nil && ms > 0 {
				return time.Duration(ms) * time.Millisecond
			}
		}
	}
	return defaultElectionTimeout
}
