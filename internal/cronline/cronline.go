// Package cronline reads the cron lines of Tend's schedules (five fields,
// or a macro such as @daily) and answers when they come due: the next run
// after a time, and the latest run in a window, without a walk through
// every run a long outage missed.
package cronline

import (
	"errors"
	"strings"
	"time"
	_ "time/tzdata" // The manager's image is FROM scratch, without a zone database.

	"github.com/robfig/cron/v3"
)

// Schedule is a parsed cron line in its time zone.
type Schedule struct {
	spec *cron.SpecSchedule
}

// Parse reads line in loc. now serves to refuse a line that never comes
// due, such as the 30th of February. Its errors do not name the field the
// line came from; the caller does.
func Parse(line string, loc *time.Location, now time.Time) (Schedule, error) {
	// The CRDs refuse TZ= prefixes and @every; a line written before they
	// did must be refused here too.
	if strings.HasPrefix(line, "TZ=") || strings.HasPrefix(line, "CRON_TZ=") {
		return Schedule{}, errors.New("set the time zone in spec.timeZone, not in the line")
	}
	parsed, err := cron.ParseStandard(line)
	if err != nil {
		return Schedule{}, err
	}
	s, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return Schedule{}, errors.New("use five fields or one of @yearly, @monthly, @weekly, @daily and @hourly")
	}
	s.Location = loc
	c := Schedule{spec: s}
	if c.Next(now).IsZero() {
		return Schedule{}, errors.New("never comes due (no run within five years)")
	}
	return c, nil
}

// Next is the first run after t, zero when there is none within five
// years.
func (c Schedule) Next(t time.Time) time.Time { return c.spec.Next(t) }

// Last is the latest run in (after, now], zero when there is none. It
// looks back in windows that double from a minute, so that a long outage
// of a frequent schedule costs no walk through every missed run.
func (c Schedule) Last(after, now time.Time) time.Time {
	if !now.After(after) {
		return time.Time{}
	}
	for w := time.Minute; ; w *= 2 {
		from := now.Add(-w)
		if !from.After(after) {
			from = after
		}
		if t := c.Next(from); !t.IsZero() && !t.After(now) {
			// The runs in (from, now] all lie in the older half of the
			// window, or the last window would have found them.
			for {
				n := c.Next(t)
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
