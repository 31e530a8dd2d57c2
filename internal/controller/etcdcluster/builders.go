package etcdcluster

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tend-dev/tend/internal/etcdnames"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/podspec"
)

// Paths inside a member container.
const (
	dataDir      = "/var/lib/etcd"
	serverTLSDir = "/etc/etcd/tls/server"
	peerTLSDir   = "/etc/etcd/tls/peer"
	dataVolume   = "data"
)

func replicas(c *etcdv1alpha1.EtcdCluster) int32 { return ptr.Deref(c.Spec.Replicas, 3) }

// quorum is the number of voting members that must agree.
func quorum(n int32) int32 { return n/2 + 1 }

func meta(c *etcdv1alpha1.EtcdCluster, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: labels(c)}
}

// peerService is the headless Service that gives each member a stable DNS
// name. It publishes members before they are ready: they must find each
// other to become ready at all.
func peerService(c *etcdv1alpha1.EtcdCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: meta(c, peerServiceName(c)),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 selector(c),
			Ports: []corev1.ServicePort{
				{Name: "client", Port: clientPort, TargetPort: intstr.FromInt32(clientPort), Protocol: corev1.ProtocolTCP},
				{Name: "peer", Port: peerPort, TargetPort: intstr.FromInt32(peerPort), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// clientService is the Service that clients use; it selects ready members
// only.
func clientService(c *etcdv1alpha1.EtcdCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: meta(c, clientServiceName(c)),
		Spec: corev1.ServiceSpec{
			Selector: selector(c),
			Ports: []corev1.ServicePort{
				{Name: "client", Port: clientPort, TargetPort: intstr.FromInt32(clientPort), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// podDisruptionBudget lets voluntary disruptions (drains) take members down
// only while a quorum stays up: a quorum of members, the spec's number or
// the number that exist, whichever is larger (while scaling in, the members
// about to leave still count).
func podDisruptionBudget(c *etcdv1alpha1.EtcdCluster, members int32) *policyv1.PodDisruptionBudget {
	minAvailable := intstr.FromInt32(quorum(max(replicas(c), members)))
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: meta(c, pdbName(c)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     &metav1.LabelSelector{MatchLabels: selector(c)},
		},
	}
}

// claimSpec is the spec of a member's volume claim, and of the claim of
// a final snapshot: a member's volume holds the database and more.
func claimSpec(c *etcdv1alpha1.EtcdCluster) corev1.PersistentVolumeClaimSpec {
	size := storageQuantity(c)
	return corev1.PersistentVolumeClaimSpec{
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		StorageClassName: c.Spec.Storage.StorageClassName,
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
	}
}

// storageQuantity is spec.storage.size, or its default.
func storageQuantity(c *etcdv1alpha1.EtcdCluster) resource.Quantity {
	if c.Spec.Storage.Size != nil {
		return *c.Spec.Storage.Size
	}
	return resource.MustParse("1Gi")
}

// initialCluster renders etcd's --initial-cluster for the named members.
func initialCluster(c *etcdv1alpha1.EtcdCluster, members []string) string {
	parts := make([]string, 0, len(members))
	for _, m := range members {
		parts = append(parts, m+"="+peerURL(c, m))
	}
	return strings.Join(parts, ",")
}

// Bootstrap says how a new member's data directory starts: the members it
// should know and whether the cluster is new. etcd reads it only when the
// data directory is empty, so changing it never disturbs running members.
type Bootstrap struct {
	Members []string
	State   string // "new" or "existing"
}

// statefulSet builds the members' StatefulSet. Restarts are ordered by Tend
// (OnDelete), and membership is changed through etcd before a pod is added
// or removed, so the StatefulSet only ever runs pods that etcd expects.
func statefulSet(c *etcdv1alpha1.EtcdCluster, size int32, boot Bootstrap) *appsv1.StatefulSet {
	return memberStatefulSet(c, size, boot, podspec.DefaultAgentImage)
}

// memberStatefulSet is statefulSet with the members' join check run from
// agentImage.
func memberStatefulSet(c *etcdv1alpha1.EtcdCluster, size int32, boot Bootstrap, agentImage string) *appsv1.StatefulSet {
	podLabels := maps.Clone(c.Spec.PodTemplate.Labels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	maps.Copy(podLabels, labels(c))
	volumes, claims := memberVolumes(c)
	sts := &appsv1.StatefulSet{
		ObjectMeta: meta(c, statefulSetName(c)),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(size),
			ServiceName:         peerServiceName(c),
			Selector:            &metav1.LabelSelector{MatchLabels: selector(c)},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				// Tend deletes a removed member's volume itself, after etcd
				// has forgotten the member.
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			VolumeClaimTemplates: claims,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: maps.Clone(c.Spec.PodTemplate.Annotations)},
				Spec: corev1.PodSpec{
					Affinity:                      memberAffinity(c),
					Tolerations:                   c.Spec.PodTemplate.Tolerations,
					NodeSelector:                  c.Spec.PodTemplate.NodeSelector,
					PriorityClassName:             c.Spec.PodTemplate.PriorityClassName,
					TerminationGracePeriodSeconds: ptr.To[int64](30),
					AutomountServiceAccountToken:  ptr.To(false),
					SecurityContext:               podspec.PodSecurity(),
					InitContainers:                []corev1.Container{joinCheck(c, boot, agentImage)},
					Containers:                    []corev1.Container{etcdContainer(c, boot)},
					Volumes:                       volumes,
				},
			},
		},
	}
	t := &sts.Spec.Template
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	t.Annotations[etcdv1alpha1.AnnotationMemberRevision] = revisionOf(*t)
	return sts
}

// etcdContainer is a member's etcd, set by environment variables.
func etcdContainer(c *etcdv1alpha1.EtcdCluster, boot Bootstrap) corev1.Container {
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(metricsPort)}},
			PeriodSeconds:    period,
			TimeoutSeconds:   5,
			FailureThreshold: failures,
		}
	}
	return corev1.Container{
		Name:            "etcd",
		Image:           etcdnames.Image(c),
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"/usr/local/bin/etcd"},
		Env:             memberEnv(c, boot),
		Ports: []corev1.ContainerPort{
			{Name: "client", ContainerPort: clientPort},
			{Name: "peer", ContainerPort: peerPort},
			{Name: "metrics", ContainerPort: metricsPort},
		},
		Resources: c.Spec.Resources,
		// /readyz fails while the member has no leader or
		// lags; /livez only when the server is wedged.
		ReadinessProbe: probe("/readyz", 5, 3),
		LivenessProbe:  probe("/livez", 10, 6),
		StartupProbe:   probe("/livez", 5, 60),
		VolumeMounts: []corev1.VolumeMount{
			{Name: dataVolume, MountPath: dataDir},
			{Name: "server-tls", MountPath: serverTLSDir, ReadOnly: true},
			{Name: "peer-tls", MountPath: peerTLSDir, ReadOnly: true},
		},
		SecurityContext: podspec.ContainerSecurity(),
	}
}

// memberEnv is etcd's settings of a member: names and addresses, the
// bootstrap membership, TLS, and the spec's tuning.
func memberEnv(c *etcdv1alpha1.EtcdCluster, boot Bootstrap) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "ETCD_NAME", Value: "$(POD_NAME)"},
		{Name: "ETCD_DATA_DIR", Value: dataDir},
		{Name: "ETCD_INITIAL_CLUSTER", Value: initialCluster(c, boot.Members)},
		{Name: "ETCD_INITIAL_CLUSTER_STATE", Value: boot.State},
		{Name: "ETCD_INITIAL_CLUSTER_TOKEN", Value: string(c.UID)},
		{Name: "ETCD_INITIAL_ADVERTISE_PEER_URLS", Value: fmt.Sprintf("https://%s:%d", memberHost(c, "$(POD_NAME)"), peerPort)},
		{Name: "ETCD_ADVERTISE_CLIENT_URLS", Value: fmt.Sprintf("https://%s:%d", memberHost(c, "$(POD_NAME)"), clientPort)},
		{Name: "ETCD_LISTEN_PEER_URLS", Value: fmt.Sprintf("https://0.0.0.0:%d", peerPort)},
		{Name: "ETCD_LISTEN_CLIENT_URLS", Value: fmt.Sprintf("https://0.0.0.0:%d", clientPort)},
		{Name: "ETCD_LISTEN_METRICS_URLS", Value: fmt.Sprintf("http://0.0.0.0:%d", metricsPort)},
		{Name: "ETCD_CLIENT_CERT_AUTH", Value: "true"},
		{Name: "ETCD_TRUSTED_CA_FILE", Value: serverTLSDir + "/ca.crt"},
		{Name: "ETCD_CERT_FILE", Value: serverTLSDir + "/tls.crt"},
		{Name: "ETCD_KEY_FILE", Value: serverTLSDir + "/tls.key"},
		{Name: "ETCD_PEER_CLIENT_CERT_AUTH", Value: "true"},
		{Name: "ETCD_PEER_TRUSTED_CA_FILE", Value: peerTLSDir + "/ca.crt"},
		{Name: "ETCD_PEER_CERT_FILE", Value: peerTLSDir + "/tls.crt"},
		{Name: "ETCD_PEER_KEY_FILE", Value: peerTLSDir + "/tls.key"},
		// A peer is trusted for its certificate, signed by the cluster's
		// own CA. etcd would also match the connecting IP against the
		// certificate's names by reverse DNS, which fails for a new pod
		// while the cluster DNS still caches an older answer for its IP.
		{Name: skipPeerSANVerification(c), Value: "true"},
	}
	env = append(env, tuning(c)...)

	return env
}

// memberVolumes are the members' volumes: their certificates, and their
// data in a claim per member, or in emptyDir with ephemeral storage.
func memberVolumes(c *etcdv1alpha1.EtcdCluster) ([]corev1.Volume, []corev1.PersistentVolumeClaim) {
	secrets := tlsSecretsOf(c)
	volumes := []corev1.Volume{
		{Name: "server-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secrets.Server}}},
		{Name: "peer-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secrets.Peer}}},
	}
	var claims []corev1.PersistentVolumeClaim
	if c.Spec.Storage.Ephemeral {
		volumes = append(volumes, corev1.Volume{Name: dataVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	} else {
		claims = []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{Name: dataVolume, Labels: claimLabels(c)},
			Spec:       claimSpec(c),
		}}
	}

	return volumes, claims
}

// memberAffinity is the spec's affinity, else a preference for one member
// per node.
func memberAffinity(c *etcdv1alpha1.EtcdCluster) *corev1.Affinity {
	affinity := c.Spec.PodTemplate.Affinity
	if affinity == nil {
		affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100,
				PodAffinityTerm: corev1.PodAffinityTerm{
					TopologyKey:   corev1.LabelHostname,
					LabelSelector: &metav1.LabelSelector{MatchLabels: selector(c)},
				},
			}},
		}}
	}

	return affinity
}

// joinCheckContainer is the member pods' init container that keeps a
// member which lost its data from rejoining under its old identity.
const joinCheckContainer = "join-check"

// joinCheck runs `tend join-check` before etcd: a member that starts with
// an empty data directory while the cluster exists would rejoin raft under
// its old member ID with an empty log, and vote: it could elect a member
// that lacks committed writes, or outvote the one that has them. etcd
// checks this only for a new cluster. The check lets an empty member
// start only as one that has never run (a learner Tend just added); the
// others wait, not running, until Tend replaces them.
func joinCheck(c *etcdv1alpha1.EtcdCluster, boot Bootstrap, agentImage string) corev1.Container {
	env := []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "ETCD_INITIAL_CLUSTER", Value: initialCluster(c, boot.Members)},
		{Name: "ETCD_INITIAL_CLUSTER_STATE", Value: boot.State},
	}
	args := []string{"join-check",
		"--data-dir=" + dataDir,
		"--name=$(POD_NAME)",
		fmt.Sprintf("--peer-url=https://%s:%d", memberHost(c, "$(POD_NAME)"), peerPort),
		"--initial-cluster=$(ETCD_INITIAL_CLUSTER)",
		"--state=$(ETCD_INITIAL_CLUSTER_STATE)",
		"--peer-tls-dir=" + peerTLSDir,
	}
	return agentStep(agentImage, joinCheckContainer, args, env, []corev1.VolumeMount{
		{Name: dataVolume, MountPath: dataDir},
		{Name: "peer-tls", MountPath: peerTLSDir, ReadOnly: true},
	})
}

// bootstrapEnv are the settings that tell a member with an empty data
// directory how to join. They follow the membership, and etcd ignores them
// once it has data: a change of them is no reason to restart a member.
var bootstrapEnv = []string{"ETCD_INITIAL_CLUSTER", "ETCD_INITIAL_CLUSTER_STATE"}

// revisionOf hashes what a member pod of template t runs, less the
// bootstrap settings: the pods of one revision run the same etcd the same
// way. It depends only on the cluster's spec and Tend's builders, so a new
// Tend whose builders make the same pods restarts nothing.
func revisionOf(t corev1.PodTemplateSpec) string {
	t = *t.DeepCopy()
	delete(t.Annotations, etcdv1alpha1.AnnotationMemberRevision)
	// The join check runs only when a pod starts, and comes from Tend's
	// image: a new Tend is no reason to restart a member.
	t.Spec.InitContainers = slices.DeleteFunc(t.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == joinCheckContainer })
	for i := range t.Spec.Containers {
		for j, e := range t.Spec.Containers[i].Env {
			if slices.Contains(bootstrapEnv, e.Name) {
				t.Spec.Containers[i].Env[j].Value = ""
			}
		}
	}
	return hashOf(t)
}

// hashOf is a short hash of v's JSON. Every API type marshals.
func hashOf(v any) string {
	b, _ := json.Marshal(v)
	h := fnv.New64a()
	_, _ = h.Write(b)
	return strconv.FormatUint(h.Sum64(), 16)
}

// memberRevision is the revision that c's members should run.
func memberRevision(c *etcdv1alpha1.EtcdCluster) string {
	return statefulSet(c, 0, Bootstrap{}).Spec.Template.Annotations[etcdv1alpha1.AnnotationMemberRevision]
}

// skipPeerSANVerification is the setting that turns the reverse DNS check
// of peers off: etcd v3.6 renamed v3.5's experimental one.
func skipPeerSANVerification(c *etcdv1alpha1.EtcdCluster) string {
	if minorOf(cmp.Or(c.Spec.Version, etcdv1alpha1.DefaultVersion)) < 6 {
		return "ETCD_EXPERIMENTAL_PEER_SKIP_CLIENT_SAN_VERIFICATION"
	}
	return "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION"
}

// etcdDefaultQuota is etcd's own --quota-backend-bytes default.
const etcdDefaultQuota = 2 << 30

// quotaOf is the database size at which etcd raises NOSPACE:
// spec.options.quotaBackendBytes, else three quarters of a volume smaller
// than etcd's default quota, else etcd's default.
func quotaOf(c *etcdv1alpha1.EtcdCluster) int64 {
	switch o := c.Spec.Options; {
	case o.QuotaBackendBytes != nil:
		return o.QuotaBackendBytes.Value()
	case !c.Spec.Storage.Ephemeral && c.Spec.Storage.Size != nil && c.Spec.Storage.Size.Value()*3/4 < etcdDefaultQuota:
		// The database must reach its quota (and raise NOSPACE, which
		// keeps it readable) before the volume fills (which stops the
		// member): leave a quarter of the volume for the WAL and
		// snapshots.
		return c.Spec.Storage.Size.Value() * 3 / 4
	}
	return etcdDefaultQuota
}

// tuning turns the spec's options into etcd's environment settings.
func tuning(c *etcdv1alpha1.EtcdCluster) []corev1.EnvVar {
	o := c.Spec.Options
	var env []corev1.EnvVar
	add := func(name, value string) { env = append(env, corev1.EnvVar{Name: name, Value: value}) }
	if q := quotaOf(c); o.QuotaBackendBytes != nil || q != etcdDefaultQuota {
		add("ETCD_QUOTA_BACKEND_BYTES", strconv.FormatInt(q, 10))
	}
	if o.AutoCompactionMode != "" {
		add("ETCD_AUTO_COMPACTION_MODE", string(o.AutoCompactionMode))
	}
	if o.AutoCompactionRetention != "" {
		add("ETCD_AUTO_COMPACTION_RETENTION", o.AutoCompactionRetention)
	}
	if o.HeartbeatIntervalMillis != nil {
		add("ETCD_HEARTBEAT_INTERVAL", strconv.Itoa(int(*o.HeartbeatIntervalMillis)))
	}
	if o.ElectionTimeoutMillis != nil {
		add("ETCD_ELECTION_TIMEOUT", strconv.Itoa(int(*o.ElectionTimeoutMillis)))
	}
	if o.SnapshotCount != nil {
		add("ETCD_SNAPSHOT_COUNT", strconv.FormatInt(*o.SnapshotCount, 10))
	}
	return env
}

// claimLabels are the labels of the members' volume claims.
func claimLabels(c *etcdv1alpha1.EtcdCluster) map[string]string {
	l := labels(c)
	l[labelClusterUID] = string(c.UID)
	return l
}

// memberClaim is the i-th member's volume claim as the StatefulSet would
// make it, for a restore to fill before the StatefulSet exists.
func memberClaim(c *etcdv1alpha1.EtcdCluster, i int) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: pvcName(c, i), Namespace: c.Namespace, Labels: claimLabels(c)},
		Spec:       claimSpec(c),
	}
}
