package queue

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
	tendaws "github.com/tend-dev/tend/internal/aws"
	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/ownwrite"
)

// +kubebuilder:rbac:groups=sqs.tend.dev,resources=queues,verbs=list;watch;patch
// +kubebuilder:rbac:groups=sqs.tend.dev,resources=queues/status,verbs=patch
// +kubebuilder:rbac:groups=sqs.tend.dev,resources=queues/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// Name is the controller's name for --controllers.
const Name = "queue"

// Index keys of the Queue cache.
const (
	indexSecret = "spec.connection.secretRef.name"
	indexDLQ    = "spec.redrive.deadLetterQueueRef.name"
	indexSource = "spec.redriveAllowPolicy.sourceQueueRefs.name"
)

// Options are the queue controller's settings.
type Options struct {
	// Connection is the manager's default AWS connection; its Limiters are
	// built from QPS and Burst.
	Region      string
	EndpointURL string
	// QPS and Burst size the token bucket of each SQS endpoint, shared by
	// every worker.
	QPS   float64
	Burst int
	// Workers is how many Queues reconcile at once.
	Workers int
	// Timeout bounds one pass, all of its SQS calls included.
	Timeout time.Duration
	// AllowedEndpoints are the endpoints that a Queue's connection Secret
	// may set (see EndpointAllowList for the rule). Empty refuses them all;
	// the manager's own endpoint is not subject to it.
	AllowedEndpoints []string
}

// DefaultOptions returns the settings used when no flag is given.
func DefaultOptions() Options {
	return Options{QPS: tendaws.DefaultQPS, Burst: tendaws.DefaultBurst, Workers: 4, Timeout: 30 * time.Second}
}

// BindFlags registers the controller's flags on fs.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Region, "sqs-region", o.Region, "AWS region of the SQS queues; empty uses AWS_REGION and the SDK's chain.")
	fs.StringVar(&o.EndpointURL, "sqs-endpoint", o.EndpointURL, "SQS endpoint URL; empty uses AWS_ENDPOINT_URL_SQS and the SDK's chain.")
	fs.Float64Var(&o.QPS, "sqs-qps", o.QPS, "SQS calls per second per endpoint, shared by all workers.")
	fs.IntVar(&o.Burst, "sqs-burst", o.Burst, "Burst of SQS calls per endpoint.")
	fs.IntVar(&o.Workers, "queue-workers", o.Workers, "Queues reconciled at once.")
	fs.DurationVar(&o.Timeout, "sqs-timeout", o.Timeout, "Time limit of one Queue reconcile, its SQS calls included.")
	fs.Func("sqs-allowed-endpoints",
		"Comma-separated SQS endpoints that a Queue's connection Secret may set in AWS_ENDPOINT_URL_SQS, each "+
			"http(s)://HOST[:PORT][/PATH]; may be repeated. An endpoint is allowed when an entry has its scheme, its host "+
			"(exact, ignoring case), its port (omitted: the scheme's default; *: any), and a path equal to its path "+
			"or a prefix of it ending at a /. Empty (the default) refuses every per-Queue endpoint; the manager's own "+
			"endpoint (--sqs-endpoint, or the SDK's chain) is not affected.",
		func(v string) error {
			entries := splitList(v)
			if _, err := ParseEndpointAllowList(entries); err != nil {
				return err
			}
			o.AllowedEndpoints = append(o.AllowedEndpoints, entries...)
			return nil
		})
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

// Controller returns the queue controller for the manager's registry. opts
// is read when the manager starts, after the flags are parsed.
//
// The cache holds the ConfigMaps that Tend made (publish labels them), and
// every Secret's metadata, so that a change to a connection Secret starts
// a pass; the Connector reads the Secret itself from the apiserver.
func Controller(opts *Options) manager.Controller {
	return manager.Controller{Name: Name, Cache: map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: manager.MadeByTend(),
	}, Metadata: []client.Object{&corev1.Secret{}}, Metrics: &Metrics, Setup: func(mgr ctrl.Manager) error {
		limiters, err := tendaws.NewLimiters(tendaws.LimiterOptions{QPS: opts.QPS, Burst: opts.Burst})
		if err != nil {
			return err
		}
		allowed, err := ParseEndpointAllowList(opts.AllowedEndpoints)
		if err != nil {
			return err
		}
		r := &Reconciler{
			Client:   manager.ReadThrough(mgr.GetClient(), mgr.GetAPIReader(), &corev1.ConfigMap{}),
			Recorder: mgr.GetEventRecorder("tend-queue"),
			Connector: &Connector{Reader: mgr.GetAPIReader(), AllowedEndpoints: allowed, Default: tendaws.Connection{
				Region: opts.Region, EndpointURL: opts.EndpointURL, Limiters: limiters,
			}},
			Timeout: opts.Timeout,
		}
		return r.SetupWithManager(mgr, opts.Workers)
	}}
}

// Reconciler keeps SQS queues in line with Queues.
type Reconciler struct {
	client.Client
	Recorder  events.EventRecorder
	Connector *Connector
	// Timeout bounds one pass. Zero means 30s.
	Timeout time.Duration
	// Clock stamps lastSyncTime. Nil means the real clock.
	Clock clock.PassiveClock
	// Jitter spreads a poll interval; nil means ±10% at random.
	Jitter func(time.Duration) time.Duration

	// writes is, per Queue, the resourceVersion of the controller's last
	// write of it, until the cache has caught up: a pass on an older copy
	// waits, since its empty status would make a queue it just created
	// look like one to adopt.
	writes ownwrite.Log
}

// jitter returns d give or take up to 10%, so that Queues created together do
// not poll SQS together.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.2-0.1)*float64(d))
}

// SetupWithManager registers the controller and the cache indexes it needs.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Jitter == nil {
		r.Jitter = jitter
	}
	if r.Timeout == 0 {
		r.Timeout = 30 * time.Second
	}
	if r.Connector.Default.Gate == nil {
		// Every SQS call that changes something first passes the fence of
		// mgr's client: a manager that lost its Lease creates, changes
		// and deletes no queue (docs/reliability.md).
		r.Connector.Default.Gate = manager.GateOf(mgr)
	}
	// Secrets, dead-letter Queues and source Queues map back to the Queues
	// that name them.
	indexes := map[string]func(*sqsv1alpha1.Queue) []string{
		indexSecret: func(q *sqsv1alpha1.Queue) []string {
			if c := q.Spec.Connection; c != nil && c.SecretRef != nil {
				return []string{c.SecretRef.Name}
			}
			return nil
		},
		indexDLQ: func(q *sqsv1alpha1.Queue) []string {
			if rd := q.Spec.Redrive; rd != nil && rd.DeadLetterQueueRef != nil {
				return []string{rd.DeadLetterQueueRef.Name}
			}
			return nil
		},
		indexSource: func(q *sqsv1alpha1.Queue) []string {
			var names []string
			if p := q.Spec.RedriveAllowPolicy; p != nil {
				for _, ref := range p.SourceQueueRefs {
					names = append(names, ref.Name)
				}
			}
			return names
		},
	}
	for key, names := range indexes {
		err := mgr.GetFieldIndexer().IndexField(context.Background(), &sqsv1alpha1.Queue{}, key, func(o client.Object) []string {
			return names(o.(*sqsv1alpha1.Queue))
		})
		if err != nil {
			return fmt.Errorf("indexing Queues by %s: %w", key, err)
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		// Only spec and annotation changes start a pass: a pass's own status
		// write must not cost another round of SQS calls.
		For(&sqsv1alpha1.Queue{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&corev1.ConfigMap{}).
		// A connection Secret is the user's: its metadata tells which it
		// is, and the Connector reads its data.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.queuesFor(indexSecret)), builder.OnlyMetadata).
		// A dead-letter Queue getting its ARN (it became Ready) lets its
		// users go on, and a source Queue's arrival lets the dead-letter
		// Queue that allows it go on. Other changes, its depth among them,
		// cost the Queues that name it no pass.
		Watches(&sqsv1alpha1.Queue{}, handler.EnqueueRequestsFromMapFunc(r.queuesFor(indexDLQ, indexSource)),
			builder.WithPredicates(arnChanged)).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: workers,
			// Failed passes back off per Queue from 1s to 5m: gentle with SQS
			// and with the apiserver when thousands fail at once.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, 5*time.Minute),
		}).
		Complete(r)
}

// arnChanged lets through the creation and deletion of a Queue, and the
// updates that change its ARN in status: all that the Queues naming it
// (as dead-letter queue or as source) read of it.
var arnChanged = predicate.TypedFuncs[client.Object]{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*sqsv1alpha1.Queue)
		cur, okNew := e.ObjectNew.(*sqsv1alpha1.Queue)
		return !okOld || !okNew || old.Status.QueueARN != cur.Status.QueueARN
	},
}

// queuesFor maps an object to the Queues in its namespace whose index keys
// name it.
func (r *Reconciler) queuesFor(indexes ...string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var reqs []reconcile.Request
		for _, index := range indexes {
			var list sqsv1alpha1.QueueList
			if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: o.GetName()}); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Listing Queues to requeue", "index", index, "object", client.ObjectKeyFromObject(o))
				continue
			}
			for _, q := range list.Items {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&q)})
			}
		}
		return reqs
	}
}
