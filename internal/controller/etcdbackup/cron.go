package etcdbackup

import (
	"fmt"
	"time"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
	"github.com/tend-dev/tend/internal/cronline"
)

// cronSchedule is a parsed spec.schedule in its time zone.
type cronSchedule struct {
	cronline.Schedule
	loc *time.Location
}

// next is the first run after t, zero when there is none within five
// years.
func (c cronSchedule) next(t time.Time) time.Time { return c.Next(t) }

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
	s, err := cronline.Parse(string(spec.Schedule), loc, now)
	if err != nil {
		return cronSchedule{}, fmt.Errorf("spec.schedule %q: %w", spec.Schedule, err)
	}
	return cronSchedule{Schedule: s, loc: loc}, nil
}

// lastRun is the latest run in (after, now], zero when there is none.
func lastRun(c cronSchedule, after, now time.Time) time.Time { return c.Last(after, now) }

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
