package etcdbackup

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/etcdnames"
	"github.com/tend-dev/tend/internal/podspec"
)

// Steps of the backup pod: the containers' names. The agents' steps are
// named after their Result.Op, so that a container's termination message
// is checked against its own step.
const (
	stepBackup  = "backup"
	stepFetch   = "fetch"
	stepRestore = "restore"
	stepEtcd    = "etcd"
	stepVerify  = "verify"
	stepDelete  = "delete"
)

// agentSteps are the containers that run a Tend agent and write a Result;
// the others (etcdutl, etcd) write none.
var agentSteps = map[string]bool{stepBackup: true, stepFetch: true, stepVerify: true, stepDelete: true}

// Files on the scratch volume that the steps of one pod share.
const (
	resultFile    = podspec.ScratchDir + "/backup.json"
	snapshotFile  = podspec.ScratchDir + "/snapshot.db"
	verifyDataDir = podspec.ScratchDir + "/data"
)

// The throwaway etcd of the verification listens on loopback only.
const (
	verifyClientURL = "http://127.0.0.1:2379"
	verifyPeerURL   = "http://127.0.0.1:2380"
	verifyMetrics   = "http://127.0.0.1:2381"
	verifyCluster   = "verify=" + verifyPeerURL
	// verifyQuota is the throwaway etcd's backend quota, 8 GiB, etcd's
	// largest recommended: a restored store of any supported size fits.
	verifyQuota = "8589934592"
)

// rootPasswordKey is the key of the root password in the cluster's root
// Secret (etcdnames.RootSecretName).
const rootPasswordKey = "password"

// Volumes of the Jobs' pods.
const (
	volumeScratch    = "scratch"
	volumeConnection = "connection"
	volumeClientTLS  = "client-tls"
)

// Job components, the app.kubernetes.io/component label.
const (
	componentBackup = "backup"
	componentDelete = "delete"
)

// backupBackoffLimit is how many times a backup pod is retried after a
// failure that a retry may fix (exit code 1); a terminal one (exit code 2)
// fails the Job at once.
const backupBackoffLimit = 2

// BackupJobName is the Job that takes and verifies backup b.
func BackupJobName(b *etcdv1alpha1.EtcdBackup) string { return b.Name + "-backup" }

// DeleteJobName is the Job that deletes the file of a deleted backup b.
func DeleteJobName(b *etcdv1alpha1.EtcdBackup) string { return b.Name + "-delete" }

// verifyOn tells whether b's file is verified by a test restore.
func verifyOn(b *etcdv1alpha1.EtcdBackup) bool { return ptr.Deref(b.Spec.Verify, true) }

// compression is b's compression, None when unset.
func compression(b *etcdv1alpha1.EtcdBackup) etcdv1alpha1.Compression {
	if b.Spec.Compression == "" {
		return etcdv1alpha1.CompressionNone
	}
	return b.Spec.Compression
}

// location is where b's file goes, as the agents reach it.
func location(b *etcdv1alpha1.EtcdBackup) podspec.Location {
	return podspec.Destination(b.Spec.Destination, b.Namespace, b.Name, compression(b))
}

// jobLabels are on a Job of b and on its pods. They are not the members'
// labels: no Service or budget of the cluster selects these pods.
func jobLabels(b *etcdv1alpha1.EtcdBackup, component string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":        "etcd-backup",
		"app.kubernetes.io/instance":    b.Name,
		"app.kubernetes.io/component":   component,
		"app.kubernetes.io/managed-by":  "tend",
		etcdv1alpha1.LabelBackupCluster: b.Spec.ClusterRef.Name,
		etcdv1alpha1.LabelBackup:        b.Name,
	}
}

// agentContainer runs the Tend agent step name with args.
func agentContainer(image, name string, args []string, env []corev1.EnvVar, mounts []corev1.VolumeMount) corev1.Container {
	return corev1.Container{
		Name:                     name,
		Image:                    image,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Args:                     args,
		Env:                      env,
		VolumeMounts:             mounts,
		SecurityContext:          podspec.ContainerSecurity(),
		TerminationMessagePath:   agentapi.TerminationMessagePath,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
}

// etcdContainer runs a command of the etcd image. These write no Result;
// on failure their log's tail becomes the termination message.
func etcdContainer(image, name string, command []string) corev1.Container {
	return corev1.Container{
		Name:                     name,
		Image:                    image,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Command:                  command,
		VolumeMounts:             []corev1.VolumeMount{{Name: volumeScratch, MountPath: podspec.ScratchDir}},
		SecurityContext:          podspec.ContainerSecurity(),
		TerminationMessagePath:   agentapi.TerminationMessagePath,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// readOnly returns mounts mounted read-only, for the steps that only read
// the file.
func readOnly(mounts []corev1.VolumeMount) []corev1.VolumeMount {
	out := make([]corev1.VolumeMount, len(mounts))
	for i, m := range mounts {
		m.ReadOnly = true
		out[i] = m
	}
	return out
}

// backupJob is the Job that backs up c for b, as the agents' contract lays
// it out: `tend backup` alone, or with verification the steps backup,
// fetch, restore (etcdutl) and a throwaway etcd as init containers, and
// `tend verify` as the main container. It holds no credential of its own:
// it reads the cluster's connection ConfigMap, client certificate and (with
// auth) root password, and the destination's Secret. The caller sets the
// owner.
func backupJob(b *etcdv1alpha1.EtcdBackup, c *etcdv1alpha1.EtcdCluster, agentImage string) *batchv1.Job {
	loc := location(b)
	scratch := corev1.VolumeMount{Name: volumeScratch, MountPath: podspec.ScratchDir}
	cluster := []corev1.VolumeMount{
		{Name: volumeConnection, MountPath: podspec.ConnectionDir, ReadOnly: true},
		{Name: volumeClientTLS, MountPath: podspec.ClientTLSDir, ReadOnly: true},
	}
	clusterArgs := []string{"--connection-dir=" + podspec.ConnectionDir, "--client-tls-dir=" + podspec.ClientTLSDir}

	backupArgs := append([]string{stepBackup}, clusterArgs...)
	backupArgs = append(backupArgs, "--to="+loc.AgentURI)
	backupArgs = append(backupArgs, loc.Args...)
	backupArgs = append(backupArgs, "--compression="+string(compression(b)), "--owner="+string(b.UID))
	backupMounts := append(append([]corev1.VolumeMount{scratch}, cluster...), loc.Mounts...)

	spec := corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		AutomountServiceAccountToken: ptr.To(false),
		EnableServiceLinks:           ptr.To(false),
		SecurityContext:              podspec.PodSecurity(),
		Tolerations:                  c.Spec.PodTemplate.Tolerations,
		NodeSelector:                 c.Spec.PodTemplate.NodeSelector,
		Volumes: append([]corev1.Volume{
			{Name: volumeScratch, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: volumeConnection, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: etcdnames.ConnectionName(c)},
			}}},
			{Name: volumeClientTLS, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: etcdnames.ClientTLSSecret(c),
			}}},
		}, loc.Volumes...),
	}

	if !verifyOn(b) {
		spec.Containers = []corev1.Container{agentContainer(agentImage, stepBackup, backupArgs, loc.Env, backupMounts)}
	} else {
		backupArgs = append(backupArgs, "--result-file="+resultFile)
		fetchArgs := append([]string{stepFetch, "--from-result=" + resultFile}, loc.Args...)
		fetchArgs = append(fetchArgs, "--out="+snapshotFile)
		etcdImage := etcdnames.Image(c)
		restore := etcdContainer(etcdImage, stepRestore, []string{
			"/usr/local/bin/etcdutl", "snapshot", "restore", snapshotFile,
			"--data-dir=" + verifyDataDir, "--name=verify",
			"--initial-cluster=" + verifyCluster, "--initial-advertise-peer-urls=" + verifyPeerURL,
		})
		server := etcdContainer(etcdImage, stepEtcd, []string{
			"/usr/local/bin/etcd", "--name=verify", "--data-dir=" + verifyDataDir,
			"--listen-client-urls=" + verifyClientURL, "--advertise-client-urls=" + verifyClientURL,
			"--listen-peer-urls=" + verifyPeerURL, "--initial-advertise-peer-urls=" + verifyPeerURL,
			"--initial-cluster=" + verifyCluster, "--listen-metrics-urls=" + verifyMetrics,
			"--quota-backend-bytes=" + verifyQuota,
		})
		// A native sidecar: it runs beside the verify step and stops with it.
		server.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)

		var verifyEnv []corev1.EnvVar
		if c.Spec.Auth.Enabled {
			verifyEnv = []corev1.EnvVar{{Name: "ETCD_ROOT_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: etcdnames.RootSecretName(c)}, Key: rootPasswordKey,
			}}}}
		}
		verifyArgs := append([]string{stepVerify, "--local-endpoint=" + verifyClientURL}, clusterArgs...)
		verifyArgs = append(verifyArgs, "--backup-result="+resultFile)

		spec.InitContainers = []corev1.Container{
			agentContainer(agentImage, stepBackup, backupArgs, loc.Env, backupMounts),
			agentContainer(agentImage, stepFetch, fetchArgs, loc.Env, append([]corev1.VolumeMount{scratch}, readOnly(loc.Mounts)...)),
			restore,
			server,
		}
		spec.Containers = []corev1.Container{
			agentContainer(agentImage, stepVerify, verifyArgs, verifyEnv, append([]corev1.VolumeMount{scratch}, cluster...)),
		}
	}

	labels := jobLabels(b, componentBackup)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: BackupJobName(b), Namespace: b.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](backupBackoffLimit),
			PodFailurePolicy:      podspec.PodFailurePolicy(agentapi.ExitTerminal),
			ActiveDeadlineSeconds: podspec.ActiveDeadline(podspec.DataBytes(c)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       spec,
			},
		},
	}
}

// deleteJob is the Job that deletes the file of the deleted backup b:
// `tend artifact delete`, which deletes only what b (its UID) wrote and
// counts a file that is not there as deleted. It needs nothing of the
// cluster, which may be gone. It has no owner: a foreground deletion of b
// would otherwise delete it before it ran; the controller deletes it once
// it is done.
func deleteJob(b *etcdv1alpha1.EtcdBackup, agentImage string) *batchv1.Job {
	loc := location(b)
	args := []string{"artifact", "delete", "--uri=" + loc.AgentURI}
	args = append(args, loc.Args...)
	args = append(args, "--owner="+string(b.UID))
	mounts := append([]corev1.VolumeMount{{Name: volumeScratch, MountPath: podspec.ScratchDir}}, loc.Mounts...)
	labels := jobLabels(b, componentDelete)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: DeleteJobName(b), Namespace: b.Namespace, Labels: labels,
			// The UID it deletes for: a Job left by an earlier EtcdBackup of
			// the same name is not this one's.
			Annotations: map[string]string{annotationOwnerUID: string(b.UID)},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](backupBackoffLimit),
			PodFailurePolicy:      podspec.PodFailurePolicy(agentapi.ExitTerminal),
			ActiveDeadlineSeconds: podspec.ActiveDeadline(0), // it deletes one file
			// The pass that lets the backup go deletes the Job; this is for
			// a Job whose delete failed then, with no pass left to retry.
			TTLSecondsAfterFinished: ptr.To[int32](3600),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					SecurityContext:              podspec.PodSecurity(),
					Volumes: append([]corev1.Volume{
						{Name: volumeScratch, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					}, loc.Volumes...),
					Containers: []corev1.Container{agentContainer(agentImage, stepDelete, args, loc.Env, mounts)},
				},
			},
		},
	}
}

// annotationOwnerUID on a delete Job is the UID of the EtcdBackup whose
// file it deletes.
const annotationOwnerUID = "etcd.tend.dev/owner-uid"
