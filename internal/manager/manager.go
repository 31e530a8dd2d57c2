package manager

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"runtime/debug"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/flowcontrol"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsfilters "sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/tend-dev/tend/internal/scheme"
	"github.com/tend-dev/tend/internal/statemetrics"
	"github.com/tend-dev/tend/internal/webhook"
)

// New builds a manager from opts with the given controllers registered. It
// does not start it.
func New(cfg *rest.Config, opts Options, controllers []Controller) (ctrl.Manager, error) {
	cfg = rest.CopyConfig(cfg)
	if opts.QPS != 0 {
		cfg.QPS = float32(opts.QPS)
		cfg.Burst = opts.Burst
	}
	// The controllers' requests (writes, live reads, Events) share one
	// token bucket, as a kube-controller-manager controller's clientset
	// does; controller-runtime would give each resource a bucket of its
	// own. The cache's lists and watches, and the Lease with its fence,
	// keep buckets of their own, as kube-controller-manager's shared
	// informers and leader election do, so that a busy bucket never delays
	// a renewal.
	ctrlCfg := sharedLimiter(cfg)

	metrics := metricsserver.Options{
		BindAddress:   opts.MetricsAddr,
		SecureServing: opts.MetricsSecure,
		// HTTP/2 is off: its rapid-reset weakness (CVE-2023-44487) is not
		// worth the gain for a metrics endpoint.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
	if opts.MetricsSecure {
		metrics.FilterProvider = metricsfilters.WithAuthenticationAndAuthorization
	}
	cacheOpts, newCache, err := CacheFor(controllers)
	if err != nil {
		return nil, err
	}
	cacheOpts.DefaultNamespaces = watched(opts.WatchNamespaces)
	webhooks, err := webhook.New(opts.Webhook)
	if err != nil {
		return nil, err
	}
	// With leader election on, the controllers' writes pass a fence: a
	// leader that lost its Lease writes nothing (docs/reliability.md, D1).
	var wf *writeFence
	var lock resourcelock.Interface
	if opts.LeaderElect {
		if wf, err = newWriteFence(cfg, opts); err != nil {
			return nil, err
		}
		lock = wf.lock
	}
	mgr, err := ctrl.NewManager(ctrlCfg, ctrl.Options{
		Scheme: scheme.Scheme,
		Cache:  cacheOpts,
		NewCache: func(_ *rest.Config, o cache.Options) (cache.Cache, error) {
			return newCache(cfg, o)
		},
		Metrics:                       metrics,
		HealthProbeBindAddress:        opts.ProbeAddr,
		PprofBindAddress:              opts.PprofAddr,
		LeaderElection:                opts.LeaderElect,
		LeaderElectionID:              opts.LeaderElectionID,
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &opts.LeaseDuration,
		RenewDeadline:                 &opts.RenewDeadline,
		RetryPeriod:                   &opts.RetryPeriod,
		WebhookServer:                 webhooks.Server(),
		// controller-runtime's own lock, but built by newWriteFence.
		LeaderElectionResourceLockInterface: lock,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	controllersMgr := mgr
	if wf != nil {
		if controllersMgr, err = wf.install(mgr); err != nil {
			return nil, err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding the readiness check: %w", err)
	}
	// The conversion webhook runs whatever controllers run: every read of
	// a CRD version that is not stored needs it.
	if err := webhooks.Setup(mgr); err != nil {
		return nil, fmt.Errorf("setting up the webhooks: %w", err)
	}
	var sources []statemetrics.Source
	for _, c := range controllers {
		if c.Apart != nil {
			if err := addApart(mgr, cfg, opts.WatchNamespaces, c.Name, c.Apart); err != nil {
				return nil, err
			}
		}
		if err := c.Setup(controllersMgr); err != nil {
			return nil, fmt.Errorf("setting up the %s controller: %w", c.Name, err)
		}
		if c.Metrics != nil {
			sources = append(sources, *c.Metrics)
		}
	}
	if err := statemetrics.Add(mgr, sources); err != nil {
		return nil, fmt.Errorf("adding the state metrics: %w", err)
	}
	return mgr, nil
}

// sharedLimiter returns a copy of cfg whose clients all take their tokens
// from one bucket of cfg's QPS and Burst; with no positive QPS, cfg as it
// is (no client-side limit).
func sharedLimiter(cfg *rest.Config) *rest.Config {
	if cfg.QPS <= 0 {
		return cfg
	}
	shared := rest.CopyConfig(cfg)
	shared.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	return shared
}

// Run builds the manager with the given controllers and runs it until ctx is
// done. With leader election on, the Lease is released on a clean stop, so
// that a successor takes over at once rather than after the lease duration;
// and Run returns an error, for the process to exit, once the manager has
// lost the Lease, whether its leader elector or the controllers' write
// fence finds it first.
func Run(ctx context.Context, cfg *rest.Config, opts Options, controllers []Controller) error {
	log := ctrl.LoggerFrom(ctx)
	soft, why, err := softMemoryLimit(opts.SoftMemoryLimitPercent, os.Getenv)
	if err != nil {
		return err
	}
	if soft > 0 {
		debug.SetMemoryLimit(soft)
		log.Info("Set the Go runtime's soft memory limit", "bytes", soft, "from", why)
	} else {
		log.Info("No soft memory limit set by the manager", "because", why)
	}
	mgr, err := New(cfg, opts, controllers)
	if err != nil {
		return err
	}
	log.Info("Starting the manager", "controllers", names(controllers), "leaderElection", opts.LeaderElect)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	log.Info("The manager stopped")
	return nil
}

// Every controller records Events through the manager's recorder.
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
