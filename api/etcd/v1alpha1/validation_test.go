package v1alpha1_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/testenv"
)

// These tests send EtcdClusters to a real apiserver, so they prove what the
// CRD's OpenAPI schema and CEL rules accept, and the messages users read.

var env = testenv.New()

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

func cluster(ns string, mutate func(*etcdv1alpha1.EtcdClusterSpec)) *etcdv1alpha1.EtcdCluster {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "etcd-"}}
	if mutate != nil {
		mutate(&c.Spec)
	}
	return c
}

func s3Dest() etcdv1alpha1.BackupDestination {
	return etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "backups", Prefix: "etcd/"}}
}

func TestDefaults(t *testing.T) {
	g := NewWithT(t)
	c := cluster(env.Namespace(t), nil)
	g.Expect(env.Client.Create(context.Background(), c)).To(Succeed())
	g.Expect(c.Spec.Replicas).To(Equal(ptr.To[int32](3)))
	g.Expect(c.Spec.Version).To(Equal(etcdv1alpha1.DefaultVersion))
	g.Expect(c.Spec.Storage.Size.String()).To(Equal("1Gi"))
	g.Expect(c.Spec.TLS.Mode).To(Equal(etcdv1alpha1.TLSAuto))
	g.Expect(c.Spec.MemberReplacement.Policy).To(Equal(etcdv1alpha1.ReplacementAuto))
	g.Expect(c.Spec.MemberReplacement.UnhealthyFor.Duration).To(Equal(5 * time.Minute))

	archived := cluster(env.Namespace(t), func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Backup = &etcdv1alpha1.ClusterBackup{Destination: s3Dest()}
		s.Archive = &etcdv1alpha1.ClusterArchive{Destination: s3Dest()}
	})
	g.Expect(env.Client.Create(context.Background(), archived)).To(Succeed())
	a := archived.Spec.Archive
	g.Expect(a.Compression).To(Equal(etcdv1alpha1.CompressionZstd))
	g.Expect(a.Segment.MaxAge.Duration).To(Equal(10 * time.Second))
	g.Expect(a.Segment.MaxBytes).To(Equal(int64(8 << 20)))
	g.Expect(a.CompactionHold.Duration).To(Equal(time.Hour))
}

// The CRD's default version and DefaultVersion both follow
// hack/versions.env, the one place where versions are pinned.
func TestDefaultVersionIsThePinnedOne(t *testing.T) {
	g := NewWithT(t)
	f, err := os.Open(filepath.Join("..", "..", "..", "hack", "versions.env"))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	pinned := ""
	for s := bufio.NewScanner(f); s.Scan(); {
		if v, ok := strings.CutPrefix(s.Text(), "ETCD_VERSION="); ok {
			pinned = v
		}
	}
	g.Expect(pinned).NotTo(BeEmpty())
	g.Expect(etcdv1alpha1.DefaultVersion).To(Equal(pinned), "api/etcd/v1alpha1.DefaultVersion and its +kubebuilder:default marker must equal ETCD_VERSION")
}

func TestValidationOnCreate(t *testing.T) {
	ns := env.Namespace(t)
	for _, tc := range []struct {
		name    string
		spec    func(*etcdv1alpha1.EtcdClusterSpec)
		wantErr string
	}{
		{name: "one member", spec: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Replicas = ptr.To[int32](1) }},
		{name: "tuned", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Options = etcdv1alpha1.Options{
				QuotaBackendBytes: ptr.To(resource.MustParse("8Gi")), AutoCompactionMode: "periodic",
				AutoCompactionRetention: "1h", HeartbeatIntervalMillis: ptr.To[int32](100),
				ElectionTimeoutMillis: ptr.To[int32](1000), SnapshotCount: ptr.To[int64](10000),
			}
		}},
		{name: "zero members", spec: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Replicas = ptr.To[int32](0) },
			wantErr: "spec.replicas in body should be greater than or equal to 1"},
		{name: "ten members", spec: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Replicas = ptr.To[int32](10) },
			wantErr: "spec.replicas in body should be less than or equal to 9"},
		{name: "not a version", spec: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Version = "latest" },
			wantErr: "spec.version in body should match"},
		{name: "provided TLS without secrets", spec: func(s *etcdv1alpha1.EtcdClusterSpec) { s.TLS.Mode = etcdv1alpha1.TLSProvided },
			wantErr: "spec.tls.secrets is required when spec.tls.mode is Provided"},
		{name: "election timeout too short", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Options.HeartbeatIntervalMillis, s.Options.ElectionTimeoutMillis = ptr.To[int32](100), ptr.To[int32](200)
		}, wantErr: "electionTimeoutMillis (default 1000) should be at least 5 times heartbeatIntervalMillis"},
		{name: "heartbeat alone too long for the default election timeout", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Options.HeartbeatIntervalMillis = ptr.To[int32](300)
		}, wantErr: "electionTimeoutMillis (default 1000) should be at least 5 times heartbeatIntervalMillis"},
		{name: "election timeout alone", spec: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Options.ElectionTimeoutMillis = ptr.To[int32](2000) }},
		{name: "replace after a minute", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.MemberReplacement.UnhealthyFor = &metav1.Duration{Duration: time.Minute}
		}},
		{name: "replace too eagerly", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.MemberReplacement.UnhealthyFor = &metav1.Duration{Duration: 5 * time.Second}
		}, wantErr: "spec.memberReplacement.unhealthyFor must be at least 10s"},
		{name: "unknown replacement policy", spec: func(s *etcdv1alpha1.EtcdClusterSpec) { s.MemberReplacement.Policy = "Sometimes" },
			wantErr: `supported values: "Auto", "Manual"`},
		{name: "compaction by retention", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Maintenance.Compaction = &etcdv1alpha1.Compaction{Retention: &metav1.Duration{Duration: 2 * time.Hour}}
		}},
		{name: "compaction by revisions and retention", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Maintenance.Compaction = &etcdv1alpha1.Compaction{Retention: &metav1.Duration{Duration: time.Hour}, Revisions: ptr.To[int64](5000)}
		}, wantErr: "set spec.maintenance.compaction.retention or revisions, not both"},
		{name: "compaction retention too short", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Maintenance.Compaction = &etcdv1alpha1.Compaction{Retention: &metav1.Duration{Duration: 30 * time.Second}}
		}, wantErr: "spec.maintenance.compaction.retention is at least 1m"},
		{name: "too few revisions kept", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Maintenance.Compaction = &etcdv1alpha1.Compaction{Revisions: ptr.To[int64](10)}
		}, wantErr: "spec.maintenance.compaction.revisions in body should be greater than or equal to 1000"},
		{name: "compaction disabled with a retention", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Maintenance.Compaction = &etcdv1alpha1.Compaction{Policy: etcdv1alpha1.CompactionDisabled, Retention: &metav1.Duration{Duration: time.Hour}}
		}, wantErr: "policy Disabled takes no retention or revisions"},
		{name: "two compactors", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Maintenance.Compaction = &etcdv1alpha1.Compaction{Retention: &metav1.Duration{Duration: time.Hour}}
			s.Options.AutoCompactionMode = "periodic"
		}, wantErr: "spec.maintenance.compaction and spec.options.autoCompactionMode both compact the history"},
		{name: "etcd's compactor alone", spec: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Options.AutoCompactionMode = "periodic" }},
		{name: "a defragmentation schedule", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Maintenance.Defragmentation = &etcdv1alpha1.Defragmentation{Schedule: "0 3 * * SUN"}
		}},
		{name: "a defragmentation schedule that is no cron line", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Maintenance.Defragmentation = &etcdv1alpha1.Defragmentation{Schedule: "every sunday"}
		}, wantErr: "the schedule must be five fields"},
		{name: "a fragmentation threshold of 100%", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Maintenance.Defragmentation = &etcdv1alpha1.Defragmentation{FragmentationPercent: ptr.To[int32](100)}
		}, wantErr: "spec.maintenance.defragmentation.fragmentationPercent in body should be less than or equal to 99"},
		{name: "an unknown NOSPACE policy", spec: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Maintenance.NoSpace = "Sometimes" },
			wantErr: `supported values: "Auto", "Manual"`},
		{name: "an archive", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Backup = &etcdv1alpha1.ClusterBackup{Destination: s3Dest()}
			s.Archive = &etcdv1alpha1.ClusterArchive{Destination: s3Dest(), Segment: etcdv1alpha1.ArchiveSegment{MaxAge: &metav1.Duration{Duration: time.Second}}}
		}},
		{name: "an archive without spec.backup", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Archive = &etcdv1alpha1.ClusterArchive{Destination: s3Dest()}
		}, wantErr: "spec.archive needs spec.backup"},
		{name: "an archive to an S3 key", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Backup = &etcdv1alpha1.ClusterBackup{Destination: s3Dest()}
			s.Archive = &etcdv1alpha1.ClusterArchive{Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "backups", Key: "one"}}}
		}, wantErr: "spec.archive.destination.s3 takes a prefix, not a key"},
		{name: "an archive to two places", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Backup = &etcdv1alpha1.ClusterBackup{Destination: s3Dest()}
			dest := s3Dest()
			dest.Volume = &etcdv1alpha1.VolumeLocation{ClaimName: "backups"}
			s.Archive = &etcdv1alpha1.ClusterArchive{Destination: dest}
		}, wantErr: "spec.archive.destination takes exactly one of s3 and volume"},
		{name: "an archive's segments of an hour", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Backup = &etcdv1alpha1.ClusterBackup{Destination: s3Dest()}
			s.Archive = &etcdv1alpha1.ClusterArchive{Destination: s3Dest(), Segment: etcdv1alpha1.ArchiveSegment{MaxAge: &metav1.Duration{Duration: time.Hour}}}
		}, wantErr: "spec.archive.segment.maxAge is 1s to 10m"},
		{name: "an archive kept for ten minutes", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Backup = &etcdv1alpha1.ClusterBackup{Destination: s3Dest()}
			s.Archive = &etcdv1alpha1.ClusterArchive{Destination: s3Dest(), Retention: &metav1.Duration{Duration: 10 * time.Minute}}
		}, wantErr: "spec.archive.retention is at least 1h"},
		{name: "an archive kept for a week", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Backup = &etcdv1alpha1.ClusterBackup{Destination: s3Dest()}
			s.Archive = &etcdv1alpha1.ClusterArchive{Destination: s3Dest(), Retention: &metav1.Duration{Duration: 168 * time.Hour}}
		}},
		{name: "a bootstrap to a revision of an archive", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Bootstrap = &etcdv1alpha1.Bootstrap{Restore: &etcdv1alpha1.BootstrapRestore{
				Source:  &etcdv1alpha1.RestoreSource{S3: &etcdv1alpha1.S3Location{Bucket: "backups", Key: "etcd/db/kv-archive-base-0.db"}},
				Archive: &etcdv1alpha1.ArchiveSource{S3: &etcdv1alpha1.S3Location{Bucket: "backups", Key: "archive/db/kv/archive-u"}},
				Target:  &etcdv1alpha1.RestoreTarget{Revision: 4242},
			}}
		}},
		{name: "a bootstrap target without an archive", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Bootstrap = &etcdv1alpha1.Bootstrap{Restore: &etcdv1alpha1.BootstrapRestore{BackupRef: &corev1.LocalObjectReference{Name: "nightly"}, Target: &etcdv1alpha1.RestoreTarget{Revision: 4242}}}
		}, wantErr: "a target is a point in an archive: set archive too"},
		{name: "a bootstrap archive without its folder", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Bootstrap = &etcdv1alpha1.Bootstrap{Restore: &etcdv1alpha1.BootstrapRestore{BackupRef: &corev1.LocalObjectReference{Name: "nightly"},
				Archive: &etcdv1alpha1.ArchiveSource{S3: &etcdv1alpha1.S3Location{Bucket: "backups", Prefix: "archive/"}}}}
		}, wantErr: "archive.s3.key is the archive's folder"},
		{name: "a target of a revision and a time", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Bootstrap = &etcdv1alpha1.Bootstrap{Restore: &etcdv1alpha1.BootstrapRestore{BackupRef: &corev1.LocalObjectReference{Name: "nightly"},
				Archive: &etcdv1alpha1.ArchiveSource{Volume: &etcdv1alpha1.VolumeLocation{ClaimName: "wal", Path: "/a"}},
				Target:  &etcdv1alpha1.RestoreTarget{Revision: 7, Time: &metav1.Time{Time: time.Now()}}}}
		}, wantErr: "set revision or time, not both"},
		{name: "an archive's segments of 1 KiB", spec: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.Backup = &etcdv1alpha1.ClusterBackup{Destination: s3Dest()}
			s.Archive = &etcdv1alpha1.ClusterArchive{Destination: s3Dest(), Segment: etcdv1alpha1.ArchiveSegment{MaxBytes: 1024}}
		}, wantErr: "spec.archive.segment.maxBytes in body should be greater than or equal to 65536"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(context.Background(), cluster(ns, tc.spec))
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

// TestRestoreTargetValidation: an EtcdRestore names exactly one backup,
// or a target alone (the base is then the archive's); a revision is
// positive and a time is RFC 3339.
func TestRestoreTargetValidation(t *testing.T) {
	ns := env.Namespace(t)
	ref := &corev1.LocalObjectReference{Name: "nightly"}
	for _, tc := range []struct {
		name    string
		spec    etcdv1alpha1.EtcdRestoreSpec
		wantErr string
	}{
		{name: "a backup", spec: etcdv1alpha1.EtcdRestoreSpec{BackupRef: ref}},
		{name: "a target alone", spec: etcdv1alpha1.EtcdRestoreSpec{Target: &etcdv1alpha1.RestoreTarget{Revision: 9}}},
		{name: "the newest revision", spec: etcdv1alpha1.EtcdRestoreSpec{Target: &etcdv1alpha1.RestoreTarget{}}},
		{name: "a base and a time", spec: etcdv1alpha1.EtcdRestoreSpec{BackupRef: ref, Target: &etcdv1alpha1.RestoreTarget{Time: &metav1.Time{Time: time.Now()}}}},
		{name: "nothing", spec: etcdv1alpha1.EtcdRestoreSpec{},
			wantErr: "set exactly one of backupRef and source, or a target alone"},
		{name: "a source and a backup", spec: etcdv1alpha1.EtcdRestoreSpec{BackupRef: ref, Source: &etcdv1alpha1.RestoreSource{
			S3: &etcdv1alpha1.S3Location{Bucket: "backups", Key: "x.db"}}, Target: &etcdv1alpha1.RestoreTarget{}},
			wantErr: "set exactly one of backupRef and source, or a target alone"},
		{name: "a negative revision", spec: etcdv1alpha1.EtcdRestoreSpec{Target: &etcdv1alpha1.RestoreTarget{Revision: -1}},
			wantErr: "spec.target.revision in body should be greater than or equal to 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rs := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "r-"}, Spec: tc.spec}
			rs.Spec.ClusterRef.Name = "kv"
			err := env.Client.Create(context.Background(), rs)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
	// A time that does not parse never reaches the controller.
	g := NewWithT(t)
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "etcd.tend.dev/v1alpha1", "kind": "EtcdRestore",
		"metadata": map[string]any{"namespace": ns, "name": "bad-time"},
		"spec":     map[string]any{"clusterRef": map[string]any{"name": "kv"}, "target": map[string]any{"time": "yesterday at two"}},
	}}
	g.Expect(env.Client.Create(context.Background(), bad)).To(MatchError(ContainSubstring("spec.target.time")))
}

// TestTheClusterNameAndBackupKeyAreLimited: every name Tend derives from
// an EtcdCluster's fits at 52 characters (internal/controller/etcdcluster
// tests each one at that length); longer names are refused at create, as
// is one S3 key for all the cluster's own backups.
func TestTheClusterNameAndBackupKeyAreLimited(t *testing.T) {
	ns := env.Namespace(t)
	named := func(n int) *etcdv1alpha1.EtcdCluster {
		return &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.Repeat("n", n)}}
	}
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, named(52))).To(Succeed())
	g.Expect(env.Client.Create(ctx, named(53))).To(MatchError(ContainSubstring("an EtcdCluster's name is at most 52 characters")))

	withKey := cluster(ns, func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Backup = &etcdv1alpha1.ClusterBackup{Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "bkt", Key: "etcd/one.db"}}}
	})
	g.Expect(env.Client.Create(ctx, withKey)).To(MatchError(ContainSubstring("spec.backup.destination.s3.key would name every backup of the cluster")))
	withPrefix := cluster(ns, func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Backup = &etcdv1alpha1.ClusterBackup{Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Location{Bucket: "bkt", Prefix: "etcd/"}}}
	})
	g.Expect(env.Client.Create(ctx, withPrefix)).To(Succeed())
}

func TestValidationOnUpdate(t *testing.T) {
	ns := env.Namespace(t)
	for _, tc := range []struct {
		name    string
		from    func(*etcdv1alpha1.EtcdClusterSpec)
		to      func(*etcdv1alpha1.EtcdClusterSpec)
		wantErr string
	}{
		{name: "scale", to: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Replicas = ptr.To[int32](5) }},
		{name: "grow storage", to: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.Size = ptr.To(resource.MustParse("2Gi")) }},
		{name: "upgrade one minor", from: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Version = "v3.5.21" },
			to: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Version = "v3.6.16" }},
		{name: "patch downgrade", to: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Version = "v3.6.15" }},
		{name: "pause", to: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Paused = true }},
		{name: "minor downgrade", to: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Version = "v3.5.21" },
			wantErr: "spec.version must not go back to an older minor version"},
		{name: "skip a minor", from: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Version = "v3.4.30" },
			to: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Version = "v3.6.16" }, wantErr: "spec.version may move up one minor version at a time"},
		{name: "shrink storage", to: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.Size = ptr.To(resource.MustParse("512Mi")) },
			wantErr: "spec.storage.size cannot shrink"},
		{name: "set a storage class", to: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.StorageClassName = ptr.To("fast") }},
		{name: "change storage class", from: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.StorageClassName = ptr.To("slow") },
			to: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.StorageClassName = ptr.To("fast") }},
		{name: "unset storage class", from: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.StorageClassName = ptr.To("slow") },
			to: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.StorageClassName = nil }, wantErr: "spec.storage.storageClassName cannot be unset"},
		{name: "ephemeral storage class", from: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.Ephemeral = true },
			to: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.StorageClassName = ptr.To("fast") }, wantErr: "immutable for ephemeral members"},
		{name: "go ephemeral", to: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Storage.Ephemeral = true },
			wantErr: "spec.storage.ephemeral is immutable"},
		{name: "turn on auth", to: func(s *etcdv1alpha1.EtcdClusterSpec) { s.Auth.Enabled = true },
			wantErr: "spec.auth.enabled is immutable"},
		{name: "change TLS mode", to: func(s *etcdv1alpha1.EtcdClusterSpec) {
			s.TLS = etcdv1alpha1.TLS{Mode: etcdv1alpha1.TLSProvided, Secrets: &etcdv1alpha1.TLSSecrets{Server: "s", Peer: "p", Client: "c"}}
		}, wantErr: "spec.tls.mode is immutable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := cluster(ns, tc.from)
			g.Expect(env.Client.Create(context.Background(), c)).To(Succeed())
			patch := client.MergeFrom(c.DeepCopy())
			tc.to(&c.Spec)
			err := env.Client.Patch(context.Background(), c, patch)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}
