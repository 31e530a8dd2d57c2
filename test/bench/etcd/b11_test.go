//go:build e2e

package etcd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/test/e2e/framework"
)

// B11's settings. Pass them after -args when running this package alone.
var (
	flagB11Samples = flag.Int("b11.samples", 3,
		"B11: samples of each figure (at least 3 for a median); -benchtime does not change it")
	flagB11After = flag.Duration("b11.after", 10*time.Second,
		"B11: spec.quorumLoss.after of the measured cluster (policy Auto; the CRD's minimum is 10s)")
	flagB11Keys = flag.Int("b11.keys", 1000,
		"B11: keys of 1 KiB written before the backup")
	flagB11Timeout = flag.Duration("b11.timeout", 10*time.Minute,
		"B11: the longest wait for one step; a step that takes longer fails the benchmark")
)

// The measured cluster and its backup.
const (
	b11Name       = "b11"
	b11Members    = 3
	b11Backup     = "b11-backup"
	b11BackupPVC  = "b11-backups"
	b11GonePoll   = 200 * time.Millisecond
	b11QuorumLoss = "quorum-loss"
	b11Restore    = "restore"
	b11Anchor     = "anchor"
)

// BenchmarkB11 measures the recovery of a 3-member EtcdCluster: from a
// lost quorum by itself (Auto), and an in-place EtcdRestore against
// deleting the cluster and creating it anew from the same backup. See the
// comment at the top of this file.
func BenchmarkB11(b *testing.B) {
	if *flagB11Samples < 1 || *flagB11Keys < 1 {
		b.Fatal("-b11.samples and -b11.keys must be at least 1")
	}
	start := time.Now()
	r := getRig(b)
	f := &b11Figures{keys: *flagB11Keys, after: *flagB11After}
	measureOnce(b, "recovery", func(b *testing.B) {
		r.setManagerArgs(b, r.baseArgs)
		r.b11Measure(b, f)
	}, f.metrics)
	f.took = time.Since(start)
	printTable(b, "B11, EtcdCluster disaster recovery on the local cluster (test/bench/etcd)", f.write)
}

// b11Logf logs to the benchmark and, at once, to standard error: the
// testing package keeps only the last lines of a benchmark's log.
func b11Logf(b *testing.B, format string, args ...any) {
	b.Helper()
	logNow(b, "b11", format, args...)
}

// b11Measure sets up the cluster and its backup in a namespace of its own,
// takes every sample, and deletes the namespace.
func (r *rig) b11Measure(b *testing.B, f *b11Figures) {
	ns := r.cluster.Namespace(b)
	if err := r.cluster.Client.Create(b.Context(), b11NewCluster(ns, false)); err != nil {
		b.Fatalf("creating the EtcdCluster %s: %v", b11Name, err)
	}
	r.b11Settled(b, ns)
	r.b11Fill(b, ns, f.keys)
	backup := r.b11TakeBackup(b, ns)
	f.backupRevision, f.backupBytes = backup.Status.Snapshot.Revision, backup.Status.Artifact.SizeBytes
	b11Logf(b, "B11: %d keys backed up to %s, revision %d", f.keys, backup.Status.Artifact.URI, f.backupRevision)

	variants := []string{b11QuorumLoss, b11Restore, b11Anchor}
	for round := range *flagB11Samples {
		for _, v := range rotation(variants, round) {
			syscall.Sync()
			switch v {
			case b11QuorumLoss:
				r.b11QuorumLoss(b, ns, f)
			case b11Restore:
				r.b11InPlace(b, ns, f, fmt.Sprintf("restore-%d", round))
			case b11Anchor:
				r.b11Recreate(b, ns, f)
			}
		}
	}
	r.deleteNamespace(b, ns)
}

// b11NewCluster is the measured EtcdCluster; restored, it starts from the
// backup.
func b11NewCluster(ns string, restored bool) *etcdv1alpha1.EtcdCluster {
	ec := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: b11Name},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Replicas:       ptr.To[int32](b11Members),
			DeletionPolicy: etcdv1alpha1.DeletionDelete,
			QuorumLoss:     etcdv1alpha1.QuorumLoss{Policy: etcdv1alpha1.QuorumLossAuto, After: &metav1.Duration{Duration: *flagB11After}},
		},
	}
	if restored {
		ec.Spec.Bootstrap = &etcdv1alpha1.Bootstrap{Restore: &etcdv1alpha1.BootstrapRestore{BackupRef: &corev1.LocalObjectReference{Name: b11Backup}}}
	}
	return ec
}

// b11Settled waits until the cluster has 3 healthy voters, is Available
// and not Progressing for its generation, and runs no recovery; it
// returns it.
func (r *rig) b11Settled(b *testing.B, ns string) *etcdv1alpha1.EtcdCluster {
	b.Helper()
	ec := &etcdv1alpha1.EtcdCluster{}
	r.cluster.WaitFor(b, *flagB11Timeout, "the EtcdCluster "+b11Name+" to settle", func(ctx context.Context) (bool, error) {
		if err := r.cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: b11Name}, ec); err != nil {
			return false, err
		}
		o := observation{generation: ec.Generation, status: ec.Status}
		if rec := ec.Status.Recovery; rec != nil && rec.Phase != etcdv1alpha1.RecoveryComplete {
			return false, fmt.Errorf("status.recovery is %+v", *rec)
		}
		if !stable(&o, b11Members, ec.Generation) {
			return false, errors.New(summary(&o))
		}
		return true, nil
	})
	return ec
}

// b11Fill writes n keys of 1 KiB through the client Service.
func (r *rig) b11Fill(b *testing.B, ns string, n int) {
	b.Helper()
	ctx := b.Context()
	secret := &corev1.Secret{}
	if err := r.cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: b11Name + "-client-tls"}, secret); err != nil {
		b.Fatal(err)
	}
	tlsConfig, err := framework.TLSFromSecret(secret)
	if err != nil {
		b.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := r.cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: b11Name + "-client"}, svc); err != nil {
		b.Fatal(err)
	}
	host := fmt.Sprintf("%s-client.%s.svc", b11Name, ns)
	cli := r.cluster.EtcdClient(b, tlsConfig, map[string]string{host: svc.Spec.ClusterIP}, "https://"+host+":2379")
	value := strings.Repeat("v", 1024)
	for i := range n {
		putCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := cli.Put(putCtx, fmt.Sprintf("b11/%06d", i), value)
		cancel()
		if err != nil {
			b.Fatalf("writing key %d: %v", i, err)
		}
	}
}

// b11TakeBackup takes the EtcdBackup that every restore uses, to a volume
// claim, and waits until it is Complete and Verified.
func (r *rig) b11TakeBackup(b *testing.B, ns string) *etcdv1alpha1.EtcdBackup {
	b.Helper()
	c := r.cluster.Client
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: b11BackupPVC},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	backup := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: b11Backup},
		Spec: etcdv1alpha1.EtcdBackupSpec{
			ClusterRef: etcdv1alpha1.ClusterReference{Name: b11Name},
			BackupOptions: etcdv1alpha1.BackupOptions{
				Destination: etcdv1alpha1.BackupDestination{Volume: &etcdv1alpha1.VolumeLocation{ClaimName: claim.Name, Path: "etcd"}},
			},
		},
	}
	for _, obj := range []client.Object{claim, backup} {
		if err := c.Create(b.Context(), obj); err != nil {
			b.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	r.cluster.WaitFor(b, *flagB11Timeout, "the EtcdBackup "+b11Backup+" Complete and Verified", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(backup), backup); err != nil {
			return false, err
		}
		conds := backup.Status.Conditions
		if meta.IsStatusConditionTrue(conds, etcdv1alpha1.BackupFailed) || meta.IsStatusConditionFalse(conds, etcdv1alpha1.BackupVerified) {
			return false, framework.Stop(fmt.Errorf("the backup failed: %+v", conds))
		}
		if !meta.IsStatusConditionTrue(conds, etcdv1alpha1.BackupComplete) || !meta.IsStatusConditionTrue(conds, etcdv1alpha1.BackupVerified) ||
			backup.Status.Artifact == nil || backup.Status.Snapshot == nil {
			return false, fmt.Errorf("phase %q, conditions %+v", backup.Status.Phase, conds)
		}
		return true, nil
	})
	return backup
}

// b11NewRecovery says whether st shows a recovery other than the one that
// started at prev (nil: none).
func b11NewRecovery(st *etcdv1alpha1.EtcdClusterStatus, prev *metav1.Time) bool {
	rec := st.Recovery
	return rec != nil && (prev == nil || !rec.StartedAt.Equal(prev))
}

// b11RecoveryStart is when the cluster's last recovery started, or nil.
func b11RecoveryStart(ec *etcdv1alpha1.EtcdCluster) *metav1.Time {
	if ec.Status.Recovery == nil {
		return nil
	}
	return ec.Status.Recovery.StartedAt.DeepCopy()
}

// b11QuorumLoss takes one sample of (i): two members lose their volume
// claims and pods; Tend recovers from the third.
func (r *rig) b11QuorumLoss(b *testing.B, ns string, f *b11Figures) {
	b.Helper()
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	c := r.cluster.Client
	ec := r.b11Settled(b, ns)
	prev := b11RecoveryStart(ec)
	var survivor string
	var lost []string
	for _, m := range slices.Backward(ec.Status.Members) {
		if survivor == "" && !m.Leader {
			survivor = m.Name
		} else {
			lost = append(lost, m.Name)
		}
	}
	claims := map[types.UID]bool{}
	for _, m := range lost {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + m}, pvc); err != nil {
			b.Fatal(err)
		}
		claims[pvc.UID] = true
	}
	o := r.observe(ctx, ns, b11Name)
	o.waitReady(b)

	t0 := time.Now()
	marks := []mark{{t0, fmt.Sprintf("delete the volume claims and pods of %v; %s survives", lost, survivor)}}
	for _, m := range lost {
		if err := c.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data-" + m}}); err != nil {
			b.Fatalf("deleting the volume claim of %s: %v", m, err)
		}
	}
	for _, m := range lost {
		if err := c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m}}); err != nil {
			b.Fatalf("deleting the pod %s: %v", m, err)
		}
	}
	isNew := func(o *observation) bool { return b11NewRecovery(&o.status, prev) }
	failed := func(obs []observation) error {
		if len(obs) == 0 || !isNew(&obs[len(obs)-1]) {
			return nil
		}
		rec := obs[len(obs)-1].status.Recovery
		switch {
		case rec.Phase == etcdv1alpha1.RecoveryFailed:
			return fmt.Errorf("the recovery failed: %s", rec.Message)
		case rec.Kind != etcdv1alpha1.RecoveryFromSurvivor || rec.Survivor != survivor:
			return fmt.Errorf("the recovery is %s from %q%s, want one from the survivor %s", rec.Kind, rec.Survivor, rec.Restore, survivor)
		}
		return nil
	}
	timeout := *flagB11Timeout
	tLost := o.waitFor(b, "Available=False", t0, t0, timeout, func(o *observation) bool { return !o.deleted && !available(&o.status) }, failed)
	tActed := o.waitFor(b, "a recovery from "+survivor, t0, t0, timeout, isNew, failed)
	tAvailable := o.waitFor(b, "Available=True again", t0, tLost, timeout, func(o *observation) bool { return available(&o.status) }, failed)
	tComplete := o.waitFor(b, "the recovery Complete", t0, tActed, timeout, func(o *observation) bool {
		return isNew(o) && o.status.Recovery.Phase == etcdv1alpha1.RecoveryComplete
	}, failed)
	tAll := o.waitFor(b, "3 healthy voters after the recovery", t0, tActed, timeout, func(o *observation) bool {
		return isNew(o) && o.status.Recovery.Phase == etcdv1alpha1.RecoveryComplete && converged(&o.status, b11Members)
	}, failed)
	since := func(t time.Time) float64 { return t.Sub(t0).Seconds() }
	f.qlNotice, f.qlActed = append(f.qlNotice, since(tLost)), append(f.qlActed, since(tActed))
	f.qlAvailable, f.qlComplete, f.qlAll = append(f.qlAvailable, since(tAvailable)), append(f.qlComplete, since(tComplete)), append(f.qlAll, since(tAll))
	marks = append(marks, mark{tLost, "Available=False"}, mark{tActed, "recovery from " + survivor}, mark{tAvailable, "Available=True"},
		mark{tComplete, "recovery Complete"}, mark{tAll, "3 healthy voters"})
	o.logTimeline(b, t0, marks)
	b11Logf(b, "B11 quorum loss (%v lost, %s survives): Available=False %.1f s, recovery %.1f s, Available %.1f s, recovery Complete %.1f s, 3 healthy voters %.1f s",
		lost, survivor, since(tLost), since(tActed), since(tAvailable), since(tComplete), since(tAll))
	cancel()
	r.b11VolumesGone(b, claims)
}

// b11InPlace takes one sample of (ii): an EtcdRestore name of the cluster
// from the backup.
func (r *rig) b11InPlace(b *testing.B, ns string, f *b11Figures, name string) {
	b.Helper()
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	ec := r.b11Settled(b, ns)
	prev := b11RecoveryStart(ec)
	o := r.observe(ctx, ns, b11Name)
	o.waitReady(b)
	rw := r.b11WatchRestore(ctx, b, ns, name)
	restore := &etcdv1alpha1.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: etcdv1alpha1.EtcdRestoreSpec{
			ClusterRef:       etcdv1alpha1.ClusterReference{Name: b11Name},
			BackupRef:        &corev1.LocalObjectReference{Name: b11Backup},
			ConfirmOverwrite: true,
		},
	}
	t0 := time.Now()
	if err := r.cluster.Client.Create(ctx, restore); err != nil {
		b.Fatalf("creating the EtcdRestore %s: %v", name, err)
	}
	timeout := *flagB11Timeout
	failed := func([]observation) error { return rw.failure() }
	tComplete := rw.waitComplete(b, timeout)
	tAll := o.waitFor(b, "the restored cluster Available with 3 healthy voters", t0, t0, timeout, func(o *observation) bool {
		rec := o.status.Recovery
		return b11NewRecovery(&o.status, prev) && rec.Kind == etcdv1alpha1.RecoveryFromBackup && rec.Restore == name &&
			rec.Phase == etcdv1alpha1.RecoveryComplete && converged(&o.status, b11Members)
	}, failed)
	f.restoreComplete = append(f.restoreComplete, tComplete.Sub(t0).Seconds())
	f.restoreAll = append(f.restoreAll, tAll.Sub(t0).Seconds())
	o.logTimeline(b, t0, append(rw.marks(), mark{t0, "create EtcdRestore " + name}, mark{tComplete, name + " Complete"}, mark{tAll, "3 healthy voters"}))
	b11Logf(b, "B11 in-place restore %s: Complete %.1f s, Available with 3 healthy voters %.1f s", name, tComplete.Sub(t0).Seconds(), tAll.Sub(t0).Seconds())
}

// b11Recreate takes one sample of (iii): the cluster deleted and created
// anew from the backup.
func (r *rig) b11Recreate(b *testing.B, ns string, f *b11Figures) {
	b.Helper()
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	c := r.cluster.Client
	ec := r.b11Settled(b, ns)
	claims := map[types.UID]bool{}
	var list corev1.PersistentVolumeClaimList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, "data-"+b11Name+"-") {
			claims[p.UID] = true
		}
	}
	o := r.observe(ctx, ns, b11Name)
	o.waitReady(b)

	t0 := time.Now()
	if err := c.Delete(ctx, ec); err != nil {
		b.Fatalf("deleting the EtcdCluster %s: %v", b11Name, err)
	}
	var why string
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(ec), &etcdv1alpha1.EtcdCluster{})
		switch {
		case err == nil:
			why = "the EtcdCluster is still there"
		case !apierrors.IsNotFound(err):
			why = err.Error()
		default:
			why = ""
			if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
				why = err.Error()
			}
			for _, p := range list.Items {
				if claims[p.UID] {
					why = "the volume claim " + p.Name + " is still there"
				}
			}
		}
		if why == "" {
			break
		}
		if time.Since(t0) > *flagB11Timeout {
			b.Fatalf("deleting the EtcdCluster %s: not done within %s (-b11.timeout): %s", b11Name, *flagB11Timeout, why)
		}
		time.Sleep(b11GonePoll)
	}
	tGone := time.Now()
	if err := c.Create(ctx, b11NewCluster(ns, true)); err != nil {
		b.Fatalf("creating the EtcdCluster %s anew from the backup: %v", b11Name, err)
	}
	failed := func(obs []observation) error {
		if len(obs) == 0 {
			return nil
		}
		if rc := meta.FindStatusCondition(obs[len(obs)-1].status.Conditions, etcdv1alpha1.ConditionRestored); rc != nil && rc.Reason == etcdv1alpha1.ReasonRestoreFailed {
			return fmt.Errorf("the restore failed: %s", rc.Message)
		}
		return nil
	}
	tAll := o.waitFor(b, "the new cluster Available with 3 healthy voters", t0, tGone, *flagB11Timeout, func(o *observation) bool {
		return !o.deleted && converged(&o.status, b11Members)
	}, failed)
	f.anchorGone = append(f.anchorGone, tGone.Sub(t0).Seconds())
	f.anchorCreate = append(f.anchorCreate, tAll.Sub(tGone).Seconds())
	f.anchorAll = append(f.anchorAll, tAll.Sub(t0).Seconds())
	o.logTimeline(b, t0, []mark{{t0, "delete the EtcdCluster"}, {tGone, "gone with its claims; create it from the backup"}, {tAll, "3 healthy voters"}})
	b11Logf(b, "B11 anchor: gone %.1f s, then Available with 3 healthy voters %.1f s later; %.1f s in all",
		tGone.Sub(t0).Seconds(), tAll.Sub(tGone).Seconds(), tAll.Sub(t0).Seconds())
	cancel()
	r.b11VolumesGone(b, claims)
}

// b11VolumesGone waits, untimed, until no PersistentVolume is bound to one
// of claims any more, so that the next sample does not share the disk with
// their removal.
func (r *rig) b11VolumesGone(b *testing.B, claims map[types.UID]bool) {
	b.Helper()
	r.cluster.WaitFor(b, namespaceTimeout, "the volumes of the deleted claims to be gone", func(ctx context.Context) (bool, error) {
		var volumes corev1.PersistentVolumeList
		if err := r.cluster.Client.List(ctx, &volumes); err != nil {
			return false, err
		}
		for _, v := range volumes.Items {
			if ref := v.Spec.ClaimRef; ref != nil && claims[ref.UID] {
				return false, fmt.Errorf("the volume %s of %s is still there (%s)", v.Name, ref.Name, v.Status.Phase)
			}
		}
		return true, nil
	})
}

// b11RestoreWatch keeps, from a watch, when an EtcdRestore reached each
// phase, when it was first Complete, and whether it failed, each as this
// process received it.
type b11RestoreWatch struct {
	mu       sync.Mutex
	phases   []mark
	complete time.Time
	failed   string
	err      error
	changed  chan struct{}
}

// b11WatchRestore starts watching EtcdRestore ns/name until ctx ends, and
// returns once the watch runs.
func (r *rig) b11WatchRestore(ctx context.Context, b *testing.B, ns, name string) *b11RestoreWatch {
	b.Helper()
	w := &b11RestoreWatch{changed: make(chan struct{})}
	watchFrom := func(rv string) (watch.Interface, error) {
		return r.wc.Watch(ctx, &etcdv1alpha1.EtcdRestoreList{}, client.InNamespace(ns), &client.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name),
			Raw:           &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true},
		})
	}
	first, err := watchFrom("")
	if err != nil {
		b.Fatalf("watching the EtcdRestore %s: %v", name, err)
	}
	go func() {
		wi, rv, failures := first, "", 0
		for ctx.Err() == nil {
			if wi == nil {
				if wi, err = watchFrom(rv); err != nil {
					if failures++; failures > watchFailures {
						w.record(func() { w.err = err })
						return
					}
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
					continue
				}
			}
			failures = 0
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					rv = ""
					break
				}
				er, ok := ev.Object.(*etcdv1alpha1.EtcdRestore)
				if !ok {
					continue
				}
				rv = er.ResourceVersion
				if ev.Type != watch.Bookmark {
					w.add(time.Now(), er)
				}
			}
			wi.Stop()
			wi = nil
		}
	}()
	return w
}

func (w *b11RestoreWatch) add(at time.Time, er *etcdv1alpha1.EtcdRestore) {
	w.record(func() {
		if p := er.Status.Phase; p != "" && (len(w.phases) == 0 || !strings.HasSuffix(w.phases[len(w.phases)-1].what, " "+p)) {
			w.phases = append(w.phases, mark{at, "EtcdRestore " + er.Name + " " + p})
		}
		if w.complete.IsZero() && meta.IsStatusConditionTrue(er.Status.Conditions, etcdv1alpha1.RestoreComplete) {
			w.complete = at
		}
		if c := meta.FindStatusCondition(er.Status.Conditions, etcdv1alpha1.RestoreFailed); c != nil && c.Status == metav1.ConditionTrue && w.failed == "" {
			w.failed = fmt.Sprintf("%s: %s", c.Reason, c.Message)
		}
	})
}

// record changes w under its lock and wakes the waiter.
func (w *b11RestoreWatch) record(change func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	change()
	close(w.changed)
	w.changed = make(chan struct{})
}

// failure is the restore's failure, or the watch's, or nil.
func (w *b11RestoreWatch) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.failed != "":
		return fmt.Errorf("the EtcdRestore failed: %s", w.failed)
	case w.err != nil:
		return fmt.Errorf("watching the EtcdRestore: %w", w.err)
	}
	return nil
}

func (w *b11RestoreWatch) marks() []mark {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.phases)
}

// waitComplete waits until the EtcdRestore was received Complete, and
// returns when; a failure fails b at once.
func (w *b11RestoreWatch) waitComplete(b *testing.B, timeout time.Duration) time.Time {
	b.Helper()
	deadline := time.After(timeout)
	for {
		if err := w.failure(); err != nil {
			b.Fatal(err)
		}
		w.mu.Lock()
		done, changed := w.complete, w.changed
		var phases []string
		for _, p := range w.phases {
			phases = append(phases, p.what)
		}
		w.mu.Unlock()
		if !done.IsZero() {
			return done
		}
		select {
		case <-changed:
		case <-deadline:
			b.Fatalf("waiting for the EtcdRestore to complete: not within %s (-b11.timeout); its phases: %v", timeout, phases)
		}
	}
}
