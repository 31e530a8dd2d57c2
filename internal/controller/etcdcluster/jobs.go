package etcdcluster

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	batchv1 "k8s.io/api/batch/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
)

// ownedJob reads the Job name: nil when there is none, and an error that
// wraps errNotOurs when one exists that c does not control.
func (r *Reconciler) ownedJob(ctx context.Context, c *etcdv1alpha1.EtcdCluster, name string) (*batchv1.Job, error) {
	job := &batchv1.Job{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, job)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading Job %s: %w", name, err)
	case !metav1.IsControlledBy(job, c):
		return nil, notOurs(c, "Job", job)
	}
	return job, nil
}

// deleteDoneJob deletes a finished Job of c's that mounted a member's
// volume, with its pods: a pod that mounts a claim keeps it from being
// deleted even once it completed (kubernetes.io/pvc-protection), and Tend
// deletes members' claims when it replaces, removes or recovers members.
// What the Job did is in the status and the Events by then; a retried step
// finds its work done.
func (r *Reconciler) deleteDoneJob(ctx context.Context, c *etcdv1alpha1.EtcdCluster, job *batchv1.Job) error {
	return r.deleteOwned(ctx, c, "Job", job)
}

// jobResult reads the agent's Result from the termination message of the
// container named ctr in job's succeeded pod. Only a pod that job controls
// counts: anyone can label a pod with the Job's name, and a Job of the same
// name deleted earlier leaves pods with that label too.
func (r *Reconciler) jobResult(ctx context.Context, job *batchv1.Job, ctr string) (agentapi.Result, error) {
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return agentapi.Result{}, fmt.Errorf("listing the pods of Job %s: %w", job.Name, err)
	}
	return resultOf(pods.Items, job, ctr)
}

// resultOf reads the Result of the container named ctr from the succeeded
// pod among pods that job controls.
func resultOf(pods []corev1.Pod, job *batchv1.Job, ctr string) (agentapi.Result, error) {
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded || !metav1.IsControlledBy(&p, job) {
			continue
		}
		if r, ok, err := podResult(&p, ctr); ok {
			return r, err
		}
	}
	return agentapi.Result{}, fmt.Errorf("job %s succeeded, but no pod of it has a result", job.Name)
}

// podResult reads the Result of p's step ctr, an init container or a
// container; ok is false when that step has not ended.
func podResult(p *corev1.Pod, ctr string) (r agentapi.Result, ok bool, err error) {
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if cs.Name == ctr && cs.State.Terminated != nil {
			r, err = agentapi.ParseResult(cs.State.Terminated.Message, ctr)
			return r, true, err
		}
	}
	return agentapi.Result{}, false, nil
}

// jobStateOf reads a Job's terminal conditions.
func jobStateOf(job *batchv1.Job) (jobState, string) {
	for _, cond := range job.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			return jobComplete, ""
		case batchv1.JobFailed:
			return jobFailed, cond.Message
		}
	}
	return jobRunning, ""
}

// createOwned creates obj owned by c. It fails when obj exists already
// (names are deterministic: it is ours from an earlier pass that the cache
// does not show yet), so that the pass starts again from what exists rather
// than go on with an object that was never stored, such as a second
// password.
func (r *Reconciler) createOwned(ctx context.Context, c *etcdv1alpha1.EtcdCluster, obj client.Object) error {
	if err := controllerutil.SetControllerReference(c, obj, r.Scheme()); err != nil {
		return err
	}
	if err := r.Create(ctx, obj); err != nil {
		kind := "object"
		if gvk, gvkErr := apiutil.GVKForObject(obj, r.Scheme()); gvkErr == nil {
			kind = gvk.Kind
		}
		return fmt.Errorf("creating %s %s: %w", kind, obj.GetName(), err)
	}
	return nil
}
