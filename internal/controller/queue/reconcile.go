package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	sqsv1alpha1 "github.com/tend-dev/tend/api/sqs/v1alpha1"
)

// defaultPollInterval applies when the spec has none (the CRD defaults it).
const defaultPollInterval = 5 * time.Minute

// cacheLagRetry is how soon a pass that found the cache behind the
// controller's own last write looks again. The Queue's status-only updates
// start no pass (the For predicate), so the retry is on a timer.
const cacheLagRetry = 250 * time.Millisecond

// Reconcile brings one Queue's SQS queue in line with its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	q := &sqsv1alpha1.Queue{}
	if err := r.Get(ctx, req.NamespacedName, q); err != nil {
		if apierrors.IsNotFound(err) {
			r.writes.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.writes.Behind(q) {
		return ctrl.Result{RequeueAfter: cacheLagRetry}, nil
	}
	if !q.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, q)
	}
	// The finalizer comes before the first create, so that no queue is ever
	// created that a deletion would forget.
	if !controllerutil.ContainsFinalizer(q, sqsv1alpha1.Finalizer) {
		patch := client.MergeFromWithOptions(q.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(q, sqsv1alpha1.Finalizer)
		if err := r.Patch(ctx, q, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
		r.writes.Wrote(q)
	}

	before := q.DeepCopy()
	initConditions(q)
	defer func() {
		if err := r.patchStatus(ctx, before, q); err != nil {
			retErr = errors.Join(retErr, err)
			res = ctrl.Result{} // with an error, its backoff decides the retry
		}
	}()
	if q.Paused() {
		setSynced(q, metav1.ConditionFalse, sqsv1alpha1.ReasonPaused, fmt.Sprintf(
			"The annotation %s is \"true\": Tend makes no call to SQS for this Queue until it is removed (kubectl tend resume); the status is as last seen",
			sqsv1alpha1.AnnotationPaused))
		q.Status.ObservedGeneration = q.Generation // acted on: a person must
		return ctrl.Result{}, nil                  // the annotation's removal starts the next pass
	}
	return r.reconcileNormal(ctx, q)
}

// reconcileNormal observes the queue and creates, adopts or repairs it.
func (r *Reconciler) reconcileNormal(ctx context.Context, q *sqsv1alpha1.Queue) (ctrl.Result, error) {
	// The SQS calls share one deadline; the status write after them does not,
	// so that a pass that timed out still reports why.
	callCtx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	api, err := r.Connector.Client(callCtx, q)
	if err != nil {
		return r.fail(q, err)
	}
	if q.Observed() {
		return r.reconcileObserve(ctx, callCtx, api, q)
	}
	dlqARN, waiting := r.deadLetterARN(ctx, q)
	reason, what := sqsv1alpha1.ReasonWaitingForDeadLetterQueue, "the dead-letter queue"
	if waiting == "" {
		waiting = r.sourceQueuesWaiting(ctx, q)
		reason, what = sqsv1alpha1.ReasonWaitingForSourceQueue, "a source Queue of redriveAllowPolicy"
	}
	if waiting != "" {
		setSynced(q, metav1.ConditionFalse, reason, waiting)
		setReady(q, metav1.ConditionFalse, sqsv1alpha1.ReasonCreating, "Waiting for "+what)
		return ctrl.Result{}, nil // the other Queue's change starts the next pass
	}

	if q.Status.Attributes != nil {
		// The last pass only observed the queue (managementPolicy Observe):
		// that does not make it this Queue's, so ownership and adoption
		// decide as for a queue seen for the first time.
		q.Status.QueueURL, q.Status.QueueARN, q.Status.Attributes = "", "", nil
	}
	obs, err := observe(callCtx, api, q)
	if err != nil {
		return r.fail(q, err)
	}
	switch decide(q, obs) {
	case planWait:
		q.Status.QueueURL, q.Status.QueueARN = "", ""
		setSynced(q, metav1.ConditionTrue, sqsv1alpha1.ReasonSynced, "")
		setReady(q, metav1.ConditionFalse, sqsv1alpha1.ReasonQueueMissing, fmt.Sprintf(
			"No SQS queue named %s exists, and adoption Adopt never creates one: create it, or set spec.adoption to AdoptOrCreate", q.SQSName()))
		q.Status.ObservedGeneration = q.Generation // acted on: a person must
		return r.done(q), nil
	case planRefuse:
		msg := fmt.Sprintf("An SQS queue named %s exists that no Queue owns (it has no %s tag): set spec.adoption to Adopt or AdoptOrCreate to manage it, or choose another spec.queueName",
			q.SQSName(), ownerTag)
		setSynced(q, metav1.ConditionFalse, sqsv1alpha1.ReasonQueueExists, msg)
		setReady(q, metav1.ConditionFalse, sqsv1alpha1.ReasonQueueExists, msg)
		r.event(q, corev1.EventTypeWarning, sqsv1alpha1.ReasonQueueExists, "Adopt", msg)
		q.Status.ObservedGeneration = q.Generation // acted on: a person must
		return ctrl.Result{}, nil                  // only a spec change can help
	case planOwnedByAnother:
		// Whatever status recorded is not this Queue's queue.
		q.Status.QueueURL, q.Status.QueueARN = "", ""
		msg := ownedByAnotherMessage(q, otherOwner(q, obs.tags))
		if prev := findCondition(q, sqsv1alpha1.ConditionSynced); prev == nil || prev.Message != msg {
			r.event(q, corev1.EventTypeWarning, sqsv1alpha1.ReasonOwnedByAnotherQueue, "Adopt", msg)
		}
		setSynced(q, metav1.ConditionFalse, sqsv1alpha1.ReasonOwnedByAnotherQueue, msg)
		setReady(q, metav1.ConditionFalse, sqsv1alpha1.ReasonOwnedByAnotherQueue, msg)
		q.Status.ObservedGeneration = q.Generation // acted on: a person must
		// Polls go on: the queue may go, or change hands.
		return r.done(q), nil
	case planCreate:
		if err := r.create(callCtx, api, q, dlqARN); err != nil {
			return r.fail(q, err)
		}
	case planAdopt, planManage:
		adopted := q.Status.QueueURL == ""
		if err := r.repair(callCtx, api, q, obs, dlqARN, adopted); err != nil {
			return r.fail(q, err)
		}
	}
	if err := r.publish(ctx, q); err != nil {
		return ctrl.Result{}, err
	}
	moving, err := r.redrive(callCtx, api, q)
	if err != nil {
		return r.fail(q, err)
	}
	setSynced(q, metav1.ConditionTrue, sqsv1alpha1.ReasonSynced, "")
	setReady(q, metav1.ConditionTrue, sqsv1alpha1.ReasonAvailable, "The queue exists and matches the spec")
	q.Status.ObservedGeneration = q.Generation
	res := r.done(q)
	if moving && res.RequeueAfter > redrivePoll {
		res.RequeueAfter = redrivePoll
	}
	return res, nil
}

// done is the result of a pass that succeeded: come back at the next poll.
func (r *Reconciler) done(q *sqsv1alpha1.Queue) ctrl.Result {
	interval := defaultPollInterval
	if q.Spec.PollInterval != nil {
		interval = q.Spec.PollInterval.Duration
	}
	return ctrl.Result{RequeueAfter: r.Jitter(interval)}
}

// sourceQueuesWaiting says why the pass must wait for a Queue that
// redriveAllowPolicy.sourceQueueRefs names, or "" when all exist.
func (r *Reconciler) sourceQueuesWaiting(ctx context.Context, q *sqsv1alpha1.Queue) string {
	if q.Spec.RedriveAllowPolicy == nil {
		return ""
	}
	for _, ref := range q.Spec.RedriveAllowPolicy.SourceQueueRefs {
		src := &sqsv1alpha1.Queue{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: q.Namespace, Name: ref.Name}, src); err != nil {
			return fmt.Sprintf("The source Queue %s of redriveAllowPolicy cannot be read (%v): create it in this namespace", ref.Name, err)
		}
	}
	return ""
}

// sourceARNs resolves redriveAllowPolicy's sources to ARNs: the listed ARNs,
// and the referenced Queues' SQS names in the account and region of ownARN,
// this queue's ARN. Nil when references need an ARN that is not known yet.
func (r *Reconciler) sourceARNs(ctx context.Context, q *sqsv1alpha1.Queue, ownARN string) ([]string, error) {
	p := q.Spec.RedriveAllowPolicy
	if p == nil {
		return nil, nil
	}
	arns := append([]string{}, p.SourceQueueARNs...)
	if len(p.SourceQueueRefs) == 0 {
		return arns, nil
	}
	if ownARN == "" {
		return nil, nil
	}
	for _, ref := range p.SourceQueueRefs {
		src := &sqsv1alpha1.Queue{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: q.Namespace, Name: ref.Name}, src); err != nil {
			return nil, fmt.Errorf("reading the source Queue %s of redriveAllowPolicy: %w", ref.Name, err)
		}
		arns = append(arns, sourceQueueARN(ownARN, src.SQSName()))
	}
	return arns, nil
}

// deadLetterARN returns the ARN of the spec's dead-letter queue, or why the
// pass must wait for it.
func (r *Reconciler) deadLetterARN(ctx context.Context, q *sqsv1alpha1.Queue) (arn, waiting string) {
	rd := q.Spec.Redrive
	switch {
	case rd == nil:
		return "", ""
	case rd.DeadLetterQueueRef == nil:
		return rd.DeadLetterTargetARN, ""
	}
	dlq := &sqsv1alpha1.Queue{}
	key := client.ObjectKey{Namespace: q.Namespace, Name: rd.DeadLetterQueueRef.Name}
	if err := r.Get(ctx, key, dlq); err != nil {
		return "", fmt.Sprintf("The dead-letter Queue %s cannot be read (%v): create it in this namespace", key.Name, err)
	}
	if dlq.Status.QueueARN == "" {
		return "", fmt.Sprintf("The dead-letter Queue %s has no ARN yet: it is not Ready", key.Name)
	}
	return dlq.Status.QueueARN, ""
}
