package etcdbackup

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/manager"
)

// JobPodCache narrows the controller's own pod cache (manager.Apart: the
// manager's pod cache holds the PodSets' pods) to the pods that carry the
// label etcdv1alpha1.LabelBackup, which the backup and delete Jobs set on
// their pods (jobLabels), and keeps of each what a pass reads
// (trimJobPod).
func JobPodCache() cache.ByObject {
	by := manager.WithLabel(etcdv1alpha1.LabelBackup)
	by.Transform = trimJobPod
	return by
}

// trimJobPod keeps of a pod its metadata (labels, owner references,
// creation and deletion times) and the status that readPod and activePod
// read: the phase, and of each container its name, its state and last
// state (with the agents' termination messages) and its restarts. Its
// spec, conditions, addresses and the containers' images, IDs and
// resources are left out. The controller never writes a pod.
var trimJobPod = manager.TrimPod(func(in, out *corev1.Pod) {
	out.Status = corev1.PodStatus{Phase: in.Status.Phase,
		InitContainerStatuses: trimStatuses(in.Status.InitContainerStatuses), ContainerStatuses: trimStatuses(in.Status.ContainerStatuses)}
})

// trimStatuses keeps of container statuses what readStep reads.
func trimStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if in == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, cs := range in {
		out[i] = corev1.ContainerStatus{Name: cs.Name, State: cs.State, LastTerminationState: cs.LastTerminationState, RestartCount: cs.RestartCount}
	}
	return out
}

// controllingJob is the name of the Job that controls pod, or "" when no
// Job does.
func controllingJob(pod *corev1.Pod) string {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "Job" {
		return ""
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != batchv1.GroupName {
		return ""
	}
	return ref.Name
}

// backupOfPod maps a pod of the controller's pod cache to the EtcdBackup
// that its label names, in its namespace, when the Job that controls it
// bears that backup's backup or delete Job name: a step that ends, a pod
// that starts, fails or goes, starts a pass at once. A label alone, which
// anyone may set, maps nothing. The mapping only starts a pass, which
// checks by UID: it reads steps only from the pods that a Job controls
// (ownedPods), and only of the backup's own Jobs (the backup Job that it
// controls, the delete Job annotated with its UID). No pod is written.
func backupOfPod(_ context.Context, pod *corev1.Pod) []reconcile.Request {
	name := pod.Labels[etcdv1alpha1.LabelBackup]
	if name == "" {
		return nil
	}
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if job := controllingJob(pod); job != BackupJobName(b) && job != DeleteJobName(b) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: name}}}
}

// readJobPods reads job and its pods. The pods come from the pod cache,
// which is watched apart from the Jobs' and may lag them: when the Job has
// recorded pods ending that the cache does not show ended (podCacheLags),
// they are listed live once instead, so that a Job that completed is
// never read as one whose pods reported nothing.
func (r *BackupReconciler) readJobPods(ctx context.Context, job *batchv1.Job) (jobView, error) {
	pods, err := listJobPods(ctx, r.Pods, job)
	if err != nil {
		return jobView{}, err
	}
	if podCacheLags(job, pods) {
		if pods, err = listJobPods(ctx, r.APIReader, job); err != nil {
			return jobView{}, err
		}
	}
	return readJob(job, pods), nil
}

// listJobPods lists through reader the pods that job controls.
func listJobPods(ctx context.Context, reader client.Reader, job *batchv1.Job) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := reader.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return nil, fmt.Errorf("listing the pods of Job %s: %w", job.Name, err)
	}
	return ownedPods(pods.Items, job), nil
}

// podCacheLags tells whether job's status records more of its pods ended
// than pods (its pods, as the pod cache has them) show ended, or records
// the Job's end while they show no pod ended: the cache has not caught up
// with what the Job controller saw. A pod deleted after the Job counted
// it also makes the two differ; the live list then shows what there is.
func podCacheLags(job *batchv1.Job, pods []corev1.Pod) bool {
	ended := 0
	for i := range pods {
		if p := pods[i].Status.Phase; p == corev1.PodSucceeded || p == corev1.PodFailed {
			ended++
		}
	}
	recorded := int(job.Status.Succeeded + job.Status.Failed)
	if u := job.Status.UncountedTerminatedPods; u != nil {
		recorded += len(u.Succeeded) + len(u.Failed)
	}
	v := readJob(job, nil)
	return recorded > ended || ((v.complete || v.failed) && ended == 0)
}

// activePod returns, through reader, a pod of the Job named job that has
// not stopped, or nil. It lists by the Job's name, not its UID, nor its
// owner: the Job may be gone already while the garbage collector deletes
// its pods, and a Job deleted with --cascade=orphan leaves them running
// with no owner. Any of them may still write the file.
func activePod(ctx context.Context, reader client.Reader, ns, job string) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := reader.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: job}); err != nil {
		return nil, fmt.Errorf("listing the pods of Job %s: %w", job, err)
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			return p, nil
		}
	}
	return nil, nil
}
