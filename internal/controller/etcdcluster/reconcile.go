package etcdcluster

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/readiness"
)

// Reconcile brings one EtcdCluster towards its spec: certificates, then
// Services and budget, then the StatefulSet, then one membership step
// through etcd, then the init Job; and it writes the status once, from
// what it saw.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	c := &etcdv1alpha1.EtcdCluster{}
	if err := r.Get(ctx, req.NamespacedName, c); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName) // gone without a pass seeing it deleted (no finalizer)
			return ctrl.Result{}, r.restoresWaitingForCluster(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if r.written.Behind(c) {
		return ctrl.Result{RequeueAfter: requeueStale}, nil
	}
	if c.DeletionTimestamp == nil {
		if err := r.reconcileFinalizer(ctx, c); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := c.DeepCopy()
	s := &scope{cluster: c, before: before, now: r.Clock.Now()}
	defer func() {
		if s.released {
			return // the finalizer is off: the cluster is gone or going
		}
		if retErr != nil && !apierrors.IsConflict(retErr) && !errors.Is(retErr, context.Canceled) {
			// A conflict is the next pass's to resolve, and a cancelled
			// pass is the manager stopping.
			s.obs.passError = retErr
		}
		if c.DeletionTimestamp != nil {
			c.Status = deletingStatus(c, s.obs)
		} else {
			c.Status = calculateStatus(c, s.obs, s.now)
		}
		if retErr == nil {
			c.Status.ObservedGeneration = c.Generation
		}
		readiness.Set(&c.Status.Conditions, c.Generation, c.Status.ObservedGeneration, readinessOf(c, c.Status.Conditions))
		if err := r.patchStatus(ctx, before, c); err != nil {
			retErr = errors.Join(retErr, err)
			res = ctrl.Result{} // with an error, its backoff decides the retry
		}
	}()

	if c.DeletionTimestamp != nil {
		r.forget(req.NamespacedName)
		if d := next(&world{cluster: c, clock: s.now, deleting: true}); d.op == opDelete {
			return ctrl.Result{}, r.runDelete(ctx, s)
		}
		return ctrl.Result{}, nil
	}
	if err := r.reconcileNormal(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: s.requeue}, nil
}

// forget drops what the reconciler keeps in memory for a cluster that is
// going or gone: its next look, its roll slot, its revisions and where
// its archive answered.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.nextLook.Delete(key)
	r.written.Forget(key)
	r.going.forget(key)
	r.rolls.release(key)
	r.revisions.Delete(key)
	r.archiveAt.Delete(key)
}

// reconcileNormal puts in place what every cluster has, whatever it does
// (certificates, the root Secret, Services and budget, the StatefulSet,
// the connection ConfigMap); then it observes the world once, chooses one
// operation (next, choose.go) and carries it out.
func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) error {
	if err := r.reconcileCertificates(ctx, s); err != nil {
		if errors.Is(err, errTLSSecrets) {
			// The user must act; their fix is not an event of ours, so look
			// again soon.
			s.obs.tlsProblem = err.Error()
			s.requeueAfter(requeueSteady)
			return nil
		}
		return err
	}
	if err := r.reconcileRootSecret(ctx, s); err != nil {
		return err
	}
	if !s.cluster.Spec.Paused {
		if err := r.reconcileServices(ctx, s); err != nil {
			return err
		}
	}
	if err := r.reconcileStatefulSet(ctx, s); errors.Is(err, errStatefulSetTaken) {
		return nil
	} else if err != nil {
		return err
	}
	if err := r.reconcileConnection(ctx, s); err != nil {
		return err
	}
	w, err := r.observe(ctx, s)
	if s.cli != nil {
		defer func() { _ = s.cli.Close() }()
	}
	if err != nil {
		return err
	}
	d := next(w)
	ctrl.LoggerFrom(ctx).V(1).Info("Chose the operation", "operation", d.op, "why", d.why)
	if err := r.act(ctx, s, w, d); err != nil {
		return err
	}
	// The archive runs beside every operation (archive.go); a paused
	// cluster's is left as it is.
	if s.cluster.Spec.Paused {
		return nil
	}
	return r.reconcileArchive(ctx, s, w)
}

// owning are the operations that own the members while they run: the
// pass does nothing else.
var owning = map[opKind]operation{
	opRecovery:     (*Reconciler).runRecovery,
	opStartRestore: (*Reconciler).runStartRestore,
	opFailedHold:   (*Reconciler).runFailedHold,
	opQuorumLoss:   (*Reconciler).runQuorumLoss,
}

// serving are the operations of members that serve: the pass keeps the
// StatefulSet, authentication and volumes in line around them (serve.go).
var serving = map[opKind]operation{
	opMembership:     (*Reconciler).runMembership,
	opUpgradeBackup:  (*Reconciler).runUpgradeBackup,
	opRoll:           (*Reconciler).runRoll,
	opCheck:          (*Reconciler).runCheck,
	opNoSpace:        (*Reconciler).runNoSpace,
	opCompact:        (*Reconciler).runCompact,
	opDefragment:     (*Reconciler).runDefragment,
	opExpandVolumes:  (*Reconciler).runExpandVolumes,
	opMigrateVolumes: (*Reconciler).runMigrateVolumes,
}

// act carries out d.
func (r *Reconciler) act(ctx context.Context, s *scope, w *world, d decision) error {
	s.obs.quorum = d.quorum
	if err := r.answerPendingRestore(ctx, s, w, d.verdict); err != nil {
		return err
	}
	if op, ok := owning[d.op]; ok {
		return op(r, ctx, s, w, d)
	}
	if err := r.tidyAfterRecovery(ctx, s, w); err != nil {
		return err
	}
	noteNoSpace(w, d.noSpace, metav1.Time{Time: s.now})
	if len(w.maint.volumes.resizing) > 0 {
		s.requeueAfter(requeueUnreachable) // claims are not watched: look at the resize soon
	}
	switch {
	case d.op == opWait && w.sts == nil:
		return nil
	case d.op == opWait && w.members == nil:
		s.requeueAfter(unreachableRequeue(s.cluster, s.now))
		return nil
	case d.op == opWait:
		s.requeueAfter(requeueSteady) // paused
		return nil
	}
	return r.serve(ctx, s, w, d, serving[d.op])
}

// patchStatus writes c's status when the pass changed it, on the
// resourceVersion the pass read: status also records what happened (which
// backup the data came from, the members' volumes), and a pass that read
// a cache older than the last write must not undo it. On a conflict the
// pass fails and the next one reads afresh.
func (r *Reconciler) patchStatus(ctx context.Context, before, c *etcdv1alpha1.EtcdCluster) error {
	if equality.Semantic.DeepEqual(before.Status, c.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, c, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing the status: %w", err)
	}
	r.written.Wrote(c)
	return nil
}
