//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// The continuous archive's pod (force-deleted: its process gets no time
// to store what it holds) and the manager (SIGKILL) are killed in turn, at
// random points, under a writer of a 1-member cluster archived to moto in
// segments of 2 s. After the kills the archive's window reaches the
// cluster's revision, status.archive reports no gap, and the archive
// replayed from this host onto its base, which refuses any revision
// missing on the way, holds every acknowledged write: a kill may cost the
// agent what it had not stored yet, never a revision, since the next pod
// reads again from etcd after the last stored segment.
func TestEtcdArchiveKills(t *testing.T) {
	t.Parallel() // beside another etcd scenario, once the others ran (doc.go)
	r := scenario(t, "EtcdCluster archive, archiver and manager kills")
	ns := cluster.Namespace(t)
	dest := cluster.S3Destination(t, ns, "chaos/")
	archiveDest := *dest
	archiveDest.Prefix = "archive/"
	e := newEtcdWith(t, ns, 1, func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.Backup = &etcdv1alpha1.ClusterBackup{Destination: etcdv1alpha1.BackupDestination{S3: dest}}
		s.Archive = &etcdv1alpha1.ClusterArchive{
			Destination: etcdv1alpha1.BackupDestination{S3: &archiveDest},
			Segment:     etcdv1alpha1.ArchiveSegment{MaxAge: &metav1.Duration{Duration: 2 * time.Second}},
		}
	})
	cluster.WaitFor(t, 5*time.Minute, "the archive Archiving", func(ctx context.Context) (bool, error) {
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		if c := meta.FindStatusCondition(ec.Status.Conditions, etcdv1alpha1.ConditionContinuousArchiving); c == nil || c.Status != metav1.ConditionTrue {
			return false, fmt.Errorf("ContinuousArchiving is %+v", c)
		}
		return true, nil
	})
	q := watchQuorum(e, e.clientTLS(t))
	defer q.stop()
	w := startWriter(t, e.client(t))

	for i := range max(2, scaled()) {
		delay := time.Duration(random(t).Int64N(int64(6 * time.Second)))
		time.Sleep(delay)
		what := "the manager"
		if i%2 == 0 {
			what = "the archive's pod " + e.killArchiver(t)
			r.Kills++
		} else {
			k := r.killManager(t, fmt.Sprintf("round %d (the archive running, kill %s in)", i+1, delay.Round(time.Millisecond)))
			what += " " + k.Pod
		}
		waitWrites(t, w, 20)
		r.Runs++
		t.Logf("Round %d: %s killed %s in; %d writes acknowledged so far", i+1, what, delay.Round(time.Millisecond), w.Acked())
	}
	acked, _, _ := w.Stop()
	last := e.revision(t)

	var ec *etcdv1alpha1.EtcdCluster
	cluster.WaitFor(t, 3*time.Minute, fmt.Sprintf("revision %d archived", last), func(ctx context.Context) (bool, error) {
		var err error
		if ec, err = e.get(ctx); err != nil {
			return false, err
		}
		if a := ec.Status.Archive; a == nil || a.LastRevision < last {
			return false, fmt.Errorf("status.archive is %+v", a)
		}
		return true, nil
	})
	if gaps := ec.Status.Archive.Gaps; len(gaps) > 0 {
		t.Errorf("status.archive reports gaps %+v: no kill here may make one", gaps)
	}
	replayed := cluster.ReplayArchive(t, ec, dest, writerPrefix)
	missing := 0
	for k, v := range acked {
		if got, ok := replayed.Keys[k]; !ok || got.Value != v {
			missing++
			if missing <= 5 {
				t.Errorf("the archive, replayed to revision %d, has %s = %+v, want %q", replayed.Revision, k, got, v)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged writes are not in the archive", missing, len(acked))
	}
	t.Logf("The archive replayed from its base to revision %d holds all %d acknowledged writes", replayed.Revision, len(acked))
	e.checkWrites(t, r, w, q)
}

// killArchiver waits for the archive's pod to run, force-deletes it
// (grace 0: the kubelet kills its process at once) and names it.
func (e *etcdHandle) killArchiver(t *testing.T) string {
	t.Helper()
	var running *corev1.Pod
	cluster.WaitFor(t, 2*time.Minute, "the archive's pod running", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := cluster.Client.List(ctx, &pods, client.InNamespace(e.Namespace), client.MatchingLabels{"app.kubernetes.io/name": "etcd-archive"}); err != nil {
			return false, err
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				running = p
				return true, nil
			}
		}
		return false, fmt.Errorf("none of %d archive pods runs", len(pods.Items))
	})
	if err := cluster.Client.Delete(t.Context(), running, client.GracePeriodSeconds(0)); err != nil {
		t.Fatalf("killing the archive's pod %s: %v", running.Name, err)
	}
	return running.Name
}
