package manager

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/tend-dev/tend/internal/statemetrics"
	"github.com/tend-dev/tend/internal/webhook"
)

// Options are the manager's settings, one field per command-line flag.
type Options struct {
	// MetricsAddr is where /metrics is served; "0" turns it off.
	MetricsAddr string
	// MetricsSecure serves metrics over HTTPS, with the caller authenticated
	// and authorized by the apiserver (TokenReview and SubjectAccessReview).
	MetricsSecure bool
	// ProbeAddr is where /healthz and /readyz are served.
	ProbeAddr string
	// PprofAddr is where Go's /debug/pprof handlers are served, plain HTTP
	// and unauthenticated, for profiling; "" or "0" (the default) turns
	// them off.
	PprofAddr string

	LeaderElect             bool
	LeaderElectionID        string
	LeaderElectionNamespace string
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration

	// Controllers picks which controllers run, as kube-controller-manager's
	// flag of the same name does: "*" is every controller, "name" enables
	// one, "-name" disables one.
	Controllers []string

	// WatchNamespaces limits the controllers to these namespaces' objects:
	// the cache lists and watches only there. Empty means every namespace.
	// Cluster-scoped objects and the webhook's certificate Secret are read
	// whatever it says.
	WatchNamespaces []string

	// QPS and Burst limit the controllers' requests to the apiserver: one
	// token bucket for all of them, whatever the resource, as a
	// kube-controller-manager controller has. The cache's lists and watches
	// and the leader election have their own. A negative QPS turns the
	// client-side limiter off and leaves fairness to the apiserver's API
	// Priority and Fairness.
	QPS   float64
	Burst int

	// SoftMemoryLimitPercent sets the Go runtime's soft memory limit to
	// this share of the container's memory limit (MEMORY_LIMIT, in bytes),
	// unless GOMEMLIMIT is set; 0 sets none (memlimit.go).
	SoftMemoryLimitPercent int

	// Webhook is the webhook server's: its port, and who provides its
	// serving certificate.
	Webhook webhook.Options

	Zap zap.Options
}

// DefaultOptions returns the settings that apply when no flag is given.
func DefaultOptions() Options {
	return Options{
		MetricsAddr:      ":8443",
		MetricsSecure:    true,
		ProbeAddr:        ":8081",
		PprofAddr:        "0",
		LeaderElectionID: "tend.tend.dev",
		LeaseDuration:    15 * time.Second,
		RenewDeadline:    10 * time.Second,
		RetryPeriod:      2 * time.Second,
		Controllers:      []string{"*"},
		QPS:              -1,
		Webhook:          webhook.DefaultOptions(),

		SoftMemoryLimitPercent: 90,
	}
}

// BindFlags registers one flag per option on fs, with o's values as defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr,
		`Address the metrics endpoint binds to, for example ":8443"; "0" turns metrics off.`)
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure,
		"Serve metrics over HTTPS and require an authenticated, authorized caller.")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr,
		"Address the /healthz and /readyz endpoints bind to.")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", o.PprofAddr,
		`Address Go's /debug/pprof profiles are served on, over plain HTTP without authentication, for example "127.0.0.1:6060"; "0" turns them off.`)
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect,
		"Elect a leader through a Lease so that only one replica reconciles at a time.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID,
		"Name of the leader-election Lease.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace,
		"Namespace of the leader-election Lease; in a pod it defaults to the pod's namespace.")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", o.LeaseDuration,
		"How long a follower waits before it may take over a Lease that is not renewed.")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", o.RenewDeadline,
		"How long the leader keeps trying to renew its Lease before it stops leading.")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", o.RetryPeriod,
		"How often leader-election clients retry.")
	fs.Func("controllers",
		`Comma-separated controllers to run: "*" runs all, "name" enables one, "-name" disables one (default "*").`,
		func(v string) error {
			o.Controllers = splitList(v)
			return nil
		})
	fs.Func("watch-namespaces",
		"Comma-separated namespaces whose objects the controllers reconcile; empty (the default) means all. The RBAC may then be narrowed to them.",
		func(v string) error {
			o.WatchNamespaces = splitList(v)
			return nil
		})
	fs.Float64Var(&o.QPS, "kube-api-qps", o.QPS,
		"Requests per second from all the controllers together to the apiserver (one shared token bucket; the cache's watches and leader election have their own); negative leaves rate limiting to API Priority and Fairness.")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst,
		"Burst of the controllers' shared token bucket, with a positive --kube-api-qps.")
	fs.IntVar(&o.SoftMemoryLimitPercent, "soft-memory-limit-percent", o.SoftMemoryLimitPercent,
		"The Go runtime's soft memory limit as a percentage of the container's memory limit, read in bytes from "+MemoryLimitEnv+
			" (the Downward API's limits.memory); GOMEMLIMIT, when set, wins; 0 sets none.")
	o.Webhook.BindFlags(fs)
	o.Zap.BindFlags(fs)
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// SelectControllers returns the controllers of all that the --controllers
// list enables, in the order of all. An unknown name is an error, so a typo
// never silently runs nothing.
func SelectControllers(all []Controller, list []string) ([]Controller, error) {
	known := make(map[string]bool, len(all))
	for _, c := range all {
		known[c.Name] = true
	}
	star := false
	enabled := map[string]bool{}
	disabled := map[string]bool{}
	for _, item := range list {
		name, off := strings.CutPrefix(item, "-")
		switch {
		case item == "*":
			star = true
			continue
		case !known[name]:
			return nil, fmt.Errorf("unknown controller %q in --controllers; known controllers: %s",
				name, strings.Join(names(all), ", "))
		case off:
			disabled[name] = true
		default:
			enabled[name] = true
		}
	}
	var out []Controller
	for _, c := range all {
		if disabled[c.Name] {
			continue
		}
		if star || enabled[c.Name] {
			out = append(out, c)
		}
	}
	return out, nil
}

func names(all []Controller) []string {
	out := make([]string, 0, len(all))
	for _, c := range all {
		out = append(out, c.Name)
	}
	slices.Sort(out)
	return out
}

// Controller is one reconciler that the manager can run.
type Controller struct {
	// Name is what --controllers calls it, for example "podset".
	Name string
	// Setup registers the controller, and anything it serves, with mgr.
	Setup func(mgr ctrl.Manager) error
	// Cache narrows what the manager's cache holds of some kinds, for
	// example only the pods that carry a controller's label. Two selected
	// controllers may narrow the same kind only the same way. A Get of an
	// object that the cache does not hold answers NotFound: read such
	// objects live (ReadThrough, or the manager's APIReader).
	Cache map[client.Object]cache.ByObject
	// Metadata lists kinds whose metadata-only view (builder.OnlyMetadata,
	// metav1.PartialObjectMetadata) holds every object of the kind, even
	// where Cache narrows their full objects: how a controller hears of
	// changes to objects that users name, such as their Secrets, without
	// holding their data.
	Metadata []client.Object
	// Apart, when set, is a cache of the controller's own for kinds that
	// it narrows another way than the manager's cache does (a kind that
	// another controller narrows already): New builds it, over the same
	// namespaces, before Setup runs, and starts it with the manager's.
	Apart *Apart
	// Metrics, when set, exports the state of the controller's objects
	// (internal/statemetrics), read from the cache at each scrape.
	Metrics *statemetrics.Source
}
