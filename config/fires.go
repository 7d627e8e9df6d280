package config

import (
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/kira-scheduler/kira/internal/shard"
)

// JitterOffset is the slot's fixed delay within the job's jitter: derived
// from the slot alone, so every member fires the slot at the same instant.
// A fire is due at its scheduled time plus this offset; its lateness is
// counted from then.
func (j Job) JitterOffset(s shard.Slot) time.Duration {
	if j.Jitter <= 0 {
		return 0
	}
	return time.Duration(xxhash.Sum64String(s.String()) % uint64(j.Jitter))
}

// Upcoming returns the job's next n scheduled times after from, in UTC,
// by the chain the scheduler follows: each fire's successor is the
// schedule's Next of that fire (scheduler's scheduleNext). Fewer than n
// when the schedule ends. kira next and kira validate --next print it;
// TestNextMatchesTheSchedulersFires holds it against a member's fires on
// daylight-saving days.
func (j Job) Upcoming(from time.Time, n int) ([]time.Time, error) {
	sched, err := j.ParsedSchedule()
	if err != nil {
		return nil, err
	}
	out := []time.Time{}
	for t := from; len(out) < n; {
		t = sched.Next(t.UTC())
		if t.IsZero() {
			break
		}
		out = append(out, t.UTC())
	}
	return out, nil
}
