package config

import (
	"fmt"
	"time"

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
// optional CRON_TZ=Zone prefix.
func ParseSchedule(spec string) (Schedule, error) {
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("invalid cron expression %q: %v", spec, err)
	}
	if every, ok := s.(cron.ConstantDelaySchedule); ok {
		return anchoredEvery{every: every.Delay}, nil
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
