package etcdcluster

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/podspec"
)

// TestEveryJobHasADeadlineAndSurvivesADrain: no Job of a cluster can hold
// a roll, a restore, a recovery or a deletion for ever (a pod Pending for
// want of a node stops at its deadline, sized to the data it moves), and
// an agent Job's pod evicted by a node drain is retried, not counted as a
// failure.
func TestEveryJobHasADeadlineAndSurvivesADrain(t *testing.T) {
	c := newCluster("ns", "kv", func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Options.QuotaBackendBytes = ptr.To(resource.MustParse("4Gi"))
	})
	c.UID = "kv-uid"
	src := &restoreSource{loc: podspec.S3(&etcdv1alpha1.S3Location{Bucket: "bkt"}, "k.db")}
	quota := podspec.ActiveDeadline(4 << 30)
	for _, tc := range []struct {
		what     string
		job      *batchv1.Job
		deadline int64
		agent    bool
	}{
		{"init", initJob(c), *podspec.ActiveDeadline(0), false},
		{"check", checkJob(c, "kv-check-1", "tend:test"), *quota, true},
		{"restore", restoreJob(c, 0, src, "tend:test"), *quota, true},
		{"recover", recoverJob(c, 0, "kv-recover-1", "tend:test", "etcd:test"), *quota, true},
	} {
		t.Run(tc.what, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tc.job.Spec.ActiveDeadlineSeconds).To(HaveValue(Equal(tc.deadline)))
			g.Expect(time.Duration(tc.deadline) * time.Second).To(BeNumerically(">=", podspec.DeadlineBase))
			if !tc.agent {
				return
			}
			var ignored []corev1.PodConditionType
			for _, r := range tc.job.Spec.PodFailurePolicy.Rules {
				if r.Action == batchv1.PodFailurePolicyActionIgnore {
					for _, p := range r.OnPodConditions {
						ignored = append(ignored, p.Type)
					}
				}
			}
			g.Expect(ignored).To(ContainElement(corev1.DisruptionTarget))
		})
	}
}

// TestARecoveryResultComesOnlyFromThePodItsJobControls: a pod that merely
// carries the recover Job's name label (a user's, or one left by a Job of
// the same name deleted earlier) never supplies the revision a recovery
// records; the Job's own pod does.
func TestARecoveryResultComesOnlyFromThePodItsJobControls(t *testing.T) {
	g := NewWithT(t)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kv-recover-1", UID: "job-uid"}}
	pod := func(name string, owner types.UID, revision int64) corev1.Pod {
		msg, err := agentapi.Result{Op: agentapi.OpRecover, Recovered: &agentapi.Recovered{Revision: revision}}.Encode()
		g.Expect(err).NotTo(HaveOccurred())
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{batchv1.JobNameLabel: job.Name}},
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
				Name: "recover", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: string(msg)}},
			}}},
		}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: owner, Controller: ptr.To(true)}}
		}
		return p
	}

	_, err := resultOf([]corev1.Pod{pod("stranger", "", 7), pod("old-job", "old-uid", 8)}, job, "recover")
	g.Expect(err).To(MatchError(ContainSubstring("no pod of it has a result")))

	res, err := resultOf([]corev1.Pod{pod("stranger", "", 7), pod("old-job", "old-uid", 8), pod("own", job.UID, 42)}, job, "recover")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Recovered.Revision).To(Equal(int64(42)))
}
