package etcdbackup

import (
	"maps"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

func TestPrune(t *testing.T) {
	b := func(name, when string, state backupState) scheduledBackup {
		return scheduledBackup{name: name, at: at(when), state: state}
	}
	// Every six hours for three days, in UTC, all good.
	var sixHourly []scheduledBackup
	for i := range 12 {
		ts := at("2030-01-01T00:00:00Z").Add(time.Duration(i) * 6 * time.Hour)
		sixHourly = append(sixHourly, scheduledBackup{name: ts.Format("01-02T15"), at: ts, state: backupGood})
	}
	now := at("2030-01-04T00:00:00Z")
	losAngeles, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		backups   []scheduledBackup
		retention etcdv1alpha1.Retention
		loc       *time.Location
		want      []string
	}{
		{name: "keepLast", backups: sixHourly, retention: etcdv1alpha1.Retention{KeepLast: ptr.To[int32](3)},
			want: []string{"01-01T00", "01-01T06", "01-01T12", "01-01T18", "01-02T00", "01-02T06", "01-02T12", "01-02T18", "01-03T00"}},
		{name: "keepDaily keeps each day's newest", backups: sixHourly, retention: etcdv1alpha1.Retention{KeepDaily: ptr.To[int32](2)},
			want: []string{"01-01T00", "01-01T06", "01-01T12", "01-01T18", "01-02T00", "01-02T06", "01-02T12", "01-03T00", "01-03T06", "01-03T12"}},
		{name: "keepDaily in the schedule's time zone", backups: sixHourly, retention: etcdv1alpha1.Retention{KeepDaily: ptr.To[int32](2)}, loc: losAngeles,
			// In Los Angeles (UTC-8) Jan 3 holds 12:00Z and 18:00Z, and
			// Jan 2 ends with 06:00Z of Jan 3.
			want: []string{"01-01T00", "01-01T06", "01-01T12", "01-01T18", "01-02T00", "01-02T06", "01-02T12", "01-02T18", "01-03T00", "01-03T12"}},
		{name: "keepLast and keepDaily together", backups: sixHourly, retention: etcdv1alpha1.Retention{KeepLast: ptr.To[int32](2), KeepDaily: ptr.To[int32](3)},
			want: []string{"01-01T00", "01-01T06", "01-01T12", "01-02T00", "01-02T06", "01-02T12", "01-03T00", "01-03T06"}},
		{name: "keepHourly", backups: sixHourly, retention: etcdv1alpha1.Retention{KeepHourly: ptr.To[int32](4)},
			want: []string{"01-01T00", "01-01T06", "01-01T12", "01-01T18", "01-02T00", "01-02T06", "01-02T12", "01-02T18"}},
		{name: "keepWeekly: ISO weeks", retention: etcdv1alpha1.Retention{KeepWeekly: ptr.To[int32](2)},
			backups: []scheduledBackup{
				b("sun-w52", "2029-12-30T12:00:00Z", backupGood), b("mon-w1", "2029-12-31T12:00:00Z", backupGood),
				b("sun-w1", "2030-01-06T12:00:00Z", backupGood), b("mon-w2", "2030-01-07T12:00:00Z", backupGood), b("tue-w2", "2030-01-08T12:00:00Z", backupGood),
			},
			want: []string{"mon-w1", "mon-w2", "sun-w52"}},
		{name: "maxAge alone keeps what is younger", backups: sixHourly, retention: etcdv1alpha1.Retention{MaxAge: &metav1.Duration{Duration: 24 * time.Hour}},
			want: []string{"01-01T00", "01-01T06", "01-01T12", "01-01T18", "01-02T00", "01-02T06", "01-02T12", "01-02T18"}},
		{name: "maxAge overrides the keep rules", backups: sixHourly, retention: etcdv1alpha1.Retention{KeepLast: ptr.To[int32](100), MaxAge: &metav1.Duration{Duration: 30 * time.Hour}},
			want: []string{"01-01T00", "01-01T06", "01-01T12", "01-01T18", "01-02T00", "01-02T06", "01-02T12"}},
		{name: "maxAge never deletes the newest good backup", retention: etcdv1alpha1.Retention{MaxAge: &metav1.Duration{Duration: time.Hour}},
			backups: []scheduledBackup{b("old", "2029-06-01T00:00:00Z", backupGood), b("older", "2029-05-01T00:00:00Z", backupGood)},
			want:    []string{"older"}},
		{name: "a failed backup goes once a newer one is good", retention: etcdv1alpha1.Retention{KeepLast: ptr.To[int32](5)},
			backups: []scheduledBackup{
				b("failed-old", "2030-01-01T00:00:00Z", backupFailed), b("good", "2030-01-02T00:00:00Z", backupGood),
				b("failed-new", "2030-01-03T00:00:00Z", backupFailed), b("running", "2030-01-03T06:00:00Z", backupActive),
			},
			want: []string{"failed-old"}},
		{name: "failures only: nothing goes", retention: etcdv1alpha1.Retention{KeepLast: ptr.To[int32](1)},
			backups: []scheduledBackup{b("f1", "2030-01-01T00:00:00Z", backupFailed), b("f2", "2030-01-02T00:00:00Z", backupFailed)}},
		{name: "active and deleting backups are left alone", retention: etcdv1alpha1.Retention{KeepLast: ptr.To[int32](1)},
			backups: []scheduledBackup{
				b("good1", "2030-01-01T00:00:00Z", backupGood), b("good2", "2030-01-02T00:00:00Z", backupGood),
				{name: "going", at: at("2029-01-01T00:00:00Z"), state: backupGood, deleting: true},
				b("running", "2030-01-03T00:00:00Z", backupActive), b("waiting", "2029-12-01T00:00:00Z", backupActive),
			},
			want: []string{"good1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			loc := tc.loc
			if loc == nil {
				loc = time.UTC
			}
			drop := prune(tc.backups, tc.retention, loc, now)
			got := slices.Sorted(maps.Keys(drop))
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if want == nil {
				want = []string{}
			}
			if got == nil {
				got = []string{}
			}
			g.Expect(got).To(Equal(want))
			for name, why := range drop {
				g.Expect(why).NotTo(BeEmpty(), name)
			}
		})
	}
}

func TestViewBackup(t *testing.T) {
	c := func(t string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: "R", Message: t + " message"}
	}
	for _, tc := range []struct {
		name         string
		verify       bool
		conds        []metav1.Condition
		want         backupState
		wantVerified bool
		wantMessage  string
	}{
		{name: "waiting", verify: true, conds: []metav1.Condition{c("Complete", "False")}, want: backupActive, wantMessage: "Complete message"},
		{name: "written, verifying: not good yet", verify: true, conds: []metav1.Condition{c("Complete", "True"), c("Verified", "Unknown")}, want: backupActive, wantMessage: "Verified message"},
		{name: "verified", verify: true, conds: []metav1.Condition{c("Complete", "True"), c("Verified", "True")}, want: backupGood, wantVerified: true},
		{name: "written without verification", conds: []metav1.Condition{c("Complete", "True")}, want: backupGood},
		{name: "verification failed", verify: true, conds: []metav1.Condition{c("Complete", "True"), c("Verified", "False"), c("Failed", "True")},
			want: backupFailed, wantMessage: "Failed message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := testBackup(func(s *etcdv1alpha1.EtcdBackupSpec) { s.Verify = ptr.To(tc.verify) })
			b.CreationTimestamp = metav1.NewTime(t0)
			b.Status.Conditions = tc.conds
			v := viewBackup(b)
			g.Expect(v.state).To(Equal(tc.want))
			g.Expect(v.verified).To(Equal(tc.wantVerified))
			g.Expect(v.message).To(Equal(tc.wantMessage))
			g.Expect(v.at).To(Equal(t0), "without the annotation, its creation")
		})
	}
}
