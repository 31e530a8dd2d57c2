//go:build e2e

package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// WaitBackupVerified waits until b is Complete and Verified, and stops at
// once when it failed.
func (c *Cluster) WaitBackupVerified(t testing.TB, b *etcdv1alpha1.EtcdBackup) *etcdv1alpha1.EtcdBackup {
	t.Helper()
	got := &etcdv1alpha1.EtcdBackup{}
	c.WaitFor(t, 4*time.Minute, "EtcdBackup "+b.Name+" Complete and Verified", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(b), got); err != nil {
			return false, err
		}
		conds := got.Status.Conditions
		if f := meta.FindStatusCondition(conds, etcdv1alpha1.BackupFailed); f != nil && f.Status == metav1.ConditionTrue {
			return false, Stop(fmt.Errorf("it failed: %s: %s", f.Reason, f.Message))
		}
		if v := meta.FindStatusCondition(conds, etcdv1alpha1.BackupVerified); v != nil && v.Status == metav1.ConditionFalse {
			return false, Stop(fmt.Errorf("its verification failed: %s: %s", v.Reason, v.Message))
		}
		if !meta.IsStatusConditionTrue(conds, etcdv1alpha1.BackupComplete) || !meta.IsStatusConditionTrue(conds, etcdv1alpha1.BackupVerified) {
			return false, fmt.Errorf("phase %q, conditions %v", got.Status.Phase, conds)
		}
		if got.Status.Verification == nil || !got.Status.Verification.HashMatches || got.Status.Artifact == nil || got.Status.Snapshot == nil {
			return false, Stop(fmt.Errorf("it is Verified, but its status is %+v", got.Status))
		}
		return true, nil
	})
	return got
}
