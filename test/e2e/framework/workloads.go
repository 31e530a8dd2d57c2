//go:build e2e

package framework

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// BusyboxPod returns a pod ns/name that runs script with sh in the busybox
// image once (restartPolicy Never). Its one container is named as the pod.
// Debian's static busybox crashes on wget -T: bound wget with timeout(1).
func (c *Cluster) BusyboxPod(ns, name, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       c.busyboxPodSpec(name, script),
	}
}

// BusyboxJob returns a Job ns/name that runs script with sh in the busybox
// image, without retries: a failure fails the Job, and WaitForJobComplete
// reports it at once. Its container is named as the Job.
func (c *Cluster) BusyboxJob(ns, name, script string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template:     corev1.PodTemplateSpec{Spec: c.busyboxPodSpec(name, script)},
		},
	}
}

func (c *Cluster) busyboxPodSpec(name, script string) corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		Containers: []corev1.Container{{
			Name:            name,
			Image:           c.Settings.BusyboxImage,
			ImagePullPolicy: corev1.PullNever,
			Command:         []string{"sh", "-c", script},
		}},
	}
}
