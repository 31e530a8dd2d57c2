package etcdbackup

import (
	"context"
	"flag"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
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
	"sigs.k8s.io/controller-runtime/pkg/source"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/podspec"
)

// +kubebuilder:rbac:groups=etcd.tend.dev,resources=etcdbackups,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=etcd.tend.dev,resources=etcdbackups/status,verbs=patch
// +kubebuilder:rbac:groups=etcd.tend.dev,resources=etcdbackups/finalizers,verbs=update
// +kubebuilder:rbac:groups=etcd.tend.dev,resources=etcdbackupschedules,verbs=list;watch
// +kubebuilder:rbac:groups=etcd.tend.dev,resources=etcdbackupschedules/status,verbs=patch
// +kubebuilder:rbac:groups=etcd.tend.dev,resources=etcdbackupschedules/finalizers,verbs=update
// +kubebuilder:rbac:groups=etcd.tend.dev,resources=etcdclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get

// Names of the controllers for --controllers.
const (
	BackupName   = "etcdbackup"
	ScheduleName = "etcdbackupschedule"
)

// Options are the settings of the EtcdBackup and EtcdBackupSchedule
// controllers.
type Options struct {
	// Workers is how many EtcdBackups, and how many schedules, reconcile
	// at once.
	Workers int
	// AgentImage is the image of the `tend` agents that the Jobs run.
	AgentImage string
	// Clock decides when schedules are due and stamps status; nil is the
	// real clock. Tests set a fake one; no flag does.
	Clock clock.PassiveClock
}

// DefaultOptions returns the settings used when no flag is given.
func DefaultOptions() Options {
	return Options{Workers: 2}
}

// BindFlags registers the controllers' flags on fs.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.Workers, "etcdbackup-workers", o.Workers, "EtcdBackups, and EtcdBackupSchedules, reconciled at once.")
}

// Controllers returns the EtcdBackup and EtcdBackupSchedule controllers
// for the manager's registry. opts is read when the manager starts, after
// the flags are parsed.
//
// The EtcdBackup controller keeps a pod cache of its own (JobPodCache):
// its Jobs' pods, which it reads and watches, so that a step's end starts
// a pass at once.
func Controllers(opts *Options) []manager.Controller {
	apart := &manager.Apart{ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: JobPodCache()}}
	return []manager.Controller{
		{Name: BackupName, Metrics: &BackupMetrics, Apart: apart, Setup: func(mgr ctrl.Manager) error {
			r := &BackupReconciler{
				Client:     mgr.GetClient(),
				APIReader:  mgr.GetAPIReader(),
				Recorder:   mgr.GetEventRecorder("tend-etcdbackup"),
				Clock:      opts.Clock,
				AgentImage: opts.AgentImage,
			}
			return r.SetupWithManager(mgr, opts.Workers, apart.Cache)
		}},
		{Name: ScheduleName, Metrics: &ScheduleMetrics, Setup: func(mgr ctrl.Manager) error {
			r := &ScheduleReconciler{
				Client:   mgr.GetClient(),
				Recorder: mgr.GetEventRecorder("tend-etcdbackupschedule"),
				Clock:    opts.Clock,
			}
			return r.SetupWithManager(mgr, opts.Workers)
		}},
	}
}

// BackupReconciler runs EtcdBackups.
type BackupReconciler struct {
	client.Client
	// APIReader confirms what the caches may not have seen yet: a Job
	// that the last pass created, pods that a Job has recorded, a pod that
	// may still write a deleted backup's file.
	APIReader client.Reader
	// Pods reads the Jobs' pods: the controller's own pod cache
	// (JobPodCache), set by SetupWithManager.
	Pods     client.Reader
	Recorder events.EventRecorder
	// Clock stamps status. Nil means the real clock.
	Clock      clock.PassiveClock
	AgentImage string
}

// indexCluster indexes EtcdBackups by spec.clusterRef.name.
const indexCluster = ".spec.clusterRef.name"

// SetupWithManager registers the EtcdBackup controller with mgr; pods is
// the controller's own pod cache (JobPodCache), which passes read the
// Jobs' pods from and which is watched for them.
func (r *BackupReconciler) SetupWithManager(mgr ctrl.Manager, workers int, pods cache.Cache) error {
	r.Pods = pods
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.AgentImage == "" {
		r.AgentImage = podspec.DefaultAgentImage
	}
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &etcdv1alpha1.EtcdBackup{}, indexCluster, func(obj client.Object) []string {
		return []string{obj.(*etcdv1alpha1.EtcdBackup).Spec.ClusterRef.Name}
	})
	if err != nil {
		return fmt.Errorf("indexing EtcdBackups by cluster: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(BackupName).
		For(&etcdv1alpha1.EtcdBackup{}).
		Owns(&batchv1.Job{}).
		// The delete Job has no owner, and the end of one backup's Job
		// lets the next backup of its cluster start.
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(r.backupsOfJob)).
		// A backup that waits for its cluster starts when it is Available.
		Watches(&etcdv1alpha1.EtcdCluster{}, handler.EnqueueRequestsFromMapFunc(r.backupsOfCluster),
			builder.WithPredicates(availabilityChanged())).
		// A backup that waits for its turn starts when the backup before
		// it finishes or goes.
		Watches(&etcdv1alpha1.EtcdBackup{}, handler.EnqueueRequestsFromMapFunc(r.backupsAfter),
			builder.WithPredicates(turnEnded())).
		// A step that ends in a Job's pod changes nothing on the Job until
		// the pod ends: its pods are watched.
		WatchesRawSource(source.Kind(pods, &corev1.Pod{}, handler.TypedEnqueueRequestsFromMapFunc(backupOfPod))).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// availabilityChanged passes the EtcdClusters that appear or whose
// Available condition changes its status or reason (what a waiting
// backup reports), not each new message.
func availabilityChanged() predicate.Predicate {
	key := func(c *etcdv1alpha1.EtcdCluster) string {
		if cond := apimeta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAvailable); cond != nil {
			return string(cond.Status) + "/" + cond.Reason
		}
		return ""
	}
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, ok1 := e.ObjectOld.(*etcdv1alpha1.EtcdCluster)
			cur, ok2 := e.ObjectNew.(*etcdv1alpha1.EtcdCluster)
			return ok1 && ok2 && key(old) != key(cur)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// turnEnded passes the EtcdBackups that stop holding their cluster's
// turn (blockedBy): they finish, are being deleted, or are gone.
func turnEnded() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, ok1 := e.ObjectOld.(*etcdv1alpha1.EtcdBackup)
			cur, ok2 := e.ObjectNew.(*etcdv1alpha1.EtcdBackup)
			return ok1 && ok2 && (finished(old) != finished(cur) || old.DeletionTimestamp.IsZero() != cur.DeletionTimestamp.IsZero())
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// backupsAfter maps an EtcdBackup to the other backups of its cluster
// that have not finished, which may wait for it.
func (r *BackupReconciler) backupsAfter(ctx context.Context, obj client.Object) []reconcile.Request {
	b, ok := obj.(*etcdv1alpha1.EtcdBackup)
	if !ok {
		return nil
	}
	return r.unfinishedBackups(ctx, b.Namespace, b.Spec.ClusterRef.Name, b.Name)
}

// available tells whether c's Available condition is True.
func available(c *etcdv1alpha1.EtcdCluster) bool {
	return apimeta.IsStatusConditionTrue(c.Status.Conditions, etcdv1alpha1.ConditionAvailable)
}

// backupsOfCluster maps an EtcdCluster to its backups that have not
// finished.
func (r *BackupReconciler) backupsOfCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.unfinishedBackups(ctx, obj.GetNamespace(), obj.GetName(), "")
}

// backupsOfJob maps a backup or delete Job to the backup it works for,
// and a backup Job also to the other unfinished backups of its cluster,
// which may wait for it.
func (r *BackupReconciler) backupsOfJob(ctx context.Context, obj client.Object) []reconcile.Request {
	name, ok := obj.GetLabels()[etcdv1alpha1.LabelBackup]
	if !ok {
		return nil
	}
	reqs := []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}}}
	if obj.GetLabels()["app.kubernetes.io/component"] != componentBackup {
		return reqs
	}
	return append(reqs, r.unfinishedBackups(ctx, obj.GetNamespace(), obj.GetLabels()[etcdv1alpha1.LabelBackupCluster], name)...)
}

// unfinishedBackups lists the requests of cluster's backups that have not
// finished, but skip.
func (r *BackupReconciler) unfinishedBackups(ctx context.Context, ns, cluster, skip string) []reconcile.Request {
	if cluster == "" {
		return nil
	}
	var list etcdv1alpha1.EtcdBackupList
	if err := r.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{indexCluster: cluster}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing EtcdBackups of a cluster", "cluster", klog.KRef(ns, cluster))
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		b := &list.Items[i]
		if b.Name != skip && !finished(b) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)})
		}
	}
	return reqs
}

// record records an Event about obj; related, when not nil, is the object
// it acted on.
func record(rec events.EventRecorder, obj, related client.Object, eventType, reason, action, note string, args ...any) {
	if related == nil {
		rec.Eventf(obj, nil, eventType, reason, action, note, args...)
		return
	}
	rec.Eventf(obj, related, eventType, reason, action, note, args...)
}

// ScheduleReconciler runs EtcdBackupSchedules.
type ScheduleReconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Clock decides which run is due. Nil means the real clock.
	Clock clock.PassiveClock
}

// SetupWithManager registers the EtcdBackupSchedule controller with mgr.
func (r *ScheduleReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ScheduleName).
		For(&etcdv1alpha1.EtcdBackupSchedule{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&etcdv1alpha1.EtcdBackup{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}
