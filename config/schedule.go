package config

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // time zones work on machines without a zoneinfo database

	"github.com/robfig/cron/v3"
)

// Schedule gives the scheduled times of a job. Next is pure: the same t
// always gives the same answer, on every member.
type Schedule interface {
	// Next returns the first scheduled time strictly after t.
	Next(t time.Time) time.Time
}

var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule parses a cron expression: five or six fields (the optional
// first one is seconds), a descriptor such as @daily or "@every 10s", and an
// optional CRON_TZ=Zone prefix. Without a zone the schedule is in UTC (robfig's
// own default is the process's local zone, which members need not share).
func ParseSchedule(spec string) (Schedule, error) {
	return ParseScheduleIn(spec, "")
}

// ParseScheduleIn is ParseSchedule with a default zone (a job's timezone:
// field); a spec that names its own zone with CRON_TZ= must not have one too.
func ParseScheduleIn(spec, zone string) (Schedule, error) {
	if s, ok, err := parseAt(spec); ok {
		return s, err // its time has its zone; the job's zone only shows it
	}
	hasTZ := strings.HasPrefix(spec, "CRON_TZ=") || strings.HasPrefix(spec, "TZ=")
	switch {
	case zone != "" && hasTZ:
		return nil, fmt.Errorf("schedule %q sets CRON_TZ and the job sets timezone %q: keep one", spec, zone)
	case zone != "":
		spec = "CRON_TZ=" + zone + " " + spec
	case !hasTZ && !strings.HasPrefix(spec, "@every"):
		spec = "CRON_TZ=UTC " + spec
	}
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("invalid cron expression %q: %v", strings.TrimPrefix(spec, "CRON_TZ=UTC "), err)
	}
	switch s := s.(type) {
	case cron.ConstantDelaySchedule:
		return anchoredEvery{every: s.Delay}, nil
	case *cron.SpecSchedule:
		// robfig's own search walks real instants, which is already right
		// for wildcard jobs; only fixed-time jobs need the wall-clock rule.
		if s.Location == time.UTC || s.Hour&starBit != 0 || s.Minute&starBit != 0 {
			return s, nil
		}
		return newZoned(s), nil
	}
	return s, nil
}

// anchoredEvery fires at every multiple of its interval since Go's zero time,
// so "@every 10s" means the same instants on every member whenever it started.
type anchoredEvery struct {
	every time.Duration
}

func (a anchoredEvery) Next(t time.Time) time.Time {
	return t.Truncate(a.every).Add(a.every)
}

// starBit is robfig/cron's marker of a field written with '*'.
const starBit = 1 << 63

// zoned evaluates a fixed-time cron spec on the wall clock of its zone, for
// Vixie cron's rule on daylight-saving changes:
//   - a job at a fixed time (no '*' in its hour or minute field) that falls
//     into a skipped interval runs once, at the first instant after the jump;
//   - such a job that falls into a repeated interval runs once, at the first
//     occurrence;
//   - a job with '*' in its hour or minute field follows the new wall clock:
//     skipped times do not run, repeated times run again.
//
// robfig/cron alone skips the first case and runs the second twice.
type zoned struct {
	spec cron.SpecSchedule // the same fields, evaluated on a naive UTC wall clock
	loc  *time.Location
}

func newZoned(s *cron.SpecSchedule) zoned {
	naive := *s
	naive.Location = time.UTC
	return zoned{spec: naive, loc: s.Location}
}

// wall returns t's wall clock in the zone, as the same reading in UTC.
func (z zoned) wall(t time.Time) time.Time {
	l := t.In(z.loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// instants returns the instants at which the zone's clock reads w, in
// order: none in a skipped interval, two in a repeated one.
func (z zoned) instants(w time.Time) []time.Time {
	var out []time.Time
	for _, probe := range []time.Time{w.Add(-24 * time.Hour), w.Add(24 * time.Hour)} {
		_, offset := time.Date(probe.Year(), probe.Month(), probe.Day(), probe.Hour(), 0, 0, 0, z.loc).Zone()
		c := w.Add(-time.Duration(offset) * time.Second)
		if z.wall(c).Equal(w) && (len(out) == 0 || !out[0].Equal(c)) {
			out = append(out, c)
		}
	}
	if len(out) == 2 && out[1].Before(out[0]) {
		out[0], out[1] = out[1], out[0]
	}
	return out
}

// afterGap returns the first instant after the skipped interval containing w.
func (z zoned) afterGap(w time.Time) time.Time {
	x := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), z.loc)
	start, end := x.ZoneBounds()
	if z.wall(x).Before(w) {
		return end // Go read w in the zone before the jump
	}
	return start
}

// fold is how far the zone's clock is turned back within three hours of t
// (zero away from a fall-back change).
func (z zoned) fold(t time.Time) time.Duration {
	_, before := t.Add(-3 * time.Hour).In(z.loc).Zone()
	_, after := t.Add(3 * time.Hour).In(z.loc).Zone()
	if before > after {
		return time.Duration(before-after) * time.Second
	}
	return 0
}

func (z zoned) Next(t time.Time) time.Time {
	// Near a fall-back change, the wall clock repeats: times a little before
	// wall(t) happen again after t. Look back by the fold, and keep the
	// earliest instant after t.
	fold := z.fold(t)
	w := z.wall(t).Add(-fold)
	var best time.Time
	// Bounded: robfig's own search gives up after five years.
	for i := 0; i < 100000; i++ {
		w = z.spec.Next(w)
		if w.IsZero() || (!best.IsZero() && w.After(z.wall(best).Add(fold))) {
			break
		}
		consider := func(c time.Time) {
			if c.After(t) && (best.IsZero() || c.Before(best)) {
				best = c
			}
		}
		cands := z.instants(w)
		if len(cands) == 0 {
			consider(z.afterGap(w)) // skipped: run right after the jump
			continue
		}
		consider(cands[0]) // repeated: only the first occurrence
	}
	return best
}
