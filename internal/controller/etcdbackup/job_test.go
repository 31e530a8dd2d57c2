package etcdbackup

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/podspec"
)

const testImage = "example.com/tend:test"

func testBackup(mutate func(*etcdv1alpha1.EtcdBackupSpec)) *etcdv1alpha1.EtcdBackup {
	b := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly", UID: "uid-1"},
		Spec: etcdv1alpha1.EtcdBackupSpec{
			ClusterRef: etcdv1alpha1.ClusterReference{Name: "kv"},
			BackupOptions: etcdv1alpha1.BackupOptions{
				Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{
					Bucket: "backups", Prefix: "etcd/", Endpoint: "http://minio:9000", ForcePathStyle: true,
					CredentialsSecretRef: &corev1.LocalObjectReference{Name: "s3-creds"},
				}},
				Compression:    etcdv1alpha1.CompressionGzip,
				Verify:         ptr.To(true),
				ArtifactPolicy: etcdv1alpha1.ArtifactDelete,
			},
		},
	}
	if mutate != nil {
		mutate(&b.Spec)
	}
	return b
}

func testCluster(auth bool) *etcdv1alpha1.EtcdCluster {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kv"}}
	c.Spec.Version = "3.6.16"
	c.Spec.Auth.Enabled = auth
	return c
}

func containerNames(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func container(g Gomega, spec corev1.PodSpec, name string) corev1.Container {
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		if c.Name == name {
			return c
		}
	}
	g.Expect(name).To(BeEmpty(), "no container %s", name)
	return corev1.Container{}
}

func mountsOf(c corev1.Container) map[string]corev1.VolumeMount {
	out := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		out[m.MountPath] = m
	}
	return out
}

func envNames(c corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		out = append(out, e.Name)
	}
	return out
}

func TestBackupJob(t *testing.T) {
	volume := func(s *etcdv1alpha1.EtcdBackupSpec) {
		s.Destination = etcdv1alpha1.BackupDestination{Volume: &etcdv1alpha1.VolumeLocation{ClaimName: "backups", Path: "kv"}}
		s.Compression = ""
	}
	for _, tc := range []struct {
		name       string
		spec       func(*etcdv1alpha1.EtcdBackupSpec)
		auth       bool
		init, main []string
		check      func(g Gomega, spec corev1.PodSpec)
	}{
		{
			name: "S3 with verification",
			init: []string{"backup", "fetch", "restore", "etcd"}, main: []string{"verify"},
			check: func(g Gomega, spec corev1.PodSpec) {
				backup := container(g, spec, "backup")
				g.Expect(backup.Image).To(Equal(testImage))
				g.Expect(backup.Args).To(Equal([]string{
					"backup", "--connection-dir=/etc/tend/connection", "--client-tls-dir=/etc/tend/client-tls",
					"--to=s3://backups/etcd/ns/nightly.db.gz", "--s3-endpoint=http://minio:9000", "--s3-force-path-style",
					"--compression=Gzip", "--owner=uid-1", "--result-file=/scratch/backup.json",
				}))
				g.Expect(envNames(backup)).To(Equal([]string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}))
				g.Expect(backup.Env[0].ValueFrom.SecretKeyRef.Name).To(Equal("s3-creds"))

				fetch := container(g, spec, "fetch")
				g.Expect(fetch.Args).To(Equal([]string{
					"fetch", "--from-result=/scratch/backup.json", "--s3-endpoint=http://minio:9000", "--s3-force-path-style", "--out=/scratch/snapshot.db",
				}))
				g.Expect(envNames(fetch)).To(HaveLen(3))

				restore := container(g, spec, "restore")
				g.Expect(restore.Image).To(Equal("gcr.io/etcd-development/etcd:3.6.16"))
				g.Expect(restore.Command).To(Equal([]string{
					"/usr/local/bin/etcdutl", "snapshot", "restore", "/scratch/snapshot.db", "--data-dir=/scratch/data", "--name=verify",
					"--initial-cluster=verify=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
				}))
				g.Expect(restore.TerminationMessagePolicy).To(Equal(corev1.TerminationMessageFallbackToLogsOnError))

				etcd := container(g, spec, "etcd")
				g.Expect(etcd.RestartPolicy).To(Equal(ptr.To(corev1.ContainerRestartPolicyAlways)), "a native sidecar")
				g.Expect(etcd.Command).To(ContainElements("/usr/local/bin/etcd", "--listen-client-urls=http://127.0.0.1:2379", "--quota-backend-bytes=8589934592"))

				verify := container(g, spec, "verify")
				g.Expect(verify.Args).To(Equal([]string{
					"verify", "--local-endpoint=http://127.0.0.1:2379", "--connection-dir=/etc/tend/connection",
					"--client-tls-dir=/etc/tend/client-tls", "--backup-result=/scratch/backup.json",
				}))
				g.Expect(verify.Env).To(BeEmpty(), "no root password without auth")
			},
		},
		{
			name: "S3 without verification", spec: func(s *etcdv1alpha1.EtcdBackupSpec) { s.Verify = ptr.To(false) },
			main: []string{"backup"},
			check: func(g Gomega, spec corev1.PodSpec) {
				g.Expect(container(g, spec, "backup").Args).NotTo(ContainElement(HavePrefix("--result-file")))
			},
		},
		{
			name: "volume with verification and auth", spec: volume, auth: true,
			init: []string{"backup", "fetch", "restore", "etcd"}, main: []string{"verify"},
			check: func(g Gomega, spec corev1.PodSpec) {
				g.Expect(spec.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", "backups")))
				backup := container(g, spec, "backup")
				g.Expect(backup.Args).To(ContainElements("--to=file:///backup/kv/nightly.db", "--compression=None"))
				g.Expect(backup.Env).To(BeEmpty())
				g.Expect(mountsOf(backup)["/backup"].ReadOnly).To(BeFalse(), "the backup writes the file")
				g.Expect(mountsOf(container(g, spec, "fetch"))["/backup"].ReadOnly).To(BeTrue(), "the fetch only reads it")
				verify := container(g, spec, "verify")
				g.Expect(verify.Env).To(HaveLen(1))
				g.Expect(verify.Env[0].Name).To(Equal("ETCD_ROOT_PASSWORD"))
				g.Expect(verify.Env[0].ValueFrom.SecretKeyRef.Name).To(Equal("kv-root"))
				g.Expect(verify.Env[0].ValueFrom.SecretKeyRef.Key).To(Equal("password"))
			},
		},
		{
			name: "volume without verification", spec: func(s *etcdv1alpha1.EtcdBackupSpec) { volume(s); s.Verify = ptr.To(false) },
			main: []string{"backup"},
			check: func(g Gomega, spec corev1.PodSpec) {
				g.Expect(container(g, spec, "backup").Args).To(ContainElement("--to=file:///backup/kv/nightly.db"))
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := testBackup(tc.spec)
			job := backupJob(b, testCluster(tc.auth), testImage)

			g.Expect(job.Name).To(Equal("nightly-backup"))
			g.Expect(job.Namespace).To(Equal("ns"))
			g.Expect(job.Labels).To(HaveKeyWithValue("etcd.tend.dev/cluster", "kv"))
			g.Expect(job.Labels).To(HaveKeyWithValue("etcd.tend.dev/backup", "nightly"))
			g.Expect(job.Spec.Template.Labels).To(Equal(job.Labels))
			g.Expect(job.Spec.Template.Labels).NotTo(HaveKeyWithValue("app.kubernetes.io/name", "etcd"), "the members' Services must not select it")
			g.Expect(*job.Spec.BackoffLimit).To(Equal(int32(2)))
			g.Expect(job.Spec.PodFailurePolicy.Rules[0].Action).To(Equal(batchv1.PodFailurePolicyActionFailJob))
			g.Expect(job.Spec.PodFailurePolicy.Rules[0].OnExitCodes.Values).To(Equal([]int32{2}))

			spec := job.Spec.Template.Spec
			g.Expect(spec.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
			g.Expect(*spec.AutomountServiceAccountToken).To(BeFalse())
			g.Expect(*spec.SecurityContext.RunAsNonRoot).To(BeTrue())
			g.Expect(containerNames(spec.InitContainers)).To(Equal(tc.init))
			g.Expect(containerNames(spec.Containers)).To(Equal(tc.main))
			g.Expect(spec.Volumes).To(ContainElement(HaveField("VolumeSource.ConfigMap.Name", "kv-connection")))
			g.Expect(spec.Volumes).To(ContainElement(HaveField("VolumeSource.Secret.SecretName", "kv-client-tls")))
			for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
				g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue(), c.Name)
				g.Expect(c.TerminationMessagePath).To(Equal(agentapi.TerminationMessagePath), c.Name)
				if agentSteps[c.Name] {
					g.Expect(c.TerminationMessagePolicy).To(Equal(corev1.TerminationMessageReadFile), c.Name)
				}
			}
			backup := container(g, spec, "backup")
			g.Expect(mountsOf(backup)).To(HaveKey("/etc/tend/connection"))
			g.Expect(mountsOf(backup)).To(HaveKey("/etc/tend/client-tls"))
			tc.check(g, spec)
		})
	}
}

func TestDeleteJob(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spec     func(*etcdv1alpha1.EtcdBackupSpec)
		wantArgs []string
		wantEnv  int
		wantPVC  string
	}{
		{
			name:     "S3",
			wantArgs: []string{"artifact", "delete", "--uri=s3://backups/etcd/ns/nightly.db.gz", "--s3-endpoint=http://minio:9000", "--s3-force-path-style", "--owner=uid-1"},
			wantEnv:  3,
		},
		{
			name: "volume",
			spec: func(s *etcdv1alpha1.EtcdBackupSpec) {
				s.Destination = etcdv1alpha1.BackupDestination{Volume: &etcdv1alpha1.VolumeLocation{ClaimName: "backups"}}
				s.Compression = etcdv1alpha1.CompressionZstd
			},
			wantArgs: []string{"artifact", "delete", "--uri=file:///backup/nightly.db.zst", "--owner=uid-1"},
			wantPVC:  "backups",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			job := deleteJob(testBackup(tc.spec), testImage)
			g.Expect(job.Name).To(Equal("nightly-delete"))
			g.Expect(job.OwnerReferences).To(BeEmpty(), "a foreground deletion of the backup must not delete it")
			g.Expect(job.Annotations).To(HaveKeyWithValue(annotationOwnerUID, "uid-1"))
			g.Expect(job.Labels).To(HaveKeyWithValue("app.kubernetes.io/component", "delete"))
			spec := job.Spec.Template.Spec
			g.Expect(containerNames(spec.Containers)).To(Equal([]string{"delete"}))
			g.Expect(spec.Containers[0].Args).To(Equal(tc.wantArgs))
			g.Expect(spec.Containers[0].Env).To(HaveLen(tc.wantEnv))
			if tc.wantPVC != "" {
				g.Expect(spec.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", tc.wantPVC)))
			}
			for _, v := range spec.Volumes {
				g.Expect(v.Name).NotTo(Or(Equal("connection"), Equal("client-tls")), "the cluster may be gone")
			}
		})
	}
}

func TestJobNamesFitTheLimit(t *testing.T) {
	g := NewWithT(t)
	// The CRD caps an EtcdBackup's name at 56 characters; a schedule's at
	// 45, and its backups add the run's Unix time.
	b := testBackup(nil)
	b.Name = strings.Repeat("a", 56)
	g.Expect(len(BackupJobName(b))).To(BeNumerically("<=", 63))
	g.Expect(len(DeleteJobName(b))).To(BeNumerically("<=", 63))
	g.Expect(len(scheduledBackupName(strings.Repeat("s", 45), 4102444800))).To(BeNumerically("<=", 56), "until 2100")
}

// TestBackupJobsHaveDeadlines: a backup's Jobs stop at a deadline sized to
// the data they move, so a pod stuck Pending cannot hold later backups (or
// a deletion waiting on a final snapshot) for ever.
func TestBackupJobsHaveDeadlines(t *testing.T) {
	g := NewWithT(t)
	b := testBackup(nil)
	c := testCluster(false)
	g.Expect(backupJob(b, c, testImage).Spec.ActiveDeadlineSeconds).To(Equal(podspec.ActiveDeadline(podspec.DataBytes(c))))
	g.Expect(deleteJob(b, testImage).Spec.ActiveDeadlineSeconds).To(Equal(podspec.ActiveDeadline(0)))
}
