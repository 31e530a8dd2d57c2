//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
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

// The manager is killed during recoveries from a lost quorum. A 3-member
// cluster with spec.quorumLoss Auto (after 20s) takes acknowledged writes;
// then two members lose their pods and volumes at once, and Tend recovers
// from the survivor (etcd --force-new-cluster in a Job, then the others
// added back as learners). Each round kills the manager 0–30s into the
// recovery. After it the cluster is Available with 3 healthy voters and
// every acknowledged write reads back (writes lost: the survivor held them
// all). A recovery started twice for one loss (a second status.recovery
// Job name) or a Job made twice counts in duplicates and fails the test;
// the recovery Job left behind, or a member volume of no member, counts in
// orphans.
func TestEtcdQuorumLossManagerKills(t *testing.T) {
	t.Parallel() // beside another etcd scenario, once the others ran (doc.go)
	r := scenario(t, "EtcdCluster quorum-loss recovery, manager SIGKILL")
	ctx := t.Context()
	ns := cluster.Namespace(t)
	e := newEtcdWith(t, ns, 3, func(s *etcdv1alpha1.EtcdClusterSpec) {
		s.QuorumLoss = etcdv1alpha1.QuorumLoss{Policy: etcdv1alpha1.QuorumLossAuto, After: &metav1.Duration{Duration: 20 * time.Second}}
	})
	jobs := watchUIDs(t, watchClient(t), &batchv1.JobList{}, client.InNamespace(ns))
	defer func() { _ = jobs.stop() }()
	r.Duplicates, r.Orphans, r.Acked, r.Lost = 0, 0, 0, 0

	acked := map[string]string{}
	for i := range scaled() {
		// Each round writes keys of its own, under the prefix checkAcked
		// reads: a round's last write, cut short by Stop, may still be
		// applied, and on a key an earlier round had acknowledged it would
		// replace that value without being a lost write.
		w := framework.StartWriter(t, e.client(t), fmt.Sprintf("%sround%02d/", writerPrefix, i+1))
		waitWrites(t, w, 50)
		got, failed, lastErr := w.Stop()
		maps.Copy(acked, got)
		t.Logf("Round %d: %d writes acknowledged (%d failed, the last with %v)", i+1, len(got), failed, lastErr)
		e.checkSameData(t) // the survivor holds every acknowledged write

		ec, err := e.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		survivor, lost := framework.SurvivorAndLost(ec)
		loseMembers(t, ns, lost)
		lostAt := time.Now()
		var job string
		cluster.WaitFor(t, 3*time.Minute, "a recovery from "+survivor, func(ctx context.Context) (bool, error) {
			ec, err := e.get(ctx)
			if err != nil {
				return false, err
			}
			rec := ec.Status.Recovery
			if rec == nil || rec.Kind != etcdv1alpha1.RecoveryFromSurvivor || rec.StartedAt.Time.Before(lostAt.Add(-time.Second).Truncate(time.Second)) {
				return false, fmt.Errorf("status.recovery is %+v", rec)
			}
			if rec.Survivor != survivor {
				return false, framework.Stop(fmt.Errorf("the recovery keeps %s, not the one survivor %s", rec.Survivor, survivor))
			}
			job = rec.Job
			return true, nil
		})
		stopJobs := sampleRecoveryJobs(ctx, e)
		delay := time.Duration(random(t).Int64N(int64(30 * time.Second)))
		time.Sleep(delay)
		k := r.killManager(t, fmt.Sprintf("round %d (recovery from %s, kill %s in)", i+1, survivor, delay.Round(time.Millisecond)))
		waitRecoveryComplete(t, e)
		e.waitReady(t, 3)
		if seen := stopJobs(); len(seen) > 1 {
			r.Duplicates = max(r.Duplicates, len(seen)-1)
			t.Errorf("round %d: one loss, %d recoveries: %v", i+1, len(seen), seen)
		}
		err = cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job}, &batchv1.Job{})
		if !apierrors.IsNotFound(err) {
			r.Orphans++
			t.Errorf("round %d: the recovery Job %s is left (%v)", i+1, job, err)
		}
		r.Runs++
		t.Logf("Round %d: recovered from %s; manager %s killed %s in, a new one led after %.1fs; the cluster was ready %s after the loss",
			i+1, survivor, k.Pod, delay.Round(time.Millisecond), k.Takeover.Seconds(), time.Since(lostAt).Round(time.Second))
	}
	r.Acked = len(acked)
	lost := e.checkAcked(t, acked)
	r.Lost = len(lost)
	if len(lost) > 0 {
		t.Errorf("%d of %d acknowledged writes are lost, such as %v", len(lost), len(acked), lost[:min(len(lost), 10)])
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
	orphans, err := e.orphanClaims(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	r.Orphans += len(orphans)
	if len(orphans) > 0 {
		t.Errorf("volumes of no member: %v", orphans)
	}
	r.Restarts = restartsNow(t)
}

// loseMembers deletes the members' volume claims (without waiting: a
// claim in use stays until its pod is gone), then their pods: they lose
// their data.
func loseMembers(t *testing.T, ns string, members []string) {
	t.Helper()
	for _, m := range members {
		if err := cluster.Client.Delete(t.Context(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data-" + m}}); err != nil {
			t.Fatalf("deleting the volume claim of %s: %v", m, err)
		}
	}
	for _, m := range members {
		if err := cluster.Client.Delete(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m}}); err != nil {
			t.Fatalf("deleting the pod %s: %v", m, err)
		}
	}
}

// waitRecoveryComplete waits until the cluster's status.recovery is
// Complete; a failed recovery ends the wait at once.
func waitRecoveryComplete(t *testing.T, e *etcdHandle) {
	t.Helper()
	cluster.WaitFor(t, 8*time.Minute, "the recovery to complete", func(ctx context.Context) (bool, error) {
		ec, err := e.get(ctx)
		if err != nil {
			return false, err
		}
		switch rec := ec.Status.Recovery; {
		case rec == nil:
			return false, fmt.Errorf("no status.recovery")
		case rec.Phase == etcdv1alpha1.RecoveryFailed:
			return false, framework.Stop(fmt.Errorf("the recovery failed: %s", rec.Message))
		case rec.Phase != etcdv1alpha1.RecoveryComplete:
			return false, fmt.Errorf("status.recovery in phase %s: %s", rec.Phase, rec.Message)
		}
		return apimeta.IsStatusConditionTrue(ec.Status.Conditions, etcdv1alpha1.ConditionAvailable), nil
	})
}

// sampleRecoveryJobs polls the cluster's status.recovery twice a second
// until the returned function is called, which returns every recovery Job
// name it saw: one loss, one recovery, one name.
func sampleRecoveryJobs(ctx context.Context, e *etcdHandle) func() []string {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan []string)
	go func() {
		var seen []string
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			if ec, err := e.get(ctx); err == nil && ec.Status.Recovery != nil && ec.Status.Recovery.Job != "" && !slices.Contains(seen, ec.Status.Recovery.Job) {
				seen = append(seen, ec.Status.Recovery.Job)
			}
			select {
			case <-ctx.Done():
				done <- seen
				return
			case <-tick.C:
			}
		}
	}()
	return func() []string {
		cancel()
		return <-done
	}
}
