//go:build e2e

package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/agentapi"
)

// b9Etcdutl takes one sample of the restore's anchor: etcdutl snapshot
// restore of every member's data at once, from the backup at key. The
// figure runs from the first "restoring snapshot" line to the last
// "restored snapshot" line.
func (r *rig) b9Etcdutl(b *testing.B, src *b9Source, f *b9Figures, name, key, sha string) {
	b.Helper()
	pod := r.runPod(b, src.pods.etcdutlPod(name, key, sha, f.members), *flagB9Timeout)
	var first, last time.Time
	var each []string
	for i := range f.members {
		start, end := r.etcdutlSpan(b, pod, fmt.Sprintf("restore-%d", i))
		if first.IsZero() || start.Before(first) {
			first = start
		}
		if end.After(last) {
			last = end
		}
		f.etcdutlEach = append(f.etcdutlEach, end.Sub(start).Seconds())
		each = append(each, fmt.Sprintf("%.2f", end.Sub(start).Seconds()))
	}
	f.etcdutl = append(f.etcdutl, last.Sub(first).Seconds())
	b9Logf(b, "B9 %s: etcdutl snapshot restore ×%d in %.2f s (each: %s s)", name, f.members, last.Sub(first).Seconds(), strings.Join(each, ", "))
	r.deletePod(b, pod)
}

// b9Restore takes one sample of Tend's restore: a new EtcdCluster whose
// spec.bootstrap.restore.source is the backup at key, from its create to
// the first status with Available=True, as the watch received them; then
// reads each restore Job's steps and deletes the cluster.
func (r *rig) b9Restore(b *testing.B, src *b9Source, f *b9Figures, name, key, sha string) {
	b.Helper()
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	ns := src.ns
	o := r.observe(ctx, ns, name)
	o.waitReady(b)
	ec := b9NewCluster(ns, name, int32(f.members), r.cluster.Settings.EtcdVersion)
	s3 := src.pods.s3
	ec.Spec.Bootstrap = &etcdv1alpha1.Bootstrap{Restore: &etcdv1alpha1.BootstrapRestore{Source: &etcdv1alpha1.RestoreSource{
		S3: &etcdv1alpha1.S3Location{
			Bucket: s3.bucket, Key: key, Region: s3.region, Endpoint: s3.endpoint, ForcePathStyle: true,
			CredentialsSecretRef: &corev1.LocalObjectReference{Name: b9CredsSecret},
		},
		Compression: etcdv1alpha1.CompressionNone,
		SHA256:      sha,
	}}}
	t0 := time.Now()
	if err := r.cluster.Client.Create(ctx, ec); err != nil {
		b.Fatalf("creating the EtcdCluster %s: %v", name, err)
	}
	timeout := *flagB9Timeout
	failed := func(obs []observation) error {
		if len(obs) == 0 {
			return nil
		}
		c := meta.FindStatusCondition(obs[len(obs)-1].status.Conditions, etcdv1alpha1.ConditionRestored)
		if c != nil && c.Reason == etcdv1alpha1.ReasonRestoreFailed {
			return fmt.Errorf("the restore failed: %s", c.Message)
		}
		return nil
	}
	tRestored := o.waitFor(b, "Restored=True", t0, t0, timeout, func(o *observation) bool {
		return meta.IsStatusConditionTrue(o.status.Conditions, etcdv1alpha1.ConditionRestored)
	}, failed)
	tAvailable := o.waitFor(b, "Available=True", t0, t0, timeout, func(o *observation) bool { return available(&o.status) }, failed)
	f.restore = append(f.restore, tAvailable.Sub(t0).Seconds())
	f.restored = append(f.restored, tRestored.Sub(t0).Seconds())
	f.restoreStart = append(f.restoreStart, tAvailable.Sub(tRestored).Seconds())

	var parts []string
	for i := range f.members {
		pod := r.b9JobPod(b, ns, fmt.Sprintf("%s-restore-%d", name, i))
		fetch := result(b, pod, agentapi.OpFetch, agentapi.OpFetch)
		install := result(b, pod, agentapi.OpInstall, agentapi.OpInstall)
		start, end := r.etcdutlSpan(b, pod, "restore")
		fetchSeconds := stepSeconds(b, pod, agentapi.OpFetch, fetch)
		installSeconds := stepSeconds(b, pod, agentapi.OpInstall, install)
		f.restoreFetch = append(f.restoreFetch, fetchSeconds)
		f.restoreEtcdutl = append(f.restoreEtcdutl, end.Sub(start).Seconds())
		f.restoreInstall = append(f.restoreInstall, installSeconds)
		parts = append(parts, fmt.Sprintf("%s: fetch %.2f s, etcdutl %.2f s, install %.3f s", pod.Name, fetchSeconds, end.Sub(start).Seconds(), installSeconds))
	}
	b9Logf(b, "B9 %s: create → Restored %.2f s → Available %.2f s; %s", name, tRestored.Sub(t0).Seconds(), tAvailable.Sub(t0).Seconds(), strings.Join(parts, "; "))
	cancel()
	r.b9DeleteCluster(b, ec)
}

// b9JobPod is the pod of Job ns/job that succeeded.
func (r *rig) b9JobPod(b *testing.B, ns, job string) *corev1.Pod {
	b.Helper()
	pods := &corev1.PodList{}
	if err := r.cluster.Client.List(b.Context(), pods, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: job}); err != nil {
		b.Fatalf("listing the pods of Job %s: %v", job, err)
	}
	for i := range pods.Items {
		if pods.Items[i].Status.Phase == corev1.PodSucceeded {
			return &pods.Items[i]
		}
	}
	b.Fatalf("the Job %s has no pod that succeeded among %d", job, len(pods.Items))
	return nil
}

// b9DeleteCluster deletes a restored cluster (deletionPolicy Delete) and
// waits until it, its volume claims and their volumes are gone, so that
// the next measurement does not share the disk with their removal.
func (r *rig) b9DeleteCluster(b *testing.B, ec *etcdv1alpha1.EtcdCluster) {
	b.Helper()
	c := r.cluster.Client
	start := time.Now()
	if err := c.Delete(b.Context(), ec); client.IgnoreNotFound(err) != nil {
		b.Fatalf("deleting the EtcdCluster %s: %v", ec.Name, err)
	}
	claimPrefix := "data-" + ec.Name + "-"
	r.cluster.WaitFor(b, namespaceTimeout, "the EtcdCluster "+ec.Name+", its volume claims and volumes to be gone", func(ctx context.Context) (bool, error) {
		switch err := c.Get(ctx, client.ObjectKeyFromObject(ec), &etcdv1alpha1.EtcdCluster{}); {
		case err == nil:
			return false, errors.New("the EtcdCluster is still there")
		case !apierrors.IsNotFound(err):
			return false, err
		}
		var claims corev1.PersistentVolumeClaimList
		if err := c.List(ctx, &claims, client.InNamespace(ec.Namespace)); err != nil {
			return false, err
		}
		for _, p := range claims.Items {
			if strings.HasPrefix(p.Name, claimPrefix) {
				return false, fmt.Errorf("the volume claim %s is still there", p.Name)
			}
		}
		var volumes corev1.PersistentVolumeList
		if err := c.List(ctx, &volumes); err != nil {
			return false, err
		}
		for _, v := range volumes.Items {
			if ref := v.Spec.ClaimRef; ref != nil && ref.Namespace == ec.Namespace && strings.HasPrefix(ref.Name, claimPrefix) {
				return false, fmt.Errorf("the volume %s of %s is still there (%s)", v.Name, ref.Name, v.Status.Phase)
			}
		}
		return true, nil
	})
	b9Logf(b, "B9: the EtcdCluster %s and its volumes deleted in %.1f s", ec.Name, time.Since(start).Seconds())
}
