package podspec

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// PodFailurePolicy is every agent Job's: a step that exits with
// terminalExit (the agents' code for a failure that a retry cannot mend)
// fails the Job at once, and a pod that was evicted, preempted or drained
// off its node (the DisruptionTarget condition) is retried without
// counting against the Job's backoff limit.
func PodFailurePolicy(terminalExit int32) *batchv1.PodFailurePolicy {
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{
			Action:      batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{terminalExit}},
		},
		{
			Action:          batchv1.PodFailurePolicyActionIgnore,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
		},
	}}
}

// Deadline bounds: an agent Job gets DeadlineBase for its pod to be
// scheduled, pull its image and start, plus DeadlinePerGiB for each GiB
// of the data it moves (a snapshot streamed, fetched, restored, hashed).
// DeadlinePerGiB allows about 2 MiB/s, far below any disk or network a
// cluster runs on, so only a Job that is stuck (a pod Pending for want of
// a node or a volume, a store that does not answer) reaches it.
const (
	DeadlineBase   = 15 * time.Minute
	DeadlinePerGiB = 8 * time.Minute
)

// ActiveDeadline is the activeDeadlineSeconds of an agent Job that moves
// up to dataBytes of data: past it the Job fails with reason
// DeadlineExceeded, its pods are stopped, and the operation that waits for
// it reports the failure instead of waiting for ever.
func ActiveDeadline(dataBytes int64) *int64 {
	gib := float64(max(dataBytes, 0)) / float64(1<<30)
	d := DeadlineBase + time.Duration(gib*float64(DeadlinePerGiB))
	return ptr.To(int64(d.Round(time.Second) / time.Second))
}

// defaultQuotaBytes is etcd's own backend quota when none is set.
const defaultQuotaBytes = 2 << 30

// DataBytes is the most data a member of c can hold: its backend quota,
// past which etcd refuses writes. It sizes the deadlines of the Jobs that
// move a member's data.
func DataBytes(c *etcdv1alpha1.EtcdCluster) int64 {
	if q := c.Spec.Options.QuotaBackendBytes; q != nil && q.Value() > 0 {
		return q.Value()
	}
	return defaultQuotaBytes
}
