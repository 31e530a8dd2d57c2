package etcdbackup

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

func mustSchedule(t *testing.T, line string, tz string) cronSchedule {
	t.Helper()
	spec := &etcdv1alpha1.EtcdBackupScheduleSpec{Schedule: etcdv1alpha1.CronSchedule(line)}
	if tz != "" {
		spec.TimeZone = &tz
	}
	c, err := parseSchedule(spec, t0)
	if err != nil {
		t.Fatalf("parsing %q: %v", line, err)
	}
	return c
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestParseSchedule(t *testing.T) {
	for _, tc := range []struct {
		line, tz string
		wantErr  string
	}{
		{line: "0 3 * * *"},
		{line: "*/15 0-6 1,15 JAN-jun mon-FRI"},
		{line: "@daily"},
		{line: "@hourly", tz: "Europe/Berlin"},
		{line: "0 3 * * *", tz: "Mars/Olympus", wantErr: `spec.timeZone "Mars/Olympus" is not a time zone`},
		{line: "0 3 * *", wantErr: "expected exactly 5 fields"},
		{line: "61 * * * *", wantErr: "above maximum"},
		{line: "@every 1h", wantErr: "use five fields or one of"},
		{line: "CRON_TZ=UTC 0 3 * * *", wantErr: "set the time zone in spec.timeZone"},
		{line: "0 0 30 2 *", wantErr: "never comes due"},
	} {
		t.Run(tc.line+" "+tc.tz, func(t *testing.T) {
			g := NewWithT(t)
			spec := &etcdv1alpha1.EtcdBackupScheduleSpec{Schedule: etcdv1alpha1.CronSchedule(tc.line)}
			if tc.tz != "" {
				spec.TimeZone = &tc.tz
			}
			_, err := parseSchedule(spec, t0)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func TestDecideRun(t *testing.T) {
	for _, tc := range []struct {
		name, line, tz string
		earliest, now  string
		deadline       *int64
		due, missed    string
		next           string
	}{
		{name: "nothing due before the first run", line: "0 3 * * *",
			earliest: "2030-01-01T10:00:00Z", now: "2030-01-02T02:59:59Z", next: "2030-01-02T03:00:00Z"},
		{name: "due at the run", line: "0 3 * * *",
			earliest: "2030-01-01T10:00:00Z", now: "2030-01-02T03:00:00Z", due: "2030-01-02T03:00:00Z", next: "2030-01-03T03:00:00Z"},
		{name: "a run already taken is not due again", line: "0 3 * * *",
			earliest: "2030-01-02T03:00:00Z", now: "2030-01-02T03:00:05Z", next: "2030-01-03T03:00:00Z"},
		{name: "many missed: only the latest, once", line: "*/5 * * * *",
			earliest: "2030-01-01T00:00:00Z", now: "2030-01-03T07:33:00Z", due: "2030-01-03T07:30:00Z", next: "2030-01-03T07:35:00Z"},
		{name: "a year down, minutely: still the latest", line: "* * * * *",
			earliest: "2029-01-01T00:00:00Z", now: "2030-01-03T07:33:30Z", due: "2030-01-03T07:33:00Z", next: "2030-01-03T07:34:00Z"},
		{name: "a sparse schedule long missed", line: "0 3 1 1 *",
			earliest: "2025-06-01T00:00:00Z", now: "2030-01-03T00:00:00Z", due: "2030-01-01T03:00:00Z", next: "2031-01-01T03:00:00Z"},
		{name: "within the starting deadline", line: "0 3 * * *", deadline: ptr.To[int64](600),
			earliest: "2030-01-01T10:00:00Z", now: "2030-01-02T03:09:00Z", due: "2030-01-02T03:00:00Z", next: "2030-01-03T03:00:00Z"},
		{name: "past the starting deadline: skipped", line: "0 3 * * *", deadline: ptr.To[int64](600),
			earliest: "2030-01-01T10:00:00Z", now: "2030-01-02T03:11:00Z", missed: "2030-01-02T03:00:00Z", next: "2030-01-03T03:00:00Z"},
		{name: "in the schedule's time zone", line: "0 3 * * *", tz: "Europe/Berlin",
			earliest: "2030-01-01T10:00:00Z", now: "2030-01-02T02:00:00Z", due: "2030-01-02T02:00:00Z", next: "2030-01-03T02:00:00Z"},
		{name: "across the spring change of summer time", line: "30 1 * * *", tz: "Europe/Berlin",
			earliest: "2030-03-30T00:30:00Z", now: "2030-03-31T00:30:00Z", due: "2030-03-31T00:30:00Z", next: "2030-03-31T23:30:00Z"},
		{name: "a macro", line: "@weekly",
			earliest: "2030-01-01T00:00:00Z", now: "2030-01-10T00:00:00Z", due: "2030-01-06T00:00:00Z", next: "2030-01-13T00:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := mustSchedule(t, tc.line, tc.tz)
			d := decideRun(c, at(tc.earliest), at(tc.now), tc.deadline)
			check := func(got time.Time, want, what string) {
				if want == "" {
					g.Expect(got.IsZero()).To(BeTrue(), "%s: %s", what, got)
					return
				}
				g.Expect(got).To(BeTemporally("==", at(want)), what)
			}
			check(d.due, tc.due, "due")
			check(d.missed, tc.missed, "missed")
			check(d.next, tc.next, "next")
		})
	}
}

func TestLastRunAgreesWithWalkingForward(t *testing.T) {
	for _, line := range []string{"* * * * *", "*/7 * * * *", "0 3 * * *", "* 3 * * *", "15 */6 1-7 * MON", "@monthly", "0 0 29 2 *"} {
		c := mustSchedule(t, line, "America/New_York")
		// Across the start of summer time in New York, 2030-03-10.
		earliest := at("2030-02-28T00:00:00Z")
		for _, now := range []string{"2030-02-28T00:00:30Z", "2030-03-01T12:00:00Z", "2030-03-10T06:59:00Z", "2030-03-10T07:30:00Z", "2030-03-12T00:00:00Z"} {
			var want time.Time
			for t := c.next(earliest); !t.IsZero() && !t.After(at(now)); t = c.next(t) {
				want = t
			}
			NewWithT(t).Expect(lastRun(c, earliest, at(now))).To(Equal(want), "%s at %s", line, now)
		}
	}
}
