//go:build e2e

package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tend-dev/tend/internal/agent"
	"github.com/tend-dev/tend/internal/agentapi"
	"github.com/tend-dev/tend/internal/podspec"
)

// B9's pods. They run the agents and etcd's tools as the contract between
// the agents and the controllers lays them out (the same commands, mounts
// and security contexts as the controllers' Jobs), as bare pods with
// restartPolicy Never: a failure fails the measurement rather than being
// retried, and no Job controller stands between create and start.

// Mounts of B9's pods, as the controllers' Jobs have them.
const (
	b9Scratch    = "scratch"
	b9Connection = "connection"
	b9ClientTLS  = "client-tls"
	// b9Snapshot is the snapshot file on the scratch volume.
	b9Snapshot = podspec.ScratchDir + "/snapshot.db"
	// b9ResultFile is the backup's --result-file, for the verify steps.
	b9ResultFile = podspec.ScratchDir + "/backup.json"
	// b9Owner is the --owner of every backup B9 takes.
	b9Owner = "tend-bench-b9"
)

// b9Pods builds the pods of one source cluster's measurements.
type b9Pods struct {
	ns        string
	tendImage string
	etcdImage string
	// cluster is the source EtcdCluster's name; member the endpoint of
	// its one member, as the connection ConfigMap gives it.
	cluster, member string
	// connection and clientTLS name its connection ConfigMap and its
	// client certificate Secret.
	connection, clientTLS string
	s3                    b9S3
}

// b9S3 is where backups go: moto's S3.
type b9S3 struct {
	endpoint, region, bucket string
}

// args are an agent's flags for the store, as podspec.S3 makes them.
func (s b9S3) args() []string {
	return []string{"--s3-endpoint=" + s.endpoint, "--s3-region=" + s.region, "--s3-force-path-style"}
}

// env are moto's fake credentials.
func (s b9S3) env() []corev1.EnvVar {
	return []corev1.EnvVar{{Name: podspec.EnvAccessKeyID, Value: "test"}, {Name: podspec.EnvSecretAccessKey, Value: "test"}}
}

func (s b9S3) uri(key string) string { return "s3://" + s.bucket + "/" + key }

func (p *b9Pods) pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: name, Labels: map[string]string{"app.kubernetes.io/name": "tend-bench-b9"}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			SecurityContext:               podspec.PodSecurity(),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Volumes: []corev1.Volume{
				{Name: b9Scratch, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: b9Connection, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: p.connection}}}},
				{Name: b9ClientTLS, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: p.clientTLS}}},
			},
		},
	}
}

var (
	b9ScratchMount = corev1.VolumeMount{Name: b9Scratch, MountPath: podspec.ScratchDir}
	b9ClusterMount = []corev1.VolumeMount{
		{Name: b9Connection, MountPath: podspec.ConnectionDir, ReadOnly: true},
		{Name: b9ClientTLS, MountPath: podspec.ClientTLSDir, ReadOnly: true},
	}
	b9ClusterArgs = []string{"--connection-dir=" + podspec.ConnectionDir, "--client-tls-dir=" + podspec.ClientTLSDir}
)

// agentContainer runs a step of the tend binary, writing its Result.
func (p *b9Pods) agentContainer(name string, args []string, env []corev1.EnvVar, mounts ...corev1.VolumeMount) corev1.Container {
	return corev1.Container{
		Name:                     name,
		Image:                    p.tendImage,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Command:                  append([]string{podspec.AgentBinary}, args...),
		Env:                      env,
		VolumeMounts:             mounts,
		SecurityContext:          podspec.ContainerSecurity(),
		TerminationMessagePath:   agentapi.TerminationMessagePath,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
}

// etcdContainer runs a command of the etcd image.
func (p *b9Pods) etcdContainer(name string, command ...string) corev1.Container {
	return corev1.Container{
		Name:                     name,
		Image:                    p.etcdImage,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Command:                  command,
		VolumeMounts:             append([]corev1.VolumeMount{b9ScratchMount}, b9ClusterMount...),
		SecurityContext:          podspec.ContainerSecurity(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// etcdctlPod is the anchor of the throughput figures: etcdctl snapshot
// save from the member, with the client certificate, to a file on the
// node's disk (an emptyDir); then etcdutl snapshot status, for the
// snapshot's size.
func (p *b9Pods) etcdctlPod(name string) *corev1.Pod {
	pod := p.pod(name)
	tls := podspec.ClientTLSDir + "/"
	pod.Spec.InitContainers = []corev1.Container{p.etcdContainer("save", "/usr/local/bin/etcdctl",
		"--endpoints="+p.member, "--cacert="+tls+"ca.crt", "--cert="+tls+corev1.TLSCertKey, "--key="+tls+corev1.TLSPrivateKeyKey,
		"snapshot", "save", b9Snapshot)}
	pod.Spec.Containers = []corev1.Container{p.etcdContainer("status", "/usr/local/bin/etcdutl", "snapshot", "status", b9Snapshot, "--write-out=json")}
	return pod
}

// backupArgs are tend backup's, to key in the bucket.
func (p *b9Pods) backupArgs(key string, c agent.Compression) []string {
	args := append([]string{"backup"}, b9ClusterArgs...)
	args = append(args, "--to="+p.s3.uri(key))
	args = append(args, p.s3.args()...)
	return append(args, "--compression="+string(c), "--owner="+b9Owner)
}

// fileBackupPod runs tend backup --compression=None to a file on the
// scratch volume, where etcdctlPod saves its snapshot: the agent without
// S3.
func (p *b9Pods) fileBackupPod(name string) *corev1.Pod {
	pod := p.pod(name)
	args := append([]string{"backup"}, b9ClusterArgs...)
	args = append(args, "--to=file://"+b9Snapshot, "--compression=None", "--owner="+b9Owner)
	pod.Spec.Containers = []corev1.Container{p.agentContainer(agentapi.OpBackup, args, nil, append([]corev1.VolumeMount{b9ScratchMount}, b9ClusterMount...)...)}
	return pod
}

// backupPod runs tend backup to key. With verify, it is the backup pod of
// an EtcdBackup with verification as the contract lays it out: backup,
// fetch, etcdutl snapshot restore and a throwaway etcd (a native sidecar)
// as init containers, then tend verify.
func (p *b9Pods) backupPod(name, key string, c agent.Compression, verify bool) *corev1.Pod {
	pod := p.pod(name)
	mounts := append([]corev1.VolumeMount{b9ScratchMount}, b9ClusterMount...)
	backup := p.agentContainer(agentapi.OpBackup, p.backupArgs(key, c), p.s3.env(), mounts...)
	if !verify {
		pod.Spec.Containers = []corev1.Container{backup}
		return pod
	}
	backup.Command = append(backup.Command, "--result-file="+b9ResultFile)
	fetch := append([]string{"fetch", "--from-result=" + b9ResultFile}, p.s3.args()...)
	fetch = append(fetch, "--out="+b9Snapshot)
	const (
		client = "http://127.0.0.1:2379"
		peer   = "http://127.0.0.1:2380"
		data   = podspec.ScratchDir + "/data"
	)
	restore := p.etcdContainer("restore", "/usr/local/bin/etcdutl", "snapshot", "restore", b9Snapshot,
		"--data-dir="+data, "--name=verify", "--initial-cluster=verify="+peer, "--initial-advertise-peer-urls="+peer)
	server := p.etcdContainer("etcd", "/usr/local/bin/etcd", "--name=verify", "--data-dir="+data,
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=verify="+peer, "--listen-metrics-urls=http://127.0.0.1:2381",
		"--quota-backend-bytes=8589934592")
	server.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	verifyArgs := append([]string{"verify", "--local-endpoint=" + client}, b9ClusterArgs...)
	verifyArgs = append(verifyArgs, "--backup-result="+b9ResultFile)
	pod.Spec.InitContainers = []corev1.Container{
		backup,
		p.agentContainer(agentapi.OpFetch, fetch, p.s3.env(), b9ScratchMount),
		restore,
		server,
	}
	pod.Spec.Containers = []corev1.Container{p.agentContainer(agentapi.OpVerify, verifyArgs, nil, mounts...)}
	return pod
}

// etcdutlPod is the anchor of the restore figure: tend fetch puts the
// backup's file on the scratch volume (not timed), then etcdutl snapshot
// restore makes each member's data of a cluster of members, all at once,
// with the flags of Tend's restore Jobs.
func (p *b9Pods) etcdutlPod(name, key, sha string, members int) *corev1.Pod {
	pod := p.pod(name)
	fetch := append([]string{"fetch", "--from=" + p.s3.uri(key), "--compression=None", "--sha256=" + sha, "--out=" + b9Snapshot}, p.s3.args()...)
	pod.Spec.InitContainers = []corev1.Container{p.agentContainer(agentapi.OpFetch, fetch, p.s3.env(), b9ScratchMount)}
	var initial []string
	for i := range members {
		initial = append(initial, fmt.Sprintf("m%d=https://m%d.anchor:2380", i, i))
	}
	for i := range members {
		m := fmt.Sprintf("m%d", i)
		pod.Spec.Containers = append(pod.Spec.Containers, p.etcdContainer("restore-"+strconv.Itoa(i),
			"/usr/local/bin/etcdutl", "snapshot", "restore", b9Snapshot,
			"--name="+m, "--initial-cluster="+strings.Join(initial, ","), "--initial-cluster-token=anchor",
			"--initial-advertise-peer-urls=https://"+m+".anchor:2380", "--data-dir="+podspec.ScratchDir+"/"+m,
			"--bump-revision=1000000000", "--mark-compacted"))
	}
	return pod
}

// runPod creates pod and waits until it has ended, then returns it; a pod
// that failed, or did not end within timeout, fails b with the logs of its
// containers.
func (r *rig) runPod(b *testing.B, pod *corev1.Pod, timeout time.Duration) *corev1.Pod {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), timeout)
	defer cancel()
	c := r.cluster.Client
	if err := c.Create(ctx, pod); err != nil {
		b.Fatalf("creating the pod %s: %v", pod.Name, err)
	}
	key := client.ObjectKeyFromObject(pod)
	for {
		if err := c.Get(ctx, key, pod); err != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			b.Fatalf("reading the pod %s: %v", pod.Name, err)
		}
		switch pod.Status.Phase {
		case corev1.PodSucceeded:
			return pod
		case corev1.PodFailed:
			b.Fatalf("the pod %s failed: %s", pod.Name, r.podReport(pod))
		}
		select {
		case <-ctx.Done():
			b.Fatalf("the pod %s did not end within %s: %s", pod.Name, timeout, r.podReport(pod))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// podReport says how each container of pod ended, with its log's end.
func (r *rig) podReport(pod *corev1.Pod) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "phase %s %s", pod.Status.Phase, pod.Status.Message)
	for _, st := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		fmt.Fprintf(&sb, "\n--- %s: ", st.Name)
		switch s := st.State; {
		case s.Terminated != nil:
			fmt.Fprintf(&sb, "exit code %d (%s) %s", s.Terminated.ExitCode, s.Terminated.Reason, s.Terminated.Message)
		case s.Waiting != nil:
			fmt.Fprintf(&sb, "waiting: %s %s", s.Waiting.Reason, s.Waiting.Message)
		default:
			sb.WriteString("running")
		}
		if log, err := r.containerLog(pod, st.Name, false); err == nil {
			if lines := strings.Split(strings.TrimSpace(log), "\n"); len(lines) > 20 {
				log = strings.Join(lines[len(lines)-20:], "\n")
			}
			fmt.Fprintf(&sb, "\n%s", log)
		}
	}
	return sb.String()
}

// containerLog is the log of a container of pod, with the kubelet's
// timestamps when stamped.
func (r *rig) containerLog(pod *corev1.Pod, container string, stamped bool) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data, err := r.cluster.Clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name,
		&corev1.PodLogOptions{Container: container, Timestamps: stamped}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("the log of %s/%s %s: %w", pod.Namespace, pod.Name, container, err)
	}
	return string(data), nil
}

// mustLog is containerLog, failing b on an error.
func (r *rig) mustLog(b *testing.B, pod *corev1.Pod, container string, stamped bool) string {
	b.Helper()
	log, err := r.containerLog(pod, container, stamped)
	if err != nil {
		b.Fatal(err)
	}
	return log
}

// result is the Result of the agent step that container ran, from its
// termination message.
func result(b *testing.B, pod *corev1.Pod, container, op string) agentapi.Result {
	b.Helper()
	for _, st := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if st.Name != container {
			continue
		}
		if st.State.Terminated == nil {
			b.Fatalf("pod %s: the container %s has not ended", pod.Name, container)
		}
		r, err := agentapi.ParseResult(st.State.Terminated.Message, op)
		if err != nil {
			b.Fatalf("pod %s, container %s: %v", pod.Name, container, err)
		}
		if r.Error != "" {
			b.Fatalf("pod %s, container %s: the step reports an error: %s", pod.Name, container, r.Error)
		}
		return r
	}
	b.Fatalf("pod %s has no container %s", pod.Name, container)
	return agentapi.Result{}
}

// etcdutlSpan is when the etcdutl snapshot restore in container began and
// ended its work, by the kubelet's stamps of its log lines.
func (r *rig) etcdutlSpan(b *testing.B, pod *corev1.Pod, container string) (time.Time, time.Time) {
	b.Helper()
	start, end, err := stampedSpan(r.mustLog(b, pod, container, true), etcdutlRestoring, etcdutlRestored)
	if err != nil {
		b.Fatalf("pod %s, container %s: %v", pod.Name, container, err)
	}
	return start, end
}

// deletePod deletes pod and waits, at most a minute, until it is gone, so
// that its scratch volume is freed before the next measurement.
func (r *rig) deletePod(b *testing.B, pod *corev1.Pod) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := r.cluster.Client
	if err := c.Delete(ctx, pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		b.Fatalf("deleting the pod %s: %v", pod.Name, err)
	}
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		switch {
		case apierrors.IsNotFound(err):
			return
		case ctx.Err() != nil:
			b.Fatalf("the pod %s was not gone within a minute: %v", pod.Name, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
