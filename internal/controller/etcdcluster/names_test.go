package etcdcluster

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tend-dev/tend/internal/etcdnames"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/names"
	"github.com/tend-dev/tend/internal/plugin"
)

// TestEveryDerivedNameFitsAtTheLongestClusterName builds every name that
// Tend derives from an EtcdCluster, for a cluster of the longest name its
// CRD allows and the most members, and checks each against the limit of
// the object (or label) it names. A name that does not fit makes its
// create fail on every pass: a roll, a recovery or a deletion that never
// ends.
func TestEveryDerivedNameFitsAtTheLongestClusterName(t *testing.T) {
	const longest = 52 // the EtcdCluster CRD's limit (api/etcd/v1alpha1)
	c := &etcdv1alpha1.EtcdCluster{}
	c.Name, c.Namespace, c.UID = strings.Repeat("n", longest), "ns", "0123456789abcdef-uid"
	c.Spec.Replicas = ptr.To[int32](9)
	c.Spec.Version = "v3.6.16"
	c.Spec.Backup = &etcdv1alpha1.ClusterBackup{Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "bkt"}}}
	last := int(*c.Spec.Replicas) - 1
	now := time.Date(2099, 12, 31, 23, 59, 59, 0, time.UTC)
	backup, err := plugin.BackupFor(c, "", now)
	if err != nil {
		t.Fatal(err)
	}

	const (
		label     = 63  // a label's value; also a DNS label: a Service, a pod's hostname
		subdomain = 253 // most objects' names
	)
	// revisionHash is the StatefulSet controller's <name>-<hash> label on
	// every pod, with its hash's longest form.
	const revisionHash = len("-") + 10
	for _, tc := range []struct {
		what  string
		name  string
		limit int
	}{
		{"StatefulSet (its pods' controller-revision-hash label)", statefulSetName(c) + strings.Repeat("h", revisionHash), label},
		{"PodDisruptionBudget", pdbName(c), subdomain},
		{"peer Service", peerServiceName(c), label},
		{"client Service", clientServiceName(c), label},
		{"member pod (hostname)", memberName(c, last), label},
		{"member volume claim", pvcName(c, last), subdomain},
		{"init Job", initJobName(c), names.Job},
		{"restore Job", restoreJobName(c, last), names.Job},
		{"roll check Job", checkJobName(c, strings.Repeat("f", 64)), names.Job},
		{"recovery Job", recoverJobName(c, now), names.Job},
		{"quorum-loss EtcdRestore", quorumLossRestoreName(c, now), names.EtcdRestore},
		{"final EtcdBackup", FinalBackupName(c), names.EtcdBackup},
		{"pre-upgrade EtcdBackup", upgradeBackupName(c), names.EtcdBackup},
		{"kubectl tend backup's EtcdBackup", backup.Name, names.EtcdBackup},
		{"archive Deployment (its ReplicaSets' <name>-<hash>)", archiveDeploymentName(c) + strings.Repeat("h", revisionHash), subdomain},
		{"archive base EtcdBackup", archiveBaseName(c, math.MaxInt32, 0), names.EtcdBackup},
		{"archive base EtcdBackup that retention took", archiveBaseName(c, math.MaxInt32, math.MaxInt), names.EtcdBackup},
		{"final snapshot claim", finalSnapshotClaimName(c), subdomain},
		{"pre-upgrade backups claim", upgradeBackupClaimName(c), subdomain},
		{"CA Secret", caSecretName(c), subdomain},
		{"server TLS Secret", etcdnames.ServerSecretName(c), subdomain},
		{"peer TLS Secret", etcdnames.PeerSecretName(c), subdomain},
		{"client TLS Secret", etcdnames.ClientSecretName(c), subdomain},
		{"root Secret", etcdnames.RootSecretName(c), subdomain},
		{"connection ConfigMap", etcdnames.ConnectionName(c), subdomain},
		{"cluster label", labels(c)[LabelCluster], label},
	} {
		t.Run(tc.what, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(len(tc.name)).To(BeNumerically("<=", tc.limit), "%s %q", tc.what, tc.name)
			if tc.limit == label || tc.limit <= names.Job {
				g.Expect(validation.IsDNS1123Label(tc.name)).To(BeEmpty(), "%q", tc.name)
			} else {
				g.Expect(validation.IsDNS1123Subdomain(tc.name)).To(BeEmpty(), "%q", tc.name)
			}
		})
	}

	// The quorum-loss EtcdRestore's own Jobs fit too.
	g := NewWithT(t)
	rs := &etcdv1alpha1.EtcdRestore{}
	rs.Name = quorumLossRestoreName(c, now)
	g.Expect(len(restoreRunJob(rs, last))).To(BeNumerically("<=", names.Job))
	g.Expect(len(restoreCheckJob(rs))).To(BeNumerically("<=", names.Job))
	restore, err := plugin.RestoreFor(c.Name, completeBackup(backup), "", now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(restore.Name)).To(BeNumerically("<=", names.EtcdRestore), "kubectl tend restore's EtcdRestore %q", restore.Name)
}

// completeBackup is b as a Complete backup, which a restore takes.
func completeBackup(b *etcdv1alpha1.EtcdBackup) *etcdv1alpha1.EtcdBackup {
	b = b.DeepCopy()
	b.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.BackupComplete, Status: metav1.ConditionTrue, Reason: "Test"}}
	return b
}
