//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// One EtcdCluster, on the real node, goes through what a user would put it
// through, in order: it is created and becomes Available; an application pod
// writes and reads through the client Service with the client certificate;
// it scales 3→5→3 under a writer without losing an acknowledged write; a
// deleted pod comes back as the same member with its data; a member whose
// volume is lost is replaced by a new member of the same name; and a paused
// cluster holds a scale-out until it is unpaused.
//
// The steps share the cluster to keep the run short (every member start
// costs seconds on this node), so each starts from the state the previous
// one left, and the first failure ends the test: what follows would only
// fail for the same reason.
func TestEtcdCluster(t *testing.T) {
	t.Parallel()
	e := &etcdTest{EtcdCluster: &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace(t), Name: "kv"},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas: ptr.To[int32](3),
			Version:  cluster.Settings.EtcdVersion,
		},
	}}
	for _, step := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"BecomesAvailable", e.becomesAvailable},
		{"AppPodWritesAndReadsWithTheClientCertificate", e.appPodWritesAndReads},
		{"ScalesOutAndInWithoutLosingAcknowledgedWrites", e.scalesUnderWrites},
		{"DeletedPodComesBackWithItsData", e.deletedPodComesBack},
		{"MemberWithALostVolumeIsReplaced", e.lostVolumeIsReplaced},
		{"PauseHoldsScalingUntilUnpaused", e.pauseHoldsScaling},
	} {
		if !t.Run(step.name, step.run) {
			t.Fatalf("%s failed; the later steps, which need the cluster it left, did not run", step.name)
		}
	}
}

// A new 3-member cluster becomes Available, its status names its members,
// its leader and version, and its Secrets, Services, budget, StatefulSet and
// init Job exist and belong to it.
func (e *etcdTest) becomesAvailable(t *testing.T) {
	ctx := t.Context()
	if err := cluster.Client.Create(ctx, e.EtcdCluster); err != nil {
		t.Fatal(err)
	}
	// kubectl wait, as scripts and GitOps tools do, then all that Ready
	// vouches for.
	cluster.WaitReady(t, framework.DefaultTimeout, e.Namespace, "etcdcluster/"+e.Name)
	got := e.waitReady(t, 3)

	version := cluster.Settings.EtcdVersion
	if got.Status.CurrentVersion != version {
		t.Errorf("status.currentVersion is %q, want %q", got.Status.CurrentVersion, version)
	}
	for _, m := range got.Status.Members {
		if m.Version != version {
			t.Errorf("member %s runs version %q, want %q", m.Name, m.Version, version)
		}
	}
	if want := fmt.Sprintf("https://kv-client.%s.svc:2379", e.Namespace); got.Status.ClientEndpoint != want {
		t.Errorf("status.clientEndpoint is %q, want %q", got.Status.ClientEndpoint, want)
	}
	if got.Status.Selector == "" {
		t.Error("status.selector is empty; the /scale subresource needs it")
	}
	if got.Status.Phase != etcdv1alpha1.PhaseRunning {
		t.Errorf("status.phase is %q, want %s", got.Status.Phase, etcdv1alpha1.PhaseRunning)
	}
	e.checkObjects(t, got)

	// kubectl get shows what the printer columns promise:
	// NAME READY MEMBERS VERSION LEADER AGE.
	fields := strings.Fields(cluster.Kubectl(t, "-n", e.Namespace, "get", "etcd", e.Name, "--no-headers"))
	if len(fields) < 5 || fields[1] != "True" || fields[2] != "3" || fields[3] != version || fields[4] != got.Status.Leader {
		t.Errorf("kubectl get etcd shows %q, want Ready True, 3 members, version %s, leader %s", fields, version, got.Status.Leader)
	}
	e.waitEvents(t, "CertificatesIssued", "InitJobCreated")
}

// checkObjects checks the objects that the contract lists for a 3-member
// cluster: their names, kinds, labels and owner, and what clients rely on.
func (e *etcdTest) checkObjects(t *testing.T, ec *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	ctx := t.Context()
	get := func(obj client.Object, name string) bool {
		t.Helper()
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, obj); err != nil {
			t.Errorf("%T %s: %v", obj, name, err)
			return false
		}
		if obj.GetLabels()[etcdClusterLabel] != e.Name {
			t.Errorf("%T %s has labels %v, want %s=%s", obj, name, obj.GetLabels(), etcdClusterLabel, e.Name)
		}
		if ref := metav1.GetControllerOf(obj); ref == nil || ref.UID != ec.UID || ref.Kind != "EtcdCluster" {
			t.Errorf("%T %s has controller %v, want the EtcdCluster %s (uid %s)", obj, name, ref, ec.Name, ec.UID)
		}
		return true
	}

	for _, name := range []string{"kv-ca", "kv-server-tls", "kv-peer-tls", "kv-client-tls"} {
		s := &corev1.Secret{}
		if !get(s, name) {
			continue
		}
		if s.Type != corev1.SecretTypeTLS {
			t.Errorf("Secret %s has type %s, want %s", name, s.Type, corev1.SecretTypeTLS)
		}
		for _, key := range []string{"ca.crt", corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
			if len(s.Data[key]) == 0 {
				t.Errorf("Secret %s has no %s", name, key)
			}
		}
		cert, err := parseCert(s.Data[corev1.TLSCertKey])
		if err != nil {
			t.Errorf("Secret %s: %v", name, err)
			continue
		}
		switch name {
		case "kv-client-tls":
			if cert.Subject.CommonName != "root" {
				t.Errorf("the client certificate's CN is %q, want root", cert.Subject.CommonName)
			}
		case "kv-server-tls":
			for _, host := range []string{
				"kv-client." + e.Namespace + ".svc", "kv-client." + e.Namespace + ".svc.cluster.local",
				"kv-0.kv-peer." + e.Namespace + ".svc", "kv-8.kv-peer." + e.Namespace + ".svc.cluster.local", "localhost", "127.0.0.1",
			} {
				if err := cert.VerifyHostname(host); err != nil {
					t.Errorf("the server certificate does not cover %s: %v", host, err)
				}
			}
		}
	}

	peer, svc := &corev1.Service{}, &corev1.Service{}
	if get(peer, "kv-peer") {
		if peer.Spec.ClusterIP != corev1.ClusterIPNone || !peer.Spec.PublishNotReadyAddresses || !hasPorts(peer, 2379, 2380) {
			t.Errorf("the peer Service has clusterIP %q, publishNotReadyAddresses %t, ports %v; want a headless Service that publishes members before they are ready, on 2379 and 2380",
				peer.Spec.ClusterIP, peer.Spec.PublishNotReadyAddresses, peer.Spec.Ports)
		}
	}
	if get(svc, "kv-client") {
		if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.ClusterIP == corev1.ClusterIPNone || !hasPorts(svc, 2379) {
			t.Errorf("the client Service is %s with clusterIP %q and ports %v; want a ClusterIP Service on 2379", svc.Spec.Type, svc.Spec.ClusterIP, svc.Spec.Ports)
		}
	}
	if pdb := (&policyv1.PodDisruptionBudget{}); get(pdb, "kv") {
		if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 2 {
			t.Errorf("the PodDisruptionBudget has minAvailable %v, want 2, the quorum of 3", pdb.Spec.MinAvailable)
		}
	}
	if sts := (&appsv1.StatefulSet{}); get(sts, "kv") {
		if sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType || sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
			t.Errorf("the StatefulSet has updateStrategy %s and podManagementPolicy %s, want OnDelete and Parallel", sts.Spec.UpdateStrategy.Type, sts.Spec.PodManagementPolicy)
		}
	}
	if job := (&batchv1.Job{}); get(job, "kv-init") && !jobComplete(job) {
		t.Errorf("the init Job has not completed (%+v), yet the cluster is Available", job.Status)
	}
	for i := range 3 {
		pvc := &corev1.PersistentVolumeClaim{}
		name := fmt.Sprintf("data-kv-%d", i)
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, pvc); err != nil {
			t.Errorf("PersistentVolumeClaim %s: %v", name, err)
			continue
		}
		if pvc.Status.Phase != corev1.ClaimBound || ptr.Deref(pvc.Spec.StorageClassName, "") != cluster.Settings.StorageClass {
			t.Errorf("PersistentVolumeClaim %s is %s with class %v, want Bound with the default class %s", name, pvc.Status.Phase, pvc.Spec.StorageClassName, cluster.Settings.StorageClass)
		}
	}
}

// An application pod reaches the cluster as the contract tells applications
// to: through the client Service's DNS name, with the client certificate
// mounted from kv-client-tls, as a non-root user under the restricted pod
// security profile, with etcdctl from the etcd image (which has no shell).
func (e *etcdTest) appPodWritesAndReads(t *testing.T) {
	ctx := t.Context()
	value := fmt.Sprintf("written-by-an-app-pod-%d", rand.Int64())
	job := e.etcdctlJob("app", "app/greeting", value)
	if err := cluster.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	cluster.WaitForJobComplete(t, e.Namespace, job.Name)
	pods := &corev1.PodList{}
	if err := cluster.Client.List(ctx, pods, client.InNamespace(e.Namespace), client.MatchingLabels{"batch.kubernetes.io/job-name": job.Name}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("the Job's pods: %d, %v; want 1", len(pods.Items), err)
	}
	if got := strings.TrimSpace(cluster.PodLogs(t, e.Namespace, pods.Items[0].Name, "get")); got != value {
		t.Errorf("etcdctl get printed %q, want %q", got, value)
	}

	// The value is in the cluster, not just in the pod's imagination.
	cli := cluster.EtcdClient(t, e.clientTLS(t), e.hosts(t), e.serviceEndpoint())
	callCtx, cancel := context.WithTimeout(ctx, etcdCallTimeout)
	defer cancel()
	resp, err := cli.Get(callCtx, "app/greeting")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != value {
		t.Errorf("the cluster holds %v under app/greeting, want %q", resp.Kvs, value)
	}
}

// etcdctlJob returns a Job whose init container puts key=value and whose
// container "get" then prints the value, both with etcdctl through the
// client Service with the client certificate.
func (e *etcdTest) etcdctlJob(name, key, value string) *batchv1.Job {
	const tlsDir = "/etc/etcd/client-tls"
	etcdctl := func(container string, args ...string) corev1.Container {
		return corev1.Container{
			Name:            container,
			Image:           cluster.Settings.EtcdImage,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command: append([]string{
				"/usr/local/bin/etcdctl",
				"--endpoints=" + fmt.Sprintf("https://kv-client.%s.svc:2379", e.Namespace),
				"--cacert=" + tlsDir + "/ca.crt", "--cert=" + tlsDir + "/tls.crt", "--key=" + tlsDir + "/tls.key",
				"--dial-timeout=10s", "--command-timeout=30s",
			}, args...),
			VolumeMounts: []corev1.VolumeMount{{Name: "client-tls", MountPath: tlsDir, ReadOnly: true}},
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				ReadOnlyRootFilesystem:   ptr.To(true),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		}
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy:                 corev1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				AutomountServiceAccountToken:  ptr.To(false),
				SecurityContext: &corev1.PodSecurityContext{
					RunAsNonRoot:   ptr.To(true),
					RunAsUser:      ptr.To[int64](65532),
					RunAsGroup:     ptr.To[int64](65532),
					FSGroup:        ptr.To[int64](65532),
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				InitContainers: []corev1.Container{etcdctl("put", "put", key, value)},
				Containers:     []corev1.Container{etcdctl("get", "get", key, "--print-value-only")},
				Volumes: []corev1.Volume{{
					Name:         "client-tls",
					VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "kv-client-tls"}},
				}},
			}},
		},
	}
}

// Scaling out to 5 and back to 3 (through the /scale subresource, as
// kubectl scale does) goes through learners and leaves 5, then 3, healthy
// voters, while a client writes without pause: every write that etcd
// acknowledged is still there, every member holds the same data, and the
// removed members' volumes are deleted.
func (e *etcdTest) scalesUnderWrites(t *testing.T) {
	w := startWriter(t, cluster.EtcdClient(t, e.clientTLS(t), e.hosts(t), e.serviceEndpoint()))

	cluster.Kubectl(t, "-n", e.Namespace, "scale", "etcdcluster/"+e.Name, "--replicas=5")
	e.waitReady(t, 5)
	t.Logf("Writes acknowledged so far: %d", w.Acked())
	e.checkSameData(t)

	cluster.Kubectl(t, "-n", e.Namespace, "scale", "etcdcluster/"+e.Name, "--replicas=3")
	e.waitReady(t, 3)
	e.checkAcked(t, e.stopWriter(t, w))
	e.checkSameData(t)

	// The removed members' volumes go too, once etcd has forgotten them.
	for _, name := range []string{"data-kv-3", "data-kv-4"} {
		cluster.WaitFor(t, framework.DefaultTimeout, "the deletion of PersistentVolumeClaim "+name, func(ctx context.Context) (bool, error) {
			err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, &corev1.PersistentVolumeClaim{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
	}
	e.waitEvents(t, "MemberAdded", "MemberPromoted", "MemberRemoved")
}

// A member pod deleted by hand, its volume kept, comes back as the same
// member (same ID) with its data, and the cluster is whole again. The
// member deleted is the leader, so leadership moves too.
func (e *etcdTest) deletedPodComesBack(t *testing.T) {
	ctx := t.Context()
	before := e.waitReady(t, 3)
	victim := before.Status.Leader
	id := memberID(t, before, victim)
	pod, pvc := e.podAndClaim(t, victim)
	value := e.put(t, "heal/pod-deleted")

	if err := cluster.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	e.waitPodReplaced(t, pod)
	after := e.waitReady(t, 3)
	if got := memberID(t, after, victim); got != id {
		t.Errorf("member %s has ID %x after its pod came back, want its old ID %x: it should have kept its data and identity", victim, got, id)
	}
	if _, now := e.podAndClaim(t, victim); now.UID != pvc.UID {
		t.Errorf("the claim %s was re-created (uid %s, was %s)", pvc.Name, now.UID, pvc.UID)
	}
	e.waitMemberHolds(t, victim, "heal/pod-deleted", value)
}

// A member whose pod and volume are both lost cannot rejoin as itself: once
// it has been unhealthy for spec.memberReplacement.unhealthyFor, Tend
// replaces it with a new member of the same name (a new ID), which gets the
// data from the others and becomes a healthy voter.
func (e *etcdTest) lostVolumeIsReplaced(t *testing.T) {
	ctx := t.Context()
	e.patchSpec(t, func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.MemberReplacement.UnhealthyFor = &metav1.Duration{Duration: 10 * time.Second}
	})
	before := e.waitReady(t, 3)
	var victim string
	for _, m := range before.Status.Members {
		if !m.Leader {
			victim = m.Name
			break
		}
	}
	id := memberID(t, before, victim)
	pod, pvc := e.podAndClaim(t, victim)
	value := e.put(t, "heal/volume-lost")

	// A claim in use stays Terminating until its pod is gone.
	if err := cluster.Client.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	cluster.WaitFor(t, 4*time.Minute, fmt.Sprintf("a new member %s in place of %x", victim, id), func(ctx context.Context) (bool, error) {
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		for _, m := range ec.Status.Members {
			if m.Name != victim {
				continue
			}
			if now, err := strconv.ParseUint(m.ID, 16, 64); err != nil || now == id || !m.Healthy || m.Learner {
				return false, fmt.Errorf("member %s is %+v", victim, m)
			}
			return true, nil
		}
		return false, fmt.Errorf("no member %s in status: %+v", victim, ec.Status.Members)
	})
	e.waitReady(t, 3)
	if _, now := e.podAndClaim(t, victim); now.UID == pvc.UID {
		t.Errorf("member %s still has the claim %s (uid %s) that was deleted", victim, pvc.Name, pvc.UID)
	}
	e.waitMemberHolds(t, victim, "heal/volume-lost", value)
	e.waitEvents(t, "ReplacingMember")

	e.patchSpec(t, func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.MemberReplacement.UnhealthyFor = &metav1.Duration{Duration: 5 * time.Minute}
	})
}

// While spec.paused is set, a scale-out changes nothing: the StatefulSet and
// etcd keep 3 members, and status says Paused. Unpaused, the cluster scales.
func (e *etcdTest) pauseHoldsScaling(t *testing.T) {
	e.waitReady(t, 3)
	e.patchSpec(t, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Paused = true })
	cluster.WaitFor(t, framework.DefaultTimeout, "status to say Paused", func(ctx context.Context) (bool, error) {
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		return hasCondition(ec, etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, etcdv1alpha1.ReasonPaused)
	})

	cluster.Kubectl(t, "-n", e.Namespace, "scale", "etcdcluster/"+e.Name, "--replicas=5")
	cluster.Consistently(t, 20*time.Second, "the paused cluster after a scale to 5", func(ctx context.Context) error {
		ec, err := e.get(ctx)
		if err != nil {
			return err
		}
		sts := &appsv1.StatefulSet{}
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: e.Name}, sts); err != nil {
			return err
		}
		if n := ptr.Deref(sts.Spec.Replicas, 1); n != 3 {
			return fmt.Errorf("the StatefulSet has %d replicas, want 3 while paused", n)
		}
		if len(ec.Status.Members) != 3 || ec.Status.Replicas != 3 {
			return fmt.Errorf("status has %d members and replicas %d, want 3 while paused: %+v", len(ec.Status.Members), ec.Status.Replicas, ec.Status.Members)
		}
		if ok, err := hasCondition(ec, etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, etcdv1alpha1.ReasonPaused); !ok {
			return err
		}
		if ok, err := hasCondition(ec, etcdv1alpha1.ConditionAvailable, metav1.ConditionTrue, etcdv1alpha1.ReasonQuorumHealthy); !ok {
			return fmt.Errorf("status is still reported while paused, so %w", err)
		}
		if ok, err := hasCondition(ec, etcdv1alpha1.ConditionReady, metav1.ConditionFalse, etcdv1alpha1.ReasonPaused); !ok {
			return fmt.Errorf("a paused cluster with a spec change is not Ready: %w", err)
		}
		return nil
	})

	e.patchSpec(t, func(s *etcdv1alpha1.EtcdClusterSpec) { s.Paused = false })
	cluster.WaitReady(t, framework.DefaultTimeout, e.Namespace, "etcdcluster/"+e.Name)
	e.waitReady(t, 5)
}

// parseCert parses the first certificate of a PEM bundle.
func parseCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

func hasPorts(svc *corev1.Service, ports ...int32) bool {
	for _, want := range ports {
		found := false
		for _, p := range svc.Spec.Ports {
			found = found || p.Port == want
		}
		if !found {
			return false
		}
	}
	return true
}

func jobComplete(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
