package etcdbackup

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

func TestFinished(t *testing.T) {
	c := func(t string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: "R"}
	}
	for _, tc := range []struct {
		name   string
		verify bool
		conds  []metav1.Condition
		want   bool
	}{
		{name: "new", verify: true},
		{name: "complete, verifying", verify: true, conds: []metav1.Condition{c("Complete", "True"), c("Verified", "Unknown")}},
		{name: "complete and verified", verify: true, conds: []metav1.Condition{c("Complete", "True"), c("Verified", "True")}, want: true},
		{name: "complete without verification", conds: []metav1.Condition{c("Complete", "True")}, want: true},
		{name: "failed", verify: true, conds: []metav1.Condition{c("Complete", "False"), c("Failed", "True")}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testBackup(func(s *etcdv1alpha1.EtcdBackupSpec) { s.Verify = ptr.To(tc.verify) })
			b.Status.Conditions = tc.conds
			NewWithT(t).Expect(finished(b)).To(Equal(tc.want))
		})
	}
}

func TestBlockedBy(t *testing.T) {
	backup := func(name, cluster string, age time.Duration, mutate func(*etcdv1alpha1.EtcdBackup)) etcdv1alpha1.EtcdBackup {
		b := etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-age))}}
		b.Spec.ClusterRef.Name = cluster
		if mutate != nil {
			mutate(&b)
		}
		return b
	}
	started := func(b *etcdv1alpha1.EtcdBackup) { b.Status.StartTime = &metav1.Time{Time: t0} }
	done := func(b *etcdv1alpha1.EtcdBackup) {
		started(b)
		b.Spec.Verify = ptr.To(false)
		b.Status.Conditions = []metav1.Condition{{Type: "Complete", Status: "True", Reason: "R"}}
	}
	deleting := func(b *etcdv1alpha1.EtcdBackup) {
		b.DeletionTimestamp = &metav1.Time{Time: t0}
		b.Finalizers = []string{etcdv1alpha1.BackupFinalizer}
	}
	job := func(backup string, finished bool) batchv1.Job {
		j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: backup + "-backup", Labels: map[string]string{etcdv1alpha1.LabelBackup: backup}}}
		if finished {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		}
		return j
	}
	self := backup("me", "kv", time.Minute, nil)
	for _, tc := range []struct {
		name    string
		backups []etcdv1alpha1.EtcdBackup
		jobs    []batchv1.Job
		want    string
	}{
		{name: "alone", backups: []etcdv1alpha1.EtcdBackup{self}},
		{name: "another cluster's backup runs", backups: []etcdv1alpha1.EtcdBackup{self, backup("other", "kv2", time.Hour, started)}, jobs: []batchv1.Job{job("other", false)}},
		{name: "another backup runs", backups: []etcdv1alpha1.EtcdBackup{self, backup("a", "kv", 0, started)},
			want: "Waiting for EtcdBackup a to finish: one backup of cluster kv runs at a time"},
		{name: "another backup's Job exists before its status says so", backups: []etcdv1alpha1.EtcdBackup{self, backup("a", "kv", 0, nil)}, jobs: []batchv1.Job{job("a", false)},
			want: "Waiting for EtcdBackup a to finish"},
		{name: "another backup finished", backups: []etcdv1alpha1.EtcdBackup{self, backup("a", "kv", time.Hour, done)}, jobs: []batchv1.Job{job("a", false)}},
		{name: "an older backup waits too: it goes first", backups: []etcdv1alpha1.EtcdBackup{self, backup("a", "kv", time.Hour, nil)},
			want: "Waiting for EtcdBackup a, created first, to run first"},
		{name: "a younger backup waits for this one", backups: []etcdv1alpha1.EtcdBackup{self, backup("a", "kv", 0, nil)}},
		{name: "same second: by name", backups: []etcdv1alpha1.EtcdBackup{self, backup("lo", "kv", time.Minute, nil), backup("zz", "kv", time.Minute, nil)},
			want: "Waiting for EtcdBackup lo, created first"},
		{name: "a deleted backup whose Job still runs", backups: []etcdv1alpha1.EtcdBackup{self, backup("a", "kv", time.Hour, func(b *etcdv1alpha1.EtcdBackup) { started(b); deleting(b) })},
			jobs: []batchv1.Job{job("a", false)}, want: "Waiting for the Job of EtcdBackup a, which is being deleted, to stop"},
		{name: "a deleted backup whose Job is gone", backups: []etcdv1alpha1.EtcdBackup{self, backup("a", "kv", time.Hour, func(b *etcdv1alpha1.EtcdBackup) { started(b); deleting(b) })}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := blockedBy(&self, tc.backups, tc.jobs)
			if tc.want == "" {
				g.Expect(got).To(BeEmpty())
				return
			}
			g.Expect(got).To(ContainSubstring(tc.want))
		})
	}
}
