package etcdbackup

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/statemetrics"
)

var (
	lastBackupDesc = prometheus.NewDesc("tend_etcdcluster_last_backup_timestamp_seconds",
		"When the newest Complete EtcdBackup of an EtcdCluster was written (Unix seconds).",
		[]string{"namespace", "name"}, nil)
	lastBackupSizeDesc = prometheus.NewDesc("tend_etcdcluster_last_backup_size_bytes",
		"The stored size of the newest Complete EtcdBackup of an EtcdCluster.",
		[]string{"namespace", "name"}, nil)
	lastVerifiedDesc = prometheus.NewDesc("tend_etcdcluster_last_verified_backup_timestamp_seconds",
		"When the newest Verified EtcdBackup of an EtcdCluster passed its test restore (Unix seconds).",
		[]string{"namespace", "name"}, nil)
)

// BackupMetrics exports, per EtcdCluster, its newest Complete and Verified
// backups, and each EtcdBackup's conditions.
var BackupMetrics = statemetrics.Source{
	Descs: []*prometheus.Desc{lastBackupDesc, lastBackupSizeDesc, lastVerifiedDesc},
	Collect: func(ctx context.Context, r client.Reader, e *statemetrics.Emitter) error {
		var list etcdv1alpha1.EtcdBackupList
		if err := r.List(ctx, &list); err != nil {
			return fmt.Errorf("listing EtcdBackups: %w", err)
		}
		type newest struct {
			complete, verified *etcdv1alpha1.EtcdBackup
		}
		clusters := map[types.NamespacedName]*newest{}
		for i := range list.Items {
			b := &list.Items[i]
			e.Conditions("EtcdBackup", b, b.Status.Conditions)
			key := types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.ClusterRef.Name}
			n := clusters[key]
			if n == nil {
				n = &newest{}
				clusters[key] = n
			}
			if apimeta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.BackupComplete) && b.Status.CompletionTime != nil &&
				(n.complete == nil || b.Status.CompletionTime.After(n.complete.Status.CompletionTime.Time)) {
				n.complete = b
			}
			if apimeta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.BackupVerified) && b.Status.Verification != nil &&
				(n.verified == nil || b.Status.Verification.Time.After(n.verified.Status.Verification.Time.Time)) {
				n.verified = b
			}
		}
		for key, n := range clusters {
			if b := n.complete; b != nil {
				e.Gauge(lastBackupDesc, float64(b.Status.CompletionTime.Unix()), key.Namespace, key.Name)
				if b.Status.Artifact != nil {
					e.Gauge(lastBackupSizeDesc, float64(b.Status.Artifact.SizeBytes), key.Namespace, key.Name)
				}
			}
			if b := n.verified; b != nil {
				e.Gauge(lastVerifiedDesc, float64(b.Status.Verification.Time.Unix()), key.Namespace, key.Name)
			}
		}
		return nil
	},
}

// ScheduleMetrics exports each EtcdBackupSchedule's conditions, of which
// BackupsHealthy says whether its backups are recent.
var ScheduleMetrics = statemetrics.Source{
	Collect: func(ctx context.Context, r client.Reader, e *statemetrics.Emitter) error {
		var list etcdv1alpha1.EtcdBackupScheduleList
		if err := r.List(ctx, &list); err != nil {
			return fmt.Errorf("listing EtcdBackupSchedules: %w", err)
		}
		for i := range list.Items {
			e.Conditions("EtcdBackupSchedule", &list.Items[i], list.Items[i].Status.Conditions)
		}
		return nil
	},
}
