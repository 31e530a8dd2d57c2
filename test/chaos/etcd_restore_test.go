//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// The manager is killed during in-place EtcdRestores of a 3-member cluster.
// A writer's acknowledged writes come first, then a verified backup to S3
// (moto), then more writes, which the restores give up by design. Each
// round restores the backup in place (confirmOverwrite) and kills the
// manager 0–40s in: while the members stop, their data is restored, or
// they start. After each round the restore is Complete, the cluster
// settles with 3 healthy voters, and every write acknowledged before the
// backup reads back (writes lost). A member's restore Job made twice for
// one restore counts in duplicates; a second restore running while one
// runs (two EtcdRestores past Pending at once) fails the test; a member
// volume of no member, a restore Job left behind, or the backup still held
// once the restore is done counts in orphans.
func TestEtcdRestoreManagerKills(t *testing.T) {
	t.Parallel() // beside another etcd scenario, once the others ran (doc.go)
	r := scenario(t, "EtcdRestore in place, manager SIGKILL")
	ctx := t.Context()
	ns := cluster.Namespace(t)
	dest := cluster.S3Destination(t, ns, "restores/")
	e := newEtcd(t, ns, 3)
	jobs := watchUIDs(t, watchClient(t), &batchv1.JobList{}, client.InNamespace(ns))
	defer func() { _ = jobs.stop() }()

	before := startWriter(t, e.client(t))
	waitWrites(t, before, 50)
	acked, failed, lastErr := before.Stop()
	t.Logf("%d writes acknowledged before the backup (%d failed, the last with %v)", len(acked), failed, lastErr)
	backup := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "before"},
		Spec: etcdv1alpha1.EtcdBackupSpec{
			ClusterRef:    etcdv1alpha1.ClusterReference{Name: e.Name},
			BackupOptions: etcdv1alpha1.BackupOptions{Destination: etcdv1alpha1.BackupDestination{S3: dest}},
		},
	}
	if err := cluster.Client.Create(ctx, backup); err != nil {
		t.Fatal(err)
	}
	cluster.WaitBackupVerified(t, backup)

	r.Duplicates, r.Orphans, r.Acked, r.Lost = 0, 0, len(acked), 0
	for i := range scaled() {
		after := framework.StartWriter(t, e.client(t), "chaos-after-backup/")
		waitWrites(t, after, 20)
		rs := &etcdv1alpha1.EtcdRestore{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("r%d", i+1)},
			Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterRef: etcdv1alpha1.ClusterReference{Name: e.Name},
				BackupRef: &corev1.LocalObjectReference{Name: backup.Name}, ConfirmOverwrite: true},
		}
		if err := cluster.Client.Create(ctx, rs); err != nil {
			t.Fatal(err)
		}
		stopSampler := sampleRestores(ctx, t, ns)
		delay := time.Duration(random(t).Int64N(int64(40 * time.Second)))
		time.Sleep(delay)
		k := r.killManager(t, fmt.Sprintf("round %d (restore %s, kill %s in)", i+1, rs.Name, delay.Round(time.Millisecond)))
		_, _, _ = after.Stop()
		waitRestoreComplete(t, rs)
		if running := stopSampler(); running > 1 {
			t.Errorf("round %d: %d restores ran at once", i+1, running)
		}
		e.waitReady(t, 3)
		lost := e.checkAcked(t, acked)
		r.Lost += len(lost)
		if len(lost) > 0 {
			t.Errorf("round %d: %d of %d writes acknowledged before the backup are lost, such as %v", i+1, len(lost), len(acked), lost[:min(len(lost), 10)])
		}
		r.Orphans += restoreLeftovers(t, rs, backup)
		r.Runs++
		t.Logf("Round %d: restore %s; manager %s killed %s in, a new one led after %.1fs", i+1, rs.Name, k.Pod, delay.Round(time.Millisecond), k.Takeover.Seconds())
	}
	for name, n := range jobs.counts() {
		if n > 1 {
			r.Duplicates = max(r.Duplicates, n-1)
			t.Errorf("the Job %s was made %d times", name, n)
		}
	}
	if err := jobs.stop(); err != nil {
		t.Errorf("the watch of the Jobs: %v", err)
	}
	e.checkSameData(t)
	e.checkOrphanClaims(t, r, 3)
	r.Restarts = restartsNow(t)
}

// waitRestoreComplete waits until rs is Complete, and fails at once if it
// failed.
func waitRestoreComplete(t *testing.T, rs *etcdv1alpha1.EtcdRestore) {
	t.Helper()
	cluster.WaitFor(t, 8*time.Minute, "EtcdRestore "+rs.Name+" to complete", func(ctx context.Context) (bool, error) {
		got := &etcdv1alpha1.EtcdRestore{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(rs), got); err != nil {
			return false, err
		}
		if f := apimeta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.RestoreFailed); f != nil && f.Status == metav1.ConditionTrue {
			return false, framework.Stop(fmt.Errorf("it failed: %s", f.Message))
		}
		if !apimeta.IsStatusConditionTrue(got.Status.Conditions, etcdv1alpha1.RestoreComplete) {
			return false, fmt.Errorf("phase %q", got.Status.Phase)
		}
		return true, nil
	})
}

// sampleRestores polls the namespace's EtcdRestores twice a second until
// the returned function is called, which returns the most that were past
// Pending and not finished at one time.
func sampleRestores(ctx context.Context, t *testing.T, ns string) func() int {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan int)
	go func() {
		most := 0
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			var list etcdv1alpha1.EtcdRestoreList
			if err := cluster.Client.List(ctx, &list, client.InNamespace(ns)); err == nil {
				running := 0
				for _, rs := range list.Items {
					finished := apimeta.IsStatusConditionTrue(rs.Status.Conditions, etcdv1alpha1.RestoreComplete) ||
						apimeta.IsStatusConditionTrue(rs.Status.Conditions, etcdv1alpha1.RestoreFailed)
					if rs.Status.Phase != "" && rs.Status.Phase != etcdv1alpha1.RecoveryPending && !finished {
						running++
					}
				}
				most = max(most, running)
			}
			select {
			case <-ctx.Done():
				done <- most
				return
			case <-tick.C:
			}
		}
	}()
	return func() int {
		cancel()
		return <-done
	}
}

// restoreLeftovers counts, and reports, what the done restore rs left a
// minute after it completed: its member Jobs (deleted once done: their
// pods would pin the members' volumes), and its hold on the backup.
func restoreLeftovers(t *testing.T, rs *etcdv1alpha1.EtcdRestore, backup *etcdv1alpha1.EtcdBackup) int {
	t.Helper()
	var left []string
	deadline := time.Now().Add(time.Minute)
	for {
		left = left[:0]
		for i := range 3 {
			name := fmt.Sprintf("%s-%d", rs.Name, i)
			err := cluster.Client.Get(t.Context(), client.ObjectKey{Namespace: rs.Namespace, Name: name}, &batchv1.Job{})
			if !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("Job %s (%v)", name, err))
			}
		}
		b := &etcdv1alpha1.EtcdBackup{}
		if err := cluster.Client.Get(t.Context(), client.ObjectKeyFromObject(backup), b); err != nil {
			t.Fatal(err)
		}
		for _, uid := range etcdv1alpha1.RestoringClusters(b.Finalizers) {
			left = append(left, fmt.Sprintf("the hold of cluster %s on EtcdBackup %s", uid, b.Name))
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if len(left) > 0 {
		t.Errorf("restore %s left %v", rs.Name, left)
	}
	return len(left)
}
