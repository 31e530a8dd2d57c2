package etcdbackup

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // The manager's image is FROM scratch, without a zone database.

	"github.com/robfig/cron/v3"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// cronSchedule is a parsed spec.schedule in its time zone.
type cronSchedule struct {
	spec *cron.SpecSchedule
	loc  *time.Location
}

// next is the first run after t, zero when there is none within five
// years.
func (c cronSchedule) next(t time.Time) time.Time { return c.spec.Next(t) }

// parseSchedule reads spec.schedule (five fields, or a macro such as
// @daily) in spec.timeZone (UTC by default). now serves to refuse a line
// that never comes due, such as the 30th of February.
func parseSchedule(spec *etcdv1alpha1.EtcdBackupScheduleSpec, now time.Time) (cronSchedule, error) {
	loc := time.UTC
	if tz := spec.TimeZone; tz != nil && *tz != "" {
		l, err := time.LoadLocation(*tz)
		if err != nil {
			return cronSchedule{}, fmt.Errorf("spec.timeZone %q is not a time zone of the IANA database, such as Europe/Berlin: %w", *tz, err)
		}
		loc = l
	}
	// The CRD refuses TZ= prefixes and @every; a line written before it
	// did must be refused here too.
	if strings.HasPrefix(spec.Schedule, "TZ=") || strings.HasPrefix(spec.Schedule, "CRON_TZ=") {
		return cronSchedule{}, fmt.Errorf("spec.schedule %q: set the time zone in spec.timeZone, not in the line", spec.Schedule)
	}
	parsed, err := cron.ParseStandard(spec.Schedule)
	if err != nil {
		return cronSchedule{}, fmt.Errorf("spec.schedule %q: %w", spec.Schedule, err)
	}
	s, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return cronSchedule{}, fmt.Errorf("spec.schedule %q: use five fields or one of @yearly, @monthly, @weekly, @daily and @hourly", spec.Schedule)
	}
	s.Location = loc
	c := cronSchedule{spec: s, loc: loc}
	if c.next(now).IsZero() {
		return cronSchedule{}, fmt.Errorf("spec.schedule %q never comes due (no run within five years)", spec.Schedule)
	}
	return c, nil
}

// lastRun is the latest run in (after, now], zero when there is none. It
// looks back in windows that double from a minute, so that a long outage
// of a frequent schedule costs no walk through every missed run.
func lastRun(c cronSchedule, after, now time.Time) time.Time {
	if !now.After(after) {
		return time.Time{}
	}
	for w := time.Minute; ; w *= 2 {
		from := now.Add(-w)
		if !from.After(after) {
			from = after
		}
		if t := c.next(from); !t.IsZero() && !t.After(now) {
			// The runs in (from, now] all lie in the older half of the
			// window, or the last window would have found them.
			for {
				n := c.next(t)
				if n.IsZero() || n.After(now) {
					return t
				}
				t = n
			}
		}
		if from.Equal(after) {
			return time.Time{}
		}
	}
}

// runDecision is what a schedule should do now.
type runDecision struct {
	// due is the run to take now; zero when none is.
	due time.Time
	// missed is a run that came too late, past startingDeadlineSeconds,
	// and is skipped.
	missed time.Time
	// next is the first run after now.
	next time.Time
}

// decideRun picks the run to take now: the latest run after earliest (the
// last run taken, or the schedule's creation), once, however many were
// missed; none when it is later than the deadline allows.
func decideRun(c cronSchedule, earliest, now time.Time, deadlineSeconds *int64) runDecision {
	d := runDecision{next: c.next(now)}
	last := lastRun(c, earliest, now)
	switch {
	case last.IsZero():
	case deadlineSeconds != nil && now.Sub(last) > time.Duration(*deadlineSeconds)*time.Second:
		d.missed = last
	default:
		d.due = last
	}
	return d
}

// periodsAfter is the second run after t: a backup of the run at t is
// stale from then, when no newer one completed.
func periodsAfter(c cronSchedule, t time.Time) time.Time {
	n := c.next(t)
	if n.IsZero() {
		return n
	}
	return c.next(n)
}
