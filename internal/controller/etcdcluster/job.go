package etcdcluster

import (
	"context"
	"fmt"

	"github.com/tend-dev/tend/internal/etcdnames"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

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
					Containers: []corev1.Container{agentStep(agentImage, "check", args, env, []corev1.VolumeMount{
						{Name: "connection", MountPath: podspec.ConnectionDir, ReadOnly: true},
						{Name: "client-tls", MountPath: podspec.ClientTLSDir, ReadOnly: true},
					})},
					Volumes: []corev1.Volume{
						{Name: "connection", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: etcdnames.ConnectionName(c)},
						}}},
						{Name: "client-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: etcdnames.ClientTLSSecret(c)}}},
					},
					Tolerations:  c.Spec.PodTemplate.Tolerations,
					NodeSelector: c.Spec.PodTemplate.NodeSelector,
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
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == ctr && cs.State.Terminated != nil {
				return agentapi.ParseResult(cs.State.Terminated.Message, ctr)
			}
		}
	}
	return agentapi.Result{}, fmt.Errorf("job %s succeeded, but no pod of it has a result", job.Name)
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

const (
	jobNone jobState = iota
	jobRunning
	jobComplete
	jobFailed
)
