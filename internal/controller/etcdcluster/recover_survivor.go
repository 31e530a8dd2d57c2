package etcdcluster

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/podspec"
)

// forceNewCluster keeps the survivor's data as a one-member cluster: the
// other members' volumes go (their members could not vote any more, and
// come back as new learners), and a Job runs etcd --force-new-cluster on
// the survivor's volume until it leads alone.
func (r *Reconciler) forceNewCluster(ctx context.Context, s *scope, rec *etcdv1alpha1.RecoveryStatus, data memberData) error {
	c := s.cluster
	survivor, ok := memberOrdinal(c, rec.Survivor)
	if !ok {
		r.failRecovery(s, rec, nil, fmt.Sprintf("%s is not a member of the StatefulSet", rec.Survivor))
		return nil
	}
	left := 0
	for i := range data.pvcs {
		pvc := &data.pvcs[i]
		ordinal, ok := isMemberPVC(c, pvc)
		if !ok || ordinal == survivor {
			continue
		}
		left++
		if pvc.DeletionTimestamp == nil {
			if err := r.deleteExactly(ctx, "volume claim of a lost member", pvc); err != nil {
				return err
			}
			r.event(c, corev1.EventTypeWarning, "VolumeDeleted", "Recover", "Deleted volume claim %s: its member is given up, and comes back as a new learner", pvc.Name)
		}
	}
	if left > 0 {
		s.obs.recovery.message = fmt.Sprintf("Deleting the volume claims of the lost members: %d left (a claim goes once no pod mounts it, completed pods included)", left)
		return nil
	}
	job, err := r.ownedJob(ctx, c, rec.Job)
	if err == nil && job == nil {
		if err := r.createOwned(ctx, c, recoverJob(s.template(), survivor, rec.Job, r.AgentImage, runningImageOr(s))); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		s.obs.recovery.message = fmt.Sprintf("Job %s makes %s's data a one-member cluster (etcd --force-new-cluster)", rec.Job, rec.Survivor)
		return nil
	}
	if err != nil {
		return err
	}
	switch state, msg := jobStateOf(job); state {
	case jobFailed:
		r.failRecovery(s, rec, nil, fmt.Sprintf("Job %s, which runs etcd --force-new-cluster on %s's data, failed (%s); its pod logs say why. The members stay stopped: delete the Job to try again once the cause is fixed, or create an EtcdRestore from a backup to bring the cluster back", rec.Job, rec.Survivor, msg))
	case jobComplete:
		res, err := r.jobResult(ctx, job, "recover")
		if err != nil {
			return err
		}
		if res.Recovered != nil {
			rec.Revision = res.Recovered.Revision
		}
		if err := r.deleteDoneJob(ctx, c, job); err != nil {
			return err
		}
		rec.Phase = etcdv1alpha1.RecoveryStarting
		rec.Message = fmt.Sprintf("%s leads a one-member cluster at revision %d", rec.Survivor, rec.Revision)
	default:
		s.obs.recovery.message = fmt.Sprintf("Job %s makes %s's data a one-member cluster (etcd --force-new-cluster)", rec.Job, rec.Survivor)
	}
	return nil
}

// recoverJob runs etcd --force-new-cluster on the ordinal-th member's
// volume, as a native sidecar, while `tend recover` waits for it to lead a
// one-member cluster with its log replayed; when the agent exits, the
// kubelet stops etcd, which closes its data cleanly. etcd listens on the
// pod's loopback only: nothing else can reach it.
func recoverJob(c *etcdv1alpha1.EtcdCluster, ordinal int, name, agentImage, etcdImage string) *batchv1.Job {
	member := memberName(c, ordinal)
	mounts := []corev1.VolumeMount{{Name: dataVolume, MountPath: dataDir}}
	etcdCtr := corev1.Container{
		Name:            "etcd",
		Image:           etcdImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		RestartPolicy:   ptr.To(corev1.ContainerRestartPolicyAlways),
		Command: []string{"/usr/local/bin/etcd",
			"--name=" + member,
			"--data-dir=" + dataDir,
			"--force-new-cluster",
			"--listen-client-urls=http://127.0.0.1:" + strconv.Itoa(clientPort),
			"--advertise-client-urls=" + memberClientURL(c, member),
			"--listen-peer-urls=http://127.0.0.1:" + strconv.Itoa(peerPort),
			"--listen-metrics-urls=http://127.0.0.1:" + strconv.Itoa(metricsPort),
		},
		VolumeMounts:    mounts,
		SecurityContext: podspec.ContainerSecurity(),
	}
	var env []corev1.EnvVar
	if c.Spec.Auth.Enabled {
		// With auth on, etcd answers its status and member list only to a
		// user.
		env = []corev1.EnvVar{rootPasswordEnv(c)}
	}
	wait := agentStep(agentImage, "recover", []string{"recover",
		"--endpoint=http://127.0.0.1:" + strconv.Itoa(clientPort), "--member=" + member, "--timeout=3m"}, env, nil)
	return &batchv1.Job{
		ObjectMeta: meta(c, name),
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](2),
			PodFailurePolicy:      podspec.PodFailurePolicy(agentapi.ExitTerminal),
			ActiveDeadlineSeconds: podspec.ActiveDeadline(podspec.DataBytes(c)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: jobPodLabels(c, "etcd-recover")},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					SecurityContext:              podspec.PodSecurity(),
					InitContainers:               []corev1.Container{etcdCtr},
					Containers:                   []corev1.Container{wait},
					Volumes: []corev1.Volume{{Name: dataVolume, VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvcName(c, ordinal)},
					}}},
					Tolerations:  c.Spec.PodTemplate.Tolerations,
					NodeSelector: c.Spec.PodTemplate.NodeSelector,
					Affinity:     c.Spec.PodTemplate.Affinity,
				},
			},
		},
	}
}
