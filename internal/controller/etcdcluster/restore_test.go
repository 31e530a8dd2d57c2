package etcdcluster

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

func TestRestoreJob(t *testing.T) {
	cases := map[string]struct {
		src        etcdv1alpha1.RestoreSource
		wantFetch  []string
		wantVolume string
		wantEnv    bool
	}{
		"s3 with credentials and a checksum": {
			src: etcdv1alpha1.RestoreSource{
				S3: &etcdv1alpha1.S3Location{Bucket: "bk", Key: "db/x.db.gz", Endpoint: "http://s3.local:9000", Region: "eu-west-1",
					ForcePathStyle: true, CredentialsSecretRef: &corev1.LocalObjectReference{Name: "creds"}},
				Compression: etcdv1alpha1.CompressionGzip, SHA256: strings.Repeat("a", 64),
			},
			wantFetch: []string{"fetch", "--from=s3://bk/db/x.db.gz", "--compression=Gzip", "--out=/scratch/snapshot.db",
				"--sha256=" + strings.Repeat("a", 64), "--s3-endpoint=http://s3.local:9000", "--s3-region=eu-west-1", "--s3-force-path-style"},
			wantEnv: true,
		},
		"a file on a volume, read-only, no checksum": {
			src:        etcdv1alpha1.RestoreSource{Volume: &etcdv1alpha1.VolumeLocation{ClaimName: "snaps", Path: "/old/final.db"}},
			wantFetch:  []string{"fetch", "--from=file:///backup/old/final.db", "--compression=None", "--out=/scratch/snapshot.db"},
			wantVolume: "snaps",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c := testCluster(nil)
			loc := podspec.Source(tc.src)
			job := restoreJob(c, 1, &restoreSource{loc: loc, sha256: tc.src.SHA256, compression: tc.src.Compression}, "tend:test")
			g.Expect(job.Name).To(Equal("main-restore-1"))
			pod := job.Spec.Template.Spec
			g.Expect(pod.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
			g.Expect(*pod.AutomountServiceAccountToken).To(BeFalse())
			g.Expect(job.Spec.PodFailurePolicy.Rules[0].Action).To(Equal(batchv1.PodFailurePolicyActionFailJob))
			g.Expect(job.Spec.PodFailurePolicy.Rules[0].OnExitCodes.Values).To(ConsistOf(int32(agentapi.ExitTerminal)))
			// The pod must not look like a member to the Services.
			g.Expect(job.Spec.Template.Labels).NotTo(HaveKey(LabelCluster))

			names := []string{}
			for _, ic := range pod.InitContainers {
				names = append(names, ic.Name)
			}
			g.Expect(names).To(Equal([]string{"prepare", "fetch", "restore"}))
			prepare, fetch, restore := pod.InitContainers[0], pod.InitContainers[1], pod.InitContainers[2]
			g.Expect(prepare.Command).To(Equal([]string{"/tend", "restore", "prepare", "--data-dir=/var/lib/etcd", "--id=uid-1"}))
			g.Expect(fetch.Image).To(Equal("tend:test"))
			g.Expect(fetch.Command[1:]).To(Equal(tc.wantFetch))
			g.Expect(fetch.TerminationMessagePath).To(Equal(agentapi.TerminationMessagePath))
			g.Expect(restore.Image).To(Equal("gcr.io/etcd-development/etcd:v3.6.16"))
			g.Expect(restore.Command).To(ContainElements(
				"--name=main-1",
				"--initial-cluster="+initialCluster(c, []string{"main-0", "main-1", "main-2"}),
				"--initial-cluster-token=uid-1",
				"--initial-advertise-peer-urls=https://main-1.main-peer.db.svc.cluster.local:2380",
				"--data-dir=/var/lib/etcd/.tend-restore",
				"--bump-revision=1000000000",
				"--mark-compacted",
			))
			g.Expect(pod.Containers[0].Command).To(Equal([]string{"/tend", "restore", "install", "--data-dir=/var/lib/etcd", "--id=uid-1"}))

			g.Expect(pod.Volumes[0].PersistentVolumeClaim.ClaimName).To(Equal("data-main-1"))
			if tc.wantVolume != "" {
				g.Expect(pod.Volumes).To(HaveLen(3))
				g.Expect(pod.Volumes[2].PersistentVolumeClaim.ClaimName).To(Equal(tc.wantVolume))
				g.Expect(pod.Volumes[2].PersistentVolumeClaim.ReadOnly).To(BeTrue())
				g.Expect(fetch.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "backup", MountPath: "/backup", ReadOnly: true}))
			}
			if tc.wantEnv {
				g.Expect(fetch.Env).To(HaveLen(3))
				g.Expect(fetch.Env[0].ValueFrom.SecretKeyRef.Name).To(Equal("creds"))
			} else {
				g.Expect(fetch.Env).To(BeEmpty())
			}
			for _, ctr := range append(pod.InitContainers, pod.Containers...) {
				g.Expect(*ctr.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue(), ctr.Name)
				g.Expect(ctr.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: dataVolume, MountPath: dataDir}), ctr.Name)
			}
		})
	}
}

func TestMemberClaimMatchesTheStatefulSetsTemplate(t *testing.T) {
	g := NewWithT(t)
	c := testCluster(func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.StorageClassName = ptr.To("fast") })
	claim := memberClaim(c, 2)
	tmpl := statefulSet(c, 3, Bootstrap{State: "new"}).Spec.VolumeClaimTemplates[0]
	g.Expect(claim.Name).To(Equal("data-main-2"))
	g.Expect(claim.Labels).To(Equal(tmpl.Labels))
	g.Expect(claim.Labels).To(HaveKeyWithValue(labelClusterUID, "uid-1"))
	g.Expect(claim.Spec).To(Equal(tmpl.Spec))
}

func TestStaleVolumes(t *testing.T) {
	c := testCluster(nil)
	pvc := func(name string, labels map[string]string, deleting bool) corev1.PersistentVolumeClaim {
		p := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	ours := map[string]string{LabelCluster: "main", labelClusterUID: "uid-1"}
	older := map[string]string{LabelCluster: "main", labelClusterUID: "uid-0"}
	unmarked := map[string]string{LabelCluster: "main"}
	cases := map[string]struct {
		pvcs []corev1.PersistentVolumeClaim
		want []string
	}{
		"none":                           {},
		"our own claims":                 {pvcs: []corev1.PersistentVolumeClaim{pvc("data-main-0", ours, false)}},
		"an older cluster's claim":       {pvcs: []corev1.PersistentVolumeClaim{pvc("data-main-0", older, false)}, want: []string{"data-main-0"}},
		"a claim from before the mark":   {pvcs: []corev1.PersistentVolumeClaim{pvc("data-main-4", unmarked, false)}, want: []string{"data-main-4"}},
		"one being deleted":              {pvcs: []corev1.PersistentVolumeClaim{pvc("data-main-0", older, true)}},
		"another cluster's or no member": {pvcs: []corev1.PersistentVolumeClaim{pvc("data-mainx-0", older, false), pvc("main-final-snapshot", unmarked, false)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(staleVolumes(c, tc.pvcs)).To(Equal(tc.want))
		})
	}
}
