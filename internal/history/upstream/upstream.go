// Package upstream decides, from an upstream job's execution records, when
// each of its fires has ended in every partition and with which outcomes:
// what a dependent job (after:) fires on, and what kira jobs shows of it.
// The scheduler's rules for a dependent slot are in
// internal/scheduler/after.go; the semantics in docs/semantics.md, "Jobs
// that run after other jobs".
package upstream

import (
	"fmt"
	"slices"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/jobs"
)

// Fires are one upstream job's fires as its records tell them: for each
// logical time (the scheduled time of a fire by schedule, catch-up or
// retry, or of a manual run requested with --cascade; other manual runs
// are not fires of the schedule) the newest attempt's
// record of each partition, and the latest logical time each partition has
// a record of a run of (not a skip nor a miss).
type Fires struct {
	job        string
	partitions int
	retries    int // the job's retries.max: a failure with retries left is not the end
	byTime     map[time.Time][]*history.Record
	latest     []time.Time
	times      []time.Time // the keys of byTime, oldest first (Sort)
}

// NewFires is an empty index of j's fires.
func NewFires(j config.Job) *Fires {
	return &Fires{job: j.Name, partitions: j.Partitions, retries: j.Retries.Max, byTime: map[time.Time][]*history.Record{}, latest: make([]time.Time, j.Partitions)}
}

// Add files record r under its fire's logical time (and a skip record
// standing for several fires under its last one too), keeping each
// partition's newest attempt. Records of other jobs, manual runs (but
// cascading ones) and resets are left out. Call Sort after the last Add.
func (f *Fires) Add(r history.Record) {
	if r.Job != f.job || r.Partition < 0 || r.Partition >= f.partitions || r.Outcome == history.OutcomeReset ||
		r.ExecutionID != jobs.ExecutionID(r.Job, r.Partition, r.ScheduledTime) && !jobs.Cascades(r.ExecutionID) {
		return
	}
	times := []time.Time{r.ScheduledTime}
	if r.LastScheduledTime != nil {
		times = append(times, *r.LastScheduledTime)
	}
	for _, t := range times {
		t = t.UTC()
		recs := f.byTime[t]
		if recs == nil {
			recs = make([]*history.Record, f.partitions)
			f.byTime[t] = recs
			f.times = append(f.times, t)
		}
		if old := recs[r.Partition]; old == nil || r.Attempt > old.Attempt || r.Attempt == old.Attempt && r.FinishedAt.After(old.FinishedAt) {
			c := r
			recs[r.Partition] = &c
		}
		if ran := r.Outcome != history.OutcomeSkipped && r.Outcome != history.OutcomeMissed; ran && t.After(f.latest[r.Partition]) {
			f.latest[r.Partition] = t
		}
	}
}

// Sort orders the logical times after the Adds.
func (f *Fires) Sort() { slices.SortFunc(f.times, time.Time.Compare) }

// After are the logical times after t, oldest first.
func (f *Fires) After(t time.Time) []time.Time {
	i, _ := slices.BinarySearchFunc(f.times, t, time.Time.Compare)
	for i < len(f.times) && !f.times[i].After(t) {
		i++
	}
	return f.times[i:]
}

// Partition is how partition p's fire at t ended: its outcome, when, and
// whether it has. A partition with no record of t that has a record of a
// later run missed t (it never ran it, or its record of t is gone past
// history_limit): its outcome is missed. A later skip does not count: the
// slot skips its next fires (overlap: skip) while the run of t goes on. A
// failure with retries left has not ended, unless the partition has run
// since (a holder that took over does not retry a recorded failure).
func (f *Fires) Partition(p int, t time.Time) (outcome string, at time.Time, ended bool) {
	var r *history.Record
	if recs := f.byTime[t]; recs != nil {
		r = recs[p]
	}
	later := f.latest[p].After(t)
	switch {
	case r == nil:
		return history.OutcomeMissed, time.Time{}, later
	case r.Outcome == string(jobs.Failed) || r.Outcome == string(jobs.TimedOut):
		return r.Outcome, r.FinishedAt, r.Attempt > f.retries || later
	default:
		return r.Outcome, r.FinishedAt, true
	}
}

// State is where a dependent stands on one logical time.
type State struct {
	// Ended says every partition of every upstream ended its fire.
	Ended bool
	// At is when the last of them ended, once Ended.
	At time.Time
	// Cause, once Ended, is why the dependent is skipped: the first
	// upstream partition that ended with an outcome its after: entry does
	// not allow ("" if none did).
	Cause string
	// Pending counts, per upstream, the partitions that have not ended.
	Pending map[string]int
}

// Decide is where a dependent with upstreams ups stands on logical time t,
// given its upstreams' fires (a missing one has not been read: nothing of
// it has ended).
func Decide(ups []config.Upstream, fires map[string]*Fires, t time.Time) State {
	st := State{Ended: true, Pending: map[string]int{}}
	for _, u := range ups {
		f := fires[u.Job]
		if f == nil {
			st.Ended = false
			st.Pending[u.Job] = -1
			continue
		}
		for p := 0; p < f.partitions; p++ {
			outcome, at, ended := f.Partition(p, t)
			if !ended {
				st.Ended = false
				st.Pending[u.Job]++
				continue
			}
			st.At = latestOf(st.At, at)
			if st.Cause == "" && !u.Allows(outcome) {
				st.Cause = fmt.Sprintf("upstream %s %s at %s", u.Job, outcome, t.Format(time.RFC3339))
				if f.partitions > 1 {
					st.Cause += fmt.Sprintf(" (partition %d)", p)
				}
			}
		}
	}
	if !st.Ended {
		st.Cause, st.At = "", time.Time{}
	}
	return st
}

// Times are the logical times of ups after t, oldest first, each once.
func Times(ups []config.Upstream, fires map[string]*Fires, t time.Time) []time.Time {
	var out []time.Time
	for _, u := range ups {
		if f := fires[u.Job]; f != nil {
			out = append(out, f.After(t)...)
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return slices.CompactFunc(out, time.Time.Equal)
}

func latestOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
