package automations

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule gives the fire times of a time-based trigger.
type Schedule interface {
	// Next returns the first fire time strictly after after, and false when there is none (an
	// at already past, an event or store trigger, a cron that never matches again).
	Next(after time.Time) (time.Time, bool)
}

// cronParser is robfig/cron's standard five fields (minute hour day-of-month month day-of-week),
// without descriptors such as @daily.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// ParseCron parses a standard 5-field cron expression evaluated in the IANA timezone tz (""
// for UTC). Errors are *FieldError naming trigger.cron or trigger.timezone.
func ParseCron(expr, tz string) (*CronSchedule, error) {
	if tz == "" {
		tz = DefaultTimezone
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "Local" {
		return nil, fieldErr("trigger.timezone", "unknown IANA timezone %q", tz)
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, fieldErr("trigger.cron", "%q: name the timezone in trigger.timezone, not in the expression", expr)
	}
	if len(strings.Fields(expr)) != 5 {
		return nil, fieldErr("trigger.cron", "%q: want 5 fields (minute hour day-of-month month day-of-week)", expr)
	}
	parsed, err := cronParser.Parse(expr)
	if err != nil {
		return nil, fieldErr("trigger.cron", "%q: %v", expr, err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, fieldErr("trigger.cron", "%q: not a field schedule", expr)
	}
	wall := *spec
	wall.Location = time.UTC // the spec runs over wall-clock minutes written as UTC times
	return &CronSchedule{spec: &wall, loc: loc}, nil
}

// CronSchedule is a cron expression in a timezone. Its fire times are the local wall-clock
// minutes the expression matches, each mapped to one instant:
//   - a local time that exists once is that instant;
//   - a local time repeated by a fall-back change fires once, at its first occurrence;
//   - a local time skipped by a spring-forward change fires at the next valid minute, the instant
//     of the change (Europe/Oslo 02:30 on 2026-03-29 fires at 03:00 CEST); several skipped
//     minutes fire once there.
type CronSchedule struct {
	spec *cron.SpecSchedule
	loc  *time.Location
}

// Location is the timezone the expression is evaluated in.
func (s *CronSchedule) Location() *time.Location { return s.loc }

// maxCronSteps bounds the walk over matching wall-clock minutes that resolve at or before after:
// a fall-back overlap of a few hours of every-minute matches, with a wide margin.
const maxCronSteps = 100000

// Next implements Schedule.
func (s *CronSchedule) Next(after time.Time) (time.Time, bool) {
	// The walk starts at after's own local minute: wall-clock times resolve monotonically, so no
	// earlier minute can resolve after after.
	c := wallClock(after.In(s.loc)).Truncate(time.Minute).Add(-time.Second)
	for range maxCronSteps {
		c = s.spec.Next(c)
		if c.IsZero() {
			return time.Time{}, false
		}
		if t := resolve(c, s.loc); t.After(after) {
			return t, true
		}
	}
	return time.Time{}, false
}

// wallClock is t's local date and time written as a UTC time.
func wallClock(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// resolve maps the wall-clock time c (written as UTC) in loc to its earliest instant, or, when c
// does not exist in loc (a gap), to the instant the gap ends. It walks the zones in effect
// within the widest offsets (-12h … +14h) around c using ZoneBounds.
func resolve(c time.Time, loc *time.Location) time.Time {
	var gapEnd time.Time
	u := c.Add(-15 * time.Hour)
	limit := c.Add(15 * time.Hour)
	for u.Before(limit) {
		local := u.In(loc)
		_, off := local.Zone()
		start, end := local.ZoneBounds()
		cand := c.Add(-time.Duration(off) * time.Second)
		if !cand.Before(start) && (end.IsZero() || cand.Before(end)) {
			return cand.In(loc)
		}
		if end.IsZero() {
			break
		}
		// At the boundary, the wall clock jumps from end's old reading to its new one; c in
		// between means c is skipped and fires at end.
		oldWall := end.Add(time.Duration(off) * time.Second)
		newWall := wallClock(end.In(loc))
		if gapEnd.IsZero() && !c.Before(oldWall) && c.Before(newWall) {
			gapEnd = end
		}
		u = end
	}
	if gapEnd.IsZero() {
		// Not reachable for real zone data; fall back to Go's own choice.
		return time.Date(c.Year(), c.Month(), c.Day(), c.Hour(), c.Minute(), c.Second(), 0, loc)
	}
	return gapEnd.In(loc)
}

// EverySchedule fires every Interval from a fixed Anchor (the automation's creation time), so a
// restart never shifts the grid: the fire times are Anchor + k·Interval, k ≥ 1. A zero Anchor
// stands for the Unix epoch (a grid aligned on UTC multiples of Interval).
type EverySchedule struct {
	Anchor   time.Time
	Interval time.Duration
}

// ParseEvery parses an every trigger ("15m", at least 1m, whole seconds) anchored at anchor.
func ParseEvery(every string, anchor time.Time) (*EverySchedule, error) {
	d, err := time.ParseDuration(every)
	switch {
	case err != nil:
		return nil, fieldErr("trigger.every", "%q is not a duration such as \"15m\" or \"1h30m\"", every)
	case d < MinEvery:
		return nil, fieldErr("trigger.every", "%q is under the minimum of 1m", every)
	case d%time.Second != 0:
		return nil, fieldErr("trigger.every", "%q is not a whole number of seconds", every)
	}
	return &EverySchedule{Anchor: anchor, Interval: d}, nil
}

// Next implements Schedule.
func (s *EverySchedule) Next(after time.Time) (time.Time, bool) {
	if s.Interval <= 0 {
		return time.Time{}, false
	}
	anchor := s.Anchor
	if anchor.IsZero() {
		anchor = time.Unix(0, 0).UTC()
	}
	if after.Before(anchor) {
		return anchor.Add(s.Interval), true
	}
	k := after.Sub(anchor)/s.Interval + 1
	return anchor.Add(k * s.Interval), true
}

// AtSchedule fires once, at At.
type AtSchedule struct{ At time.Time }

// ParseAt parses an at trigger (RFC 3339).
func ParseAt(at string) (*AtSchedule, error) {
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return nil, fieldErr("trigger.at", "%q is not an RFC 3339 time such as \"2026-12-01T07:00:00Z\"", at)
	}
	return &AtSchedule{At: t}, nil
}

// Next implements Schedule.
func (s *AtSchedule) Next(after time.Time) (time.Time, bool) {
	if s.At.After(after) {
		return s.At, true
	}
	return time.Time{}, false
}

// never is the Schedule of event and store triggers: they fire on input, never on time.
type never struct{}

func (never) Next(time.Time) (time.Time, bool) { return time.Time{}, false }

// NewSchedule is the Schedule of t, with anchor the origin of an every trigger. Event and store
// triggers get a Schedule that never fires on time. It checks only what fire times need (the
// cron, timezone, every and at values); Validate checks the rest.
func NewSchedule(t Trigger, anchor time.Time) (Schedule, error) {
	switch {
	case t.Cron != "":
		return ParseCron(t.Cron, t.Timezone)
	case t.Every != "":
		return ParseEvery(t.Every, anchor)
	case t.At != "":
		return ParseAt(t.At)
	case t.Event || t.Store != "":
		return never{}, nil
	}
	return nil, fieldErr("trigger", "set one of cron, every, at, event or store")
}

// Schedule is a's Schedule, anchored at a.Created.
func (a *Automation) Schedule() (Schedule, error) { return NewSchedule(a.Trigger, a.Created) }

// String describes the schedule for logs.
func (s *CronSchedule) String() string { return fmt.Sprintf("cron in %s", s.loc) }
