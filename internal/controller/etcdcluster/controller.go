package etcdcluster

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/etcd"
	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/podspec"
)

// +kubebuilder:rbac:groups=etcd.tend.dev,resources=etcdclusters,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=etcd.tend.dev,resources=etcdclusters/status,verbs=patch
// +kubebuilder:rbac:groups=etcd.tend.dev,resources=etcdclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=list;watch;create;update
// +kubebuilder:rbac:groups="",resources=services;secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=etcd.tend.dev,resources=etcdbackups,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=etcd.tend.dev,resources=etcdrestores,verbs=list;watch;create
// +kubebuilder:rbac:groups=etcd.tend.dev,resources=etcdrestores/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get;list;patch

// Name is the controller's name for --controllers.
const Name = "etcdcluster"

// Options are the etcdcluster controller's settings.
type Options struct {
	// Workers is how many EtcdClusters reconcile at once.
	Workers int
	// MemberChangeInterval, when not zero, turns on the anchor design that
	// the benchmark compares Tend with: one look at the membership (and at
	// most one change) per interval, on a fixed requeue, as
	// etcd-io/etcd-operator does every 10s. Zero, the default, acts as soon
	// as the cluster allows.
	MemberChangeInterval time.Duration
	// Clock times member health and certificate renewal; nil is the real
	// clock. Tests set a fake one; no flag does.
	Clock clock.PassiveClock
	// AgentImage is Tend's own image, whose agents restore members' data.
	// cmd/tend sets it from --agent-image.
	AgentImage string
	// Connect opens a client to one etcd cluster; nil is etcd.New. Tests
	// set it to members faked at the etcd boundary; no flag does.
	Connect func(context.Context, etcd.Config) (Members, error)
	// ArchiveState reads a running `tend archive`'s state at a pod's IP;
	// nil reads its /status over HTTP. Tests set it to agents faked at that
	// boundary; no flag does.
	ArchiveState func(ctx context.Context, podIP string) (agentapi.ArchiveState, error)
	// MaxOperatorRolls is how many clusters Tend rolls at once when a new
	// Tend runs their members differently (rolls caused by a cluster's own
	// spec are not counted).
	MaxOperatorRolls int
}

// DefaultOptions returns the settings used when no flag is given.
func DefaultOptions() Options { return Options{Workers: 3, MaxOperatorRolls: 1} }

// BindFlags registers the controller's flags on fs.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.Workers, "etcdcluster-workers", o.Workers, "EtcdClusters reconciled at once.")
	fs.DurationVar(&o.MemberChangeInterval, "etcdcluster-member-change-interval", o.MemberChangeInterval,
		"For benchmarks: look at an EtcdCluster's membership only once per this interval (the fixed-requeue design); 0 acts as soon as etcd allows.")
	fs.IntVar(&o.MaxOperatorRolls, "etcdcluster-max-operator-rolls", o.MaxOperatorRolls,
		"EtcdClusters restarted at once, member by member, because this version of Tend runs their members differently than the one that made them. Rolls asked for by a cluster's own spec are not limited.")
}

// PVCCache restricts the manager's cache of PersistentVolumeClaims to the
// members' volumes, which carry the cluster label.
func PVCCache() cache.ByObject { return manager.WithLabel(LabelCluster) }

// Controller returns the etcdcluster controller for the manager's registry.
// opts is read when the manager starts, after the flags are parsed.
//
// The cache holds the Secrets, ConfigMaps, Services and Deployments (the
// archive's) that Tend made (all labelled by labels()), and every Secret's
// metadata, so that a
// change to a user's Secret that spec.tls.secrets names starts a pass. The
// user's Secrets themselves (Provided mode), and any object of Tend's that
// lost its label, are read from the apiserver (manager.ReadThrough).
func Controller(opts *Options) manager.Controller {
	apart := &manager.Apart{ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: MemberPodCache()}}
	return manager.Controller{
		Name:  Name,
		Apart: apart,
		Cache: map[client.Object]cache.ByObject{
			&corev1.PersistentVolumeClaim{}: PVCCache(),
			&corev1.Secret{}:                manager.MadeByTend(),
			&corev1.ConfigMap{}:             manager.MadeByTend(),
			&corev1.Service{}:               manager.MadeByTend(),
			&appsv1.Deployment{}:            manager.MadeByTend(),
		},
		Metadata: []client.Object{&corev1.Secret{}},
		Metrics:  &Metrics,
		Setup: func(mgr ctrl.Manager) error {
			r := &Reconciler{
				Client:               manager.ReadThrough(mgr.GetClient(), mgr.GetAPIReader(), &corev1.Secret{}, &corev1.ConfigMap{}, &corev1.Service{}, &appsv1.Deployment{}),
				APIReader:            mgr.GetAPIReader(),
				Recorder:             mgr.GetEventRecorder("tend-etcdcluster"),
				MemberChangeInterval: opts.MemberChangeInterval,
				Clock:                opts.Clock,
				AgentImage:           opts.AgentImage,
				ArchiveState:         opts.ArchiveState,
				MaxOperatorRolls:     opts.MaxOperatorRolls,
				Connect:              opts.Connect,
			}
			return r.SetupWithManager(mgr, opts.Workers, apart.Cache)
		},
	}
}

// SetupWithManager registers the controller with mgr; pods is the
// controller's own pod cache (MemberPodCache), which passes read the member
// pods from and which is watched for them.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int, pods cache.Cache) error {
	r.Pods = pods
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.AgentImage == "" {
		r.AgentImage = podspec.DefaultAgentImage
	}
	if r.Connect == nil {
		r.Connect = func(ctx context.Context, cfg etcd.Config) (Members, error) { return etcd.New(ctx, cfg) }
	}
	if r.Gate == nil {
		r.Gate = manager.GateOf(mgr)
	}
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &etcdv1alpha1.EtcdCluster{}, indexTLSSecrets, func(obj client.Object) []string {
		c := obj.(*etcdv1alpha1.EtcdCluster)
		if c.Spec.TLS.Mode != etcdv1alpha1.TLSProvided {
			return nil
		}
		s := tlsSecretsOf(c)
		return []string{s.Server, s.Peer, s.Client}
	})
	if err != nil {
		return fmt.Errorf("indexing EtcdClusters by TLS Secret: %w", err)
	}
	err = mgr.GetFieldIndexer().IndexField(context.Background(), &etcdv1alpha1.EtcdCluster{}, indexRestoreBackup, func(obj client.Object) []string {
		c := obj.(*etcdv1alpha1.EtcdCluster)
		if !restoring(c) || c.Spec.Bootstrap.Restore.BackupRef == nil {
			return nil
		}
		return []string{c.Spec.Bootstrap.Restore.BackupRef.Name}
	})
	if err != nil {
		return fmt.Errorf("indexing EtcdClusters by the backup they restore: %w", err)
	}
	err = mgr.GetFieldIndexer().IndexField(context.Background(), &etcdv1alpha1.EtcdRestore{}, indexRestoreCluster, restoreClusterName)
	if err != nil {
		return fmt.Errorf("indexing EtcdRestores by cluster: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		// A pass's own status write must not start another; a person's
		// annotation (skip the final snapshot, adopt volumes) must.
		For(&etcdv1alpha1.EtcdCluster{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&corev1.ConfigMap{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.Secret{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&batchv1.Job{}).
		Owns(&appsv1.Deployment{}).
		// A user's TLS Secret is not ours to own, but its fix must start a
		// pass. Its metadata tells which it is; the pass reads its data.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.clustersUsingSecret), builder.OnlyMetadata).
		// A backup that a new cluster restores from, or a deleted
		// cluster's final snapshot, moves the cluster on when it is done.
		Watches(&etcdv1alpha1.EtcdBackup{}, handler.EnqueueRequestsFromMapFunc(r.clustersOfBackup)).
		// The cluster's controller carries out its in-place restores.
		Watches(&etcdv1alpha1.EtcdRestore{}, handler.EnqueueRequestsFromMapFunc(clusterOfRestore)).
		WatchesRawSource(source.Kind(pods, &corev1.Pod{}, handler.TypedEnqueueRequestsFromMapFunc(clusterOfPod))).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// clusterOfRestore maps an EtcdRestore to its cluster.
func clusterOfRestore(_ context.Context, obj client.Object) []reconcile.Request {
	rs := obj.(*etcdv1alpha1.EtcdRestore)
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: rs.Namespace, Name: rs.Spec.ClusterRef.Name}}}
}

// indexTLSSecrets indexes EtcdClusters by the Provided TLS Secrets they
// name.
const indexTLSSecrets = ".spec.tls.secrets"

// clustersUsingSecret maps a Secret to the EtcdClusters whose Provided TLS
// names it.
func (r *Reconciler) clustersUsingSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	var list etcdv1alpha1.EtcdClusterList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{indexTLSSecrets: obj.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing EtcdClusters by TLS Secret", "secret", klog.KObj(obj))
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return reqs
}

// indexRestoreBackup indexes EtcdClusters by the EtcdBackup that
// spec.bootstrap.restore names.
const indexRestoreBackup = ".spec.bootstrap.restore.backupRef.name"

// clustersOfBackup maps an EtcdBackup to the clusters that wait for it:
// new clusters restoring from it, and the cluster it is the final snapshot
// of.
func (r *Reconciler) clustersOfBackup(ctx context.Context, obj client.Object) []reconcile.Request {
	var list etcdv1alpha1.EtcdClusterList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{indexRestoreBackup: obj.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing EtcdClusters by the backup they restore", "backup", klog.KObj(obj))
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	if name := obj.GetLabels()[etcdv1alpha1.LabelBackupCluster]; name != "" && strings.HasPrefix(obj.GetName(), name+"-final-") {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}})
	}
	return reqs
}
