package config

import (
	"fmt"
	"strings"
	"time"
)

// atPrefix starts a schedule that fires once: "@at 2027-01-01T09:00:00+03:00"
// (dkron's @at), an RFC 3339 time with its zone.
const atPrefix = "@at"

// atSchedule fires once, at its time: Next of any earlier instant is that
// time, and of that time or later the zero time, which the scheduler reads
// as "never again" (scheduleNext). Held by TestAtScheduleFiresOnce and, on
// a member, TestAtJobFiresOnceAndNeverAgain.
type atSchedule struct{ at time.Time }

func (a atSchedule) Next(t time.Time) time.Time {
	if t.Before(a.at) {
		return a.at
	}
	return time.Time{}
}

// parseAt parses spec if it is an @at schedule; ok says whether it is.
func parseAt(spec string) (s Schedule, ok bool, err error) {
	rest, found := strings.CutPrefix(spec, atPrefix)
	if !found || rest != "" && rest[0] != ' ' {
		return nil, false, nil
	}
	rest = strings.TrimSpace(rest)
	t, err := time.Parse(time.RFC3339, rest)
	if err != nil {
		return nil, true, fmt.Errorf("schedule %q: want @at and an RFC 3339 time with its zone, such as \"@at 2027-01-01T09:00:00+03:00\" or \"@at 2027-01-01T06:00:00Z\"", spec)
	}
	return atSchedule{at: t.UTC()}, true, nil
}

// At returns the time of the job's @at schedule, if it has one.
func (j Job) At() (time.Time, bool) {
	s, ok, err := parseAt(j.Schedule)
	if !ok || err != nil {
		return time.Time{}, false
	}
	return s.(atSchedule).at, true
}

// pastAt checks that an @at job's time is after now (when now is set: a
// check of a catalog file about to be applied, not of one a member runs).
// A past time is an error, unless the job sets (explicitly) a misfire
// policy that runs a missed fire late, which makes it a warning.
// Held by TestAtValidation.
func (v *validator) pastAt(jp fieldPath, set Misfire, j Job) {
	at, ok := j.At()
	if !ok || v.now.IsZero() || at.After(v.now) {
		return
	}
	field := jp.child("schedule")
	now := v.now.UTC().Format(time.RFC3339)
	if set != MisfireFireOnce && set != MisfireFireAll {
		v.addf(field, "%s is past (now %s): set a later time, remove the job, or set misfire: fire-once (or fire-all) to run it late if it never ran, within catchup_window", j.Schedule, now)
		return
	}
	v.warnf(field, "%s is past (now %s): under misfire %s it runs late only if it never ran and is within catchup_window (%s), else never", j.Schedule, now, j.Misfire, j.CatchupWindow)
}
