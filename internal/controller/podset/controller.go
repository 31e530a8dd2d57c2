package podset

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
	"github.com/tend-dev/tend/internal/manager"
)

// +kubebuilder:rbac:groups=apps.tend.dev,resources=podsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.tend.dev,resources=podsets/status,verbs=patch
// +kubebuilder:rbac:groups=apps.tend.dev,resources=podsets/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete

// Name is the controller's name for --controllers.
const Name = "podset"

// indexPodSets indexes pods by the names of the PodSets they concern (see
// podSetNamesOf). A pass lists its pods through it, so that it reads its own
// pods only: a label selector on the cache would test every pod of the
// namespace, on every pass.
const indexPodSets = ".metadata.podsets"

// Options are the podset controller's settings.
type Options struct {
	// Workers is how many PodSets reconcile at once.
	Workers int
}

// DefaultOptions returns the settings used when no flag is given.
func DefaultOptions() Options { return Options{Workers: 5} }

// BindFlags registers the controller's flags on fs.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.Workers, "podset-workers", o.Workers, "PodSets reconciled at once.")
}

// Controller returns the podset controller for the manager's registry. opts
// is read when the manager starts, after the flags are parsed.
func Controller(opts *Options) manager.Controller {
	return manager.Controller{
		Name:  Name,
		Cache: map[client.Object]cache.ByObject{&corev1.Pod{}: PodCache(), &corev1.Service{}: manager.MadeByTend()},
		// Every Service's metadata, so that another owner's Service that
		// holds a leader Service's name starts a pass when it goes.
		Metadata: []client.Object{&corev1.Service{}},
		Metrics:  &Metrics,
		Setup: func(mgr ctrl.Manager) error {
			r := &Reconciler{
				Client:    mgr.GetClient(),
				APIReader: mgr.GetAPIReader(),
				Recorder:  mgr.GetEventRecorder("tend-podset"),
			}
			return r.SetupWithManager(mgr, opts.Workers)
		},
	}
}

// Reconciler keeps PodSets' pods in line with their specs.
type Reconciler struct {
	client.Client
	// APIReader reads from the apiserver, bypassing the cache, where a stale
	// answer would be unsafe: before adopting pods and before labelling a
	// new leader; or noisy: before repeating a Warning Event.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Clock times the expectations. Nil means the real clock.
	Clock clock.PassiveClock

	expectations *expectations
	// statuses remembers the status writes that the cache has not shown
	// yet (statuswrite.go).
	statuses statusMemo
}

// SetupWithManager registers the controller and its pod index with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.expectations = newExpectations(r.Clock)
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, indexPodSets, podSetNamesOf)
	if err != nil {
		return fmt.Errorf("indexing pods by PodSet: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		// Only spec changes start a pass: a pass's own status write must not.
		// Annotations: tend.dev/paused.
		For(&appsv1alpha1.PodSet{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		// A pod event concerns the PodSet that controls it and the one its
		// label names (an orphan to adopt, or the old owner of a relabelled
		// pod: both old and new objects are mapped).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podSetsOfPod)).
		// A Service event concerns the PodSet that controls it and the one
		// whose leader Service its name is: when a Service of another owner
		// that holds that name goes, the PodSet creates its own.
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(podSetsOfService), builder.OnlyMetadata).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: workers,
			// A refused create backs off per PodSet from 1s to 5m, so a
			// PodSet over quota costs one create every few minutes.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, 5*time.Minute),
		}).
		Complete(r)
}

// podSetNamesOf returns the names of the PodSets a pod concerns: the one
// that controls it and the one its label names, usually the same one.
func podSetNamesOf(o client.Object) []string {
	var names []string
	if ref := podSetControllerOf(o); ref != nil {
		names = append(names, ref.Name)
	}
	if name := o.GetLabels()[appsv1alpha1.LabelPodSet]; name != "" && (len(names) == 0 || names[0] != name) {
		names = append(names, name)
	}
	return names
}

// podSetsOfPod maps a pod to the PodSets it concerns.
func podSetsOfPod(_ context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, name := range podSetNamesOf(o) {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}})
	}
	return reqs
}

// podSetsOfService maps a Service to the PodSets it concerns: the one that
// controls it and the one whose leader Service has its name, usually the
// same one.
func podSetsOfService(_ context.Context, o client.Object) []reconcile.Request {
	var names []string
	if ref := podSetControllerOf(o); ref != nil {
		names = append(names, ref.Name)
	}
	if name, ok := podSetOfLeaderService(o.GetName()); ok && !slices.Contains(names, name) {
		names = append(names, name)
	}
	reqs := make([]reconcile.Request, 0, len(names))
	for _, name := range names {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}})
	}
	return reqs
}

// podSetOfLeaderService returns the name of the PodSet whose leader Service
// would be called name (appsv1alpha1.LeaderServiceName's inverse).
func podSetOfLeaderService(name string) (string, bool) {
	ps, ok := strings.CutSuffix(name, appsv1alpha1.LeaderServiceName(""))
	return ps, ok && ps != ""
}
