package etcdbackup

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// backupState is where a schedule's backup stands, for retention and
// health.
type backupState int

const (
	// backupActive: it has not finished (it waits, runs or verifies).
	backupActive backupState = iota
	// backupGood: it is Complete and, when verification is on, Verified.
	backupGood
	// backupFailed: it failed, or its verification did.
	backupFailed
)

// scheduledBackup is one backup of a schedule, as retention and health see
// it.
type scheduledBackup struct {
	name string
	// uid is the backup's: retention deletes only the object it listed,
	// never a later one made under the same name.
	uid types.UID
	// at is the run it was made for, in the schedule's time zone.
	at    time.Time
	state backupState
	// completed is when its file was written; verified is whether its test
	// restore matched.
	completed *time.Time
	verified  bool
	// deleting: it is being deleted (its file with it).
	deleting bool
	// message is its Failed condition's message, or what it waits for.
	message string
}

// viewBackup turns a backup into what retention and health need.
func viewBackup(b *etcdv1alpha1.EtcdBackup) scheduledBackup {
	v := scheduledBackup{name: b.Name, uid: b.UID, at: b.CreationTimestamp.Time, deleting: !b.DeletionTimestamp.IsZero()}
	if t, err := time.Parse(time.RFC3339, b.Annotations[etcdv1alpha1.AnnotationScheduledTime]); err == nil {
		v.at = t
	}
	conds := b.Status.Conditions
	switch {
	case apimeta.IsStatusConditionTrue(conds, etcdv1alpha1.BackupFailed):
		v.state = backupFailed
		v.message = apimeta.FindStatusCondition(conds, etcdv1alpha1.BackupFailed).Message
	case finished(b):
		v.state = backupGood
	default:
		// What it waits for: the file, or once written, its verification.
		t := etcdv1alpha1.BackupComplete
		if apimeta.IsStatusConditionTrue(conds, t) {
			t = etcdv1alpha1.BackupVerified
		}
		if c := apimeta.FindStatusCondition(conds, t); c != nil {
			v.message = c.Message
		}
	}
	if t := b.Status.CompletionTime; t != nil && apimeta.IsStatusConditionTrue(conds, etcdv1alpha1.BackupComplete) {
		v.completed = &t.Time
	}
	v.verified = apimeta.IsStatusConditionTrue(conds, etcdv1alpha1.BackupVerified)
	return v
}

// newestFirst orders backups by their run, newest first.
func newestFirst(a, b scheduledBackup) int {
	return cmp.Or(b.at.Compare(a.at), cmp.Compare(b.name, a.name))
}

// prune returns the backups that retention deletes, each with why. Only
// good backups count for the rules; the newest good one is never
// deleted; a failed backup is deleted once a newer backup is good; a
// backup that has not finished, or is being deleted, is left alone. The
// hourly, daily and weekly buckets are in loc. With no keep rule, every
// good backup is kept but those older than maxAge.
func prune(backups []scheduledBackup, r etcdv1alpha1.Retention, loc *time.Location, now time.Time) map[string]string {
	var good []scheduledBackup
	for _, b := range backups {
		if b.state == backupGood && !b.deleting {
			good = append(good, b)
		}
	}
	slices.SortFunc(good, newestFirst)
	drop := map[string]string{}
	if len(good) == 0 {
		return drop
	}
	newest := good[0]

	keep := map[string]bool{}
	counting := r.KeepLast != nil || r.KeepHourly != nil || r.KeepDaily != nil || r.KeepWeekly != nil
	if !counting {
		for _, b := range good {
			keep[b.name] = true
		}
	}
	if n := int(ptr.Deref(r.KeepLast, 0)); n > 0 {
		for _, b := range good[:min(n, len(good))] {
			keep[b.name] = true
		}
	}
	buckets := []struct {
		n   *int32
		key func(time.Time) string
	}{
		{r.KeepHourly, func(t time.Time) string { return t.Format("2006-01-02T15") }},
		{r.KeepDaily, func(t time.Time) string { return t.Format("2006-01-02") }},
		{r.KeepWeekly, func(t time.Time) string { y, w := t.ISOWeek(); return fmt.Sprintf("%d-W%02d", y, w) }},
	}
	for _, rule := range buckets {
		n := int(ptr.Deref(rule.n, 0))
		seen := map[string]bool{}
		for _, b := range good {
			k := rule.key(b.at.In(loc))
			if seen[k] {
				continue
			}
			if len(seen) == n {
				break
			}
			seen[k] = true
			keep[b.name] = true
		}
	}

	for _, b := range good[1:] {
		switch {
		case r.MaxAge != nil && now.Sub(b.at) > r.MaxAge.Duration:
			drop[b.name] = fmt.Sprintf("it is older than spec.retention.maxAge (%s)", r.MaxAge.Duration)
		case !keep[b.name]:
			drop[b.name] = "no retention rule keeps it"
		}
	}
	for _, b := range backups {
		if b.state == backupFailed && !b.deleting && b.at.Before(newest.at) {
			drop[b.name] = fmt.Sprintf("it failed, and the newer backup %s is complete", newest.name)
		}
	}
	return drop
}
