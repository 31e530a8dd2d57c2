package etcdcluster

import (
	"github.com/tend-dev/tend/internal/etcdnames"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/podspec"
)

// clientTLSDir is where the init Job mounts the client certificate.
const clientTLSDir = "/etc/etcd/tls/client"

// initJob checks a new cluster from inside Kubernetes, the way applications
// reach it: through the client Service, with the client certificate, by
// name. Its steps are etcdctl commands run in turn as init containers (the
// etcd image has no shell): a linearizable read through the Service (which
// needs a leader and a quorum), then (with auth) the root user's password
// accepted, then the membership printed for the logs. It does not ask each
// member by its own name: the cluster DNS may deny those names for as long
// as it caches negative answers (30s), because the members looked each
// other up before their pods were published. Tend sets up authentication
// itself before it creates the Job, so that a step retried after a failure
// finds nothing half done.
func initJob(c *etcdv1alpha1.EtcdCluster) *batchv1.Job {
	env := []corev1.EnvVar{
		{Name: "ETCDCTL_ENDPOINTS", Value: clientEndpoint(c)},
		{Name: "ETCDCTL_CACERT", Value: clientTLSDir + "/ca.crt"},
		{Name: "ETCDCTL_CERT", Value: clientTLSDir + "/tls.crt"},
		{Name: "ETCDCTL_KEY", Value: clientTLSDir + "/tls.key"},
		{Name: "ETCDCTL_COMMAND_TIMEOUT", Value: "10s"},
	}
	step := func(name string, args ...string) corev1.Container {
		return corev1.Container{
			Name:            name,
			Image:           etcdnames.Image(c),
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         append([]string{"/usr/local/bin/etcdctl"}, args...),
			Env:             env,
			VolumeMounts:    []corev1.VolumeMount{{Name: "client-tls", MountPath: clientTLSDir, ReadOnly: true}},
			SecurityContext: podspec.ContainerSecurity(),
		}
	}
	steps := []corev1.Container{step("health", "endpoint", "health")}
	if c.Spec.Auth.Enabled {
		// etcdctl reads --user and --password from ETCDCTL_USER and
		// ETCDCTL_PASSWORD: the password stays out of the pod's command
		// line, which the node's process list shows.
		root := step("root-login", "auth", "status")
		root.Env = append(root.Env, corev1.EnvVar{Name: "ETCDCTL_USER", Value: "root"}, corev1.EnvVar{Name: "ETCDCTL_PASSWORD", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: etcdnames.RootSecretName(c)}, Key: rootPasswordKey},
		}})
		steps = append(steps, root)
	}
	return &batchv1.Job{
		ObjectMeta: meta(c, initJobName(c)),
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](6),
			ActiveDeadlineSeconds: podspec.ActiveDeadline(0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: jobPodLabels(c, "etcd-init")},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					SecurityContext:              podspec.PodSecurity(),
					InitContainers:               steps,
					Containers:                   []corev1.Container{step("members", "member", "list", "--write-out=table")},
					Volumes: []corev1.Volume{{Name: "client-tls", VolumeSource: corev1.VolumeSource{
						Secret: &corev1.SecretVolumeSource{SecretName: tlsSecretsOf(c).Client},
					}}},
					Tolerations:  c.Spec.PodTemplate.Tolerations,
					NodeSelector: c.Spec.PodTemplate.NodeSelector,
				},
			},
		},
	}
}

// checkJob confirms a rolled cluster from inside Kubernetes: `tend check`
// waits until every member is a healthy voter on the spec's version, etcd
// reports the cluster version of that minor, and every member's store
// hashes the same at one revision. It reads the cluster's connection
// ConfigMap and client certificate, as the backup agents do.
func checkJob(c *etcdv1alpha1.EtcdCluster, name, agentImage string) *batchv1.Job {
	args := []string{"check",
		"--connection-dir=" + podspec.ConnectionDir, "--client-tls-dir=" + podspec.ClientTLSDir,
		"--version=" + version(c), "--timeout=5m"}
	var env []corev1.EnvVar
	if c.Spec.Auth.Enabled {
		env = []corev1.EnvVar{rootPasswordEnv(c)}
	}
	volumes, mounts := connectionVolumes(c)
	return &batchv1.Job{
		ObjectMeta: meta(c, name),
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](2),
			// The record of the check outlives the roll a while; the next
			// roll has a Job of another name.
			TTLSecondsAfterFinished: ptr.To[int32](24 * 3600),
			PodFailurePolicy:        podspec.PodFailurePolicy(agentapi.ExitTerminal),
			// It hashes every member's store.
			ActiveDeadlineSeconds: podspec.ActiveDeadline(podspec.DataBytes(c)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: jobPodLabels(c, "etcd-check")},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					SecurityContext:              podspec.PodSecurity(),
					Containers:                   []corev1.Container{agentStep(agentImage, "check", args, env, mounts)},
					Volumes:                      volumes,
					Tolerations:                  c.Spec.PodTemplate.Tolerations,
					NodeSelector:                 c.Spec.PodTemplate.NodeSelector,
				},
			},
		},
	}
}

// agentStep is a container that runs the Tend agent step args (`tend
// check`, `tend restore install`, ...) from agentImage; its Result comes
// back in the termination message.
func agentStep(agentImage, name string, args []string, env []corev1.EnvVar, mounts []corev1.VolumeMount) corev1.Container {
	return corev1.Container{
		Name:                     name,
		Image:                    agentImage,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Command:                  append([]string{podspec.AgentBinary}, args...),
		Env:                      env,
		VolumeMounts:             mounts,
		SecurityContext:          podspec.ContainerSecurity(),
		TerminationMessagePath:   agentapi.TerminationMessagePath,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
}

// jobPodLabels label the pods of a cluster's Jobs: not the members'
// labels, so that the Services and the budget never select them.
func jobPodLabels(c *etcdv1alpha1.EtcdCluster, name string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       name,
		"app.kubernetes.io/instance":   c.Name,
		"app.kubernetes.io/managed-by": "tend",
	}
}

// rootPasswordEnv gives an agent the root password, as ETCD_ROOT_PASSWORD,
// from the cluster's root Secret.
func rootPasswordEnv(c *etcdv1alpha1.EtcdCluster) corev1.EnvVar {
	return corev1.EnvVar{Name: "ETCD_ROOT_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: etcdnames.RootSecretName(c)}, Key: rootPasswordKey,
	}}}
}

// jobState is how far the init Job got.
type jobState int

const (
	jobNone jobState = iota
	jobRunning
	jobComplete
	jobFailed
)
