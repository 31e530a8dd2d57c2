package etcdcluster

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

func testCluster(mutate func(*etcdv1alpha1.EtcdClusterSpec)) *etcdv1alpha1.EtcdCluster {
	c := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "db", UID: "uid-1"},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](3), Version: "v3.6.16"},
	}
	if mutate != nil {
		mutate(&c.Spec)
	}
	return c
}

func envOf(sts *appsv1.StatefulSet) map[string]string {
	out := map[string]string{}
	for _, e := range sts.Spec.Template.Spec.Containers[0].Env {
		out[e.Name] = e.Value
	}
	return out
}

func TestQuorum(t *testing.T) {
	g := NewWithT(t)
	for n, want := range map[int32]int32{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 9: 5} {
		g.Expect(quorum(n)).To(Equal(want), "n=%d", n)
	}
}

func TestStatefulSet(t *testing.T) {
	g := NewWithT(t)
	c := testCluster(nil)
	sts := statefulSet(c, 3, Bootstrap{Members: []string{"main-0", "main-1", "main-2"}, State: "new"})

	g.Expect(sts.Name).To(Equal("main"))
	g.Expect(*sts.Spec.Replicas).To(Equal(int32(3)))
	g.Expect(sts.Spec.ServiceName).To(Equal("main-peer"))
	g.Expect(sts.Spec.UpdateStrategy.Type).To(Equal(appsv1.OnDeleteStatefulSetStrategyType), "Tend orders every restart")
	for k, v := range sts.Spec.Selector.MatchLabels {
		g.Expect(sts.Spec.Template.Labels).To(HaveKeyWithValue(k, v), "the selector selects the template")
	}
	pod := sts.Spec.Template.Spec
	g.Expect(pod.Containers[0].Image).To(Equal("gcr.io/etcd-development/etcd:v3.6.16"))
	g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(*pod.Containers[0].SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))

	env := envOf(sts)
	g.Expect(env["ETCD_INITIAL_CLUSTER"]).To(Equal(
		"main-0=https://main-0.main-peer.db.svc.cluster.local:2380,main-1=https://main-1.main-peer.db.svc.cluster.local:2380,main-2=https://main-2.main-peer.db.svc.cluster.local:2380"))
	g.Expect(env["ETCD_INITIAL_CLUSTER_STATE"]).To(Equal("new"))
	g.Expect(env["ETCD_INITIAL_CLUSTER_TOKEN"]).To(Equal("uid-1"))
	g.Expect(env["ETCD_ADVERTISE_CLIENT_URLS"]).To(Equal("https://$(POD_NAME).main-peer.db.svc.cluster.local:2379"))
	g.Expect(env["ETCD_CLIENT_CERT_AUTH"]).To(Equal("true"))
	g.Expect(env).NotTo(HaveKey("ETCD_QUOTA_BACKEND_BYTES"))

	g.Expect(sts.Spec.VolumeClaimTemplates).To(HaveLen(1))
	claim := sts.Spec.VolumeClaimTemplates[0]
	g.Expect(claim.Spec.Resources.Requests.Storage().String()).To(Equal("1Gi"))
	g.Expect(claim.Spec.StorageClassName).To(BeNil())
}

// TestJoinCheck: every member pod checks, before etcd starts, that an empty
// data directory is not a member that lost its data; the check is told
// the same bootstrap settings as etcd, and neither it nor Tend's image
// changes the members' revision (a new Tend restarts no member for it).
func TestJoinCheck(t *testing.T) {
	g := NewWithT(t)
	c := testCluster(nil)
	boot := Bootstrap{Members: []string{"main-0", "main-1"}, State: "existing"}
	sts := memberStatefulSet(c, 2, boot, "example.com/tend:v1")
	pod := sts.Spec.Template.Spec
	g.Expect(pod.InitContainers).To(HaveLen(1))
	check := pod.InitContainers[0]
	g.Expect(check.Name).To(Equal(joinCheckContainer))
	g.Expect(check.Image).To(Equal("example.com/tend:v1"))
	g.Expect(check.Command).To(ContainElements("join-check", "--data-dir=/var/lib/etcd", "--name=$(POD_NAME)",
		"--peer-url=https://$(POD_NAME).main-peer.db.svc.cluster.local:2380", "--initial-cluster=$(ETCD_INITIAL_CLUSTER)",
		"--state=$(ETCD_INITIAL_CLUSTER_STATE)"))
	checkEnv := map[string]string{}
	for _, e := range check.Env {
		checkEnv[e.Name] = e.Value
	}
	env := envOf(sts)
	g.Expect(checkEnv).To(HaveKeyWithValue("ETCD_INITIAL_CLUSTER", env["ETCD_INITIAL_CLUSTER"]))
	g.Expect(checkEnv).To(HaveKeyWithValue("ETCD_INITIAL_CLUSTER_STATE", "existing"))

	rev := sts.Spec.Template.Annotations[etcdv1alpha1.AnnotationMemberRevision]
	g.Expect(memberStatefulSet(c, 2, boot, "example.com/tend:v2").Spec.Template.Annotations).To(
		HaveKeyWithValue(etcdv1alpha1.AnnotationMemberRevision, rev), "another Tend image")
	without := sts.Spec.Template.DeepCopy()
	without.Spec.InitContainers = nil
	g.Expect(revisionOf(*without)).To(Equal(rev), "the check is not part of what members run")
}

func TestStatefulSetOptions(t *testing.T) {
	g := NewWithT(t)
	c := testCluster(func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Image = "registry.example/etcd:custom"
		s.Storage = etcdv1alpha1.Storage{Size: ptr.To(resource.MustParse("8Gi")), StorageClassName: ptr.To("fast")}
		s.Options = etcdv1alpha1.Options{
			QuotaBackendBytes: ptr.To(resource.MustParse("2Gi")), AutoCompactionMode: "periodic", AutoCompactionRetention: "1h",
			HeartbeatIntervalMillis: ptr.To[int32](100), ElectionTimeoutMillis: ptr.To[int32](1000), SnapshotCount: ptr.To[int64](5000),
		}
		s.PodTemplate = etcdv1alpha1.PodTemplate{
			Labels: map[string]string{"team": "db", LabelCluster: "spoofed"}, NodeSelector: map[string]string{"disk": "ssd"},
			Affinity: &corev1.Affinity{},
		}
	})
	sts := statefulSet(c, 5, Bootstrap{Members: []string{"main-0"}, State: "existing"})
	g.Expect(sts.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.example/etcd:custom"))
	g.Expect(*sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName).To(Equal("fast"))
	g.Expect(sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String()).To(Equal("8Gi"))
	env := envOf(sts)
	g.Expect(env).To(HaveKeyWithValue("ETCD_QUOTA_BACKEND_BYTES", "2147483648"))
	g.Expect(env).To(HaveKeyWithValue("ETCD_AUTO_COMPACTION_MODE", "periodic"))
	g.Expect(env).To(HaveKeyWithValue("ETCD_AUTO_COMPACTION_RETENTION", "1h"))
	g.Expect(env).To(HaveKeyWithValue("ETCD_HEARTBEAT_INTERVAL", "100"))
	g.Expect(env).To(HaveKeyWithValue("ETCD_ELECTION_TIMEOUT", "1000"))
	g.Expect(env).To(HaveKeyWithValue("ETCD_SNAPSHOT_COUNT", "5000"))
	g.Expect(env).To(HaveKeyWithValue("ETCD_INITIAL_CLUSTER_STATE", "existing"))
	labels := sts.Spec.Template.Labels
	g.Expect(labels).To(HaveKeyWithValue("team", "db"))
	g.Expect(labels).To(HaveKeyWithValue(LabelCluster, "main"), "user labels cannot break the selector")
	g.Expect(sts.Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue("disk", "ssd"))
	g.Expect(sts.Spec.Template.Spec.Affinity).To(Equal(&corev1.Affinity{}), "the user's affinity replaces the default")
}

func TestStatefulSetEphemeral(t *testing.T) {
	g := NewWithT(t)
	sts := statefulSet(testCluster(func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.Ephemeral = true }), 1,
		Bootstrap{Members: []string{"main-0"}, State: "new"})
	g.Expect(sts.Spec.VolumeClaimTemplates).To(BeEmpty())
	var data *corev1.Volume
	for i, v := range sts.Spec.Template.Spec.Volumes {
		if v.Name == dataVolume {
			data = &sts.Spec.Template.Spec.Volumes[i]
		}
	}
	g.Expect(data).NotTo(BeNil())
	g.Expect(data.EmptyDir).NotTo(BeNil())
}

func TestServicesAndBudget(t *testing.T) {
	g := NewWithT(t)
	c := testCluster(func(s *etcdv1alpha1.EtcdClusterSpec) { s.Replicas = ptr.To[int32](5) })
	peer := peerService(c)
	g.Expect(peer.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
	g.Expect(peer.Spec.PublishNotReadyAddresses).To(BeTrue(), "members must find each other before they are ready")
	client := clientService(c)
	g.Expect(client.Spec.ClusterIP).To(BeEmpty())
	g.Expect(client.Spec.PublishNotReadyAddresses).To(BeFalse())
	g.Expect(client.Spec.Ports).To(HaveLen(1))
	g.Expect(clientEndpoint(c)).To(Equal("https://main-client.db.svc:2379"))
	pdb := podDisruptionBudget(c, 3)
	g.Expect(pdb.Spec.MinAvailable.IntValue()).To(Equal(3), "a quorum of 5 stays up")
}

func TestStatefulSetSkipsPeerReverseDNSPerVersion(t *testing.T) {
	g := NewWithT(t)
	for version, key := range map[string]string{
		"v3.6.16": "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION",
		"v3.7.0":  "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION",
		"v3.5.35": "ETCD_EXPERIMENTAL_PEER_SKIP_CLIENT_SAN_VERIFICATION",
	} {
		c := testCluster(func(s *etcdv1alpha1.EtcdClusterSpec) { s.Version = version })
		env := envOf(statefulSet(c, 3, Bootstrap{Members: []string{"main-0"}, State: "new"}))
		g.Expect(env).To(HaveKeyWithValue(key, "true"), version)
	}
}

func TestBudgetCountsMembersAboutToLeave(t *testing.T) {
	g := NewWithT(t)
	c := testCluster(nil) // 3 wanted
	g.Expect(podDisruptionBudget(c, 5).Spec.MinAvailable.IntValue()).To(Equal(3), "scaling in from 5")
	g.Expect(podDisruptionBudget(c, 1).Spec.MinAvailable.IntValue()).To(Equal(2), "scaling out from 1")
	g.Expect(podDisruptionBudget(c, 0).Spec.MinAvailable.IntValue()).To(Equal(2), "nothing observed yet")
}

func TestQuotaFitsTheVolume(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		name  string
		spec  func(*etcdv1alpha1.EtcdClusterSpec)
		quota string // "" for etcd's default
	}{
		{name: "1Gi volume", spec: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.Size = ptr.To(resource.MustParse("1Gi")) }, quota: "805306368"},
		{name: "8Gi volume keeps etcd's 2Gi", spec: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.Size = ptr.To(resource.MustParse("8Gi")) }},
		{name: "ephemeral", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Storage.Size, s.Storage.Ephemeral = ptr.To(resource.MustParse("1Gi")), true
		}},
		{name: "the user's", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Storage.Size, s.Options.QuotaBackendBytes = ptr.To(resource.MustParse("1Gi")), ptr.To(resource.MustParse("100Mi"))
		}, quota: "104857600"},
	} {
		env := envOf(statefulSet(testCluster(tc.spec), 3, Bootstrap{Members: []string{"main-0"}, State: "new"}))
		if tc.quota == "" {
			g.Expect(env).NotTo(HaveKey("ETCD_QUOTA_BACKEND_BYTES"), tc.name)
			continue
		}
		g.Expect(env).To(HaveKeyWithValue("ETCD_QUOTA_BACKEND_BYTES", tc.quota), tc.name)
	}
}

func TestInitJob(t *testing.T) {
	for _, tc := range []struct {
		name  string
		auth  bool
		steps []string
	}{
		{name: "without auth", steps: []string{"health"}},
		{name: "with auth", auth: true, steps: []string{"health", "root-login"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := testCluster(func(s *etcdv1alpha1.EtcdClusterSpec) { s.Auth.Enabled = tc.auth })
			job := initJob(c)
			g.Expect(job.Name).To(Equal("main-init"))
			pod := job.Spec.Template.Spec
			var names []string
			for _, step := range pod.InitContainers {
				names = append(names, step.Name)
				g.Expect(step.Image).To(Equal("gcr.io/etcd-development/etcd:v3.6.16"))
				g.Expect(step.Command[0]).To(Equal("/usr/local/bin/etcdctl"), "the image has no shell")
				g.Expect(step.Command).NotTo(ContainElement("--cluster"), "members' own names may not resolve yet")
				g.Expect(*step.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
				env := map[string]string{}
				for _, e := range step.Env {
					env[e.Name] = e.Value
				}
				g.Expect(env).To(HaveKeyWithValue("ETCDCTL_ENDPOINTS", "https://main-client.db.svc:2379"))
				g.Expect(env).To(HaveKeyWithValue("ETCDCTL_CERT", clientTLSDir+"/tls.crt"))
			}
			g.Expect(names).To(Equal(tc.steps))
			g.Expect(pod.Containers).To(HaveLen(1))
			g.Expect(pod.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
			g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
			g.Expect(pod.Volumes[0].Secret.SecretName).To(Equal("main-client-tls"))
			for k, v := range selector(c) {
				g.Expect(job.Spec.Template.Labels[k]).NotTo(Equal(v), "the Services and budget must not select the Job's pod (%s)", k)
			}
			if tc.auth {
				login := pod.InitContainers[1]
				for _, arg := range login.Command {
					g.Expect(arg).NotTo(ContainSubstring("password"), "the password stays out of the command line")
				}
				env := map[string]corev1.EnvVar{}
				for _, e := range login.Env {
					env[e.Name] = e
				}
				g.Expect(env["ETCDCTL_USER"].Value).To(Equal("root"))
				g.Expect(env["ETCDCTL_PASSWORD"].ValueFrom.SecretKeyRef.Name).To(Equal("main-root"))
				g.Expect(env["ETCDCTL_PASSWORD"].ValueFrom.SecretKeyRef.Key).To(Equal(rootPasswordKey))
			}
		})
	}
}
