package scheduler

import (
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/history/upstream"
	"github.com/kira-scheduler/kira/jobs"
)

// A dependent slot (a job with after:) has no schedule: it fires once for
// each logical time T (an upstream fire's scheduled time) once every
// partition of every upstream has ended its fire at T, with T as the
// fire's scheduled time, so its execution id is the one a scheduled fire at
// T would have, and a takeover or a retry dedupes as for any fire. It fires
// the logical times in order, one at a time, after its own backlog (the
// in-doubt fire a takeover re-runs, manual triggers): its slot state's
// latest started or finished time is its watermark, and a logical time at
// or before it is never fired again. An upstream outcome the after: entry
// does not allow makes the fire a skip, recorded with its cause. Held by
// TestDependentFiresOncePerUpstreamFire, TestDependentSkipsWithTheCause,
// TestDependentChainAndFanIn, TestDependentTakenOverRunsOnce,
// TestDependentWaitsForAnUpstreamRetry,
// TestDependentInDoubtRunRerunsUnderItsID,
// TestCascadeRunsTheDependentsOfAManualRun and
// TestJobBecomingADependentStopsItsSchedule.

// afterState is what a dependent slot's holder keeps beside its recorded
// state, from its takeover to the end of its leadership.
type afterState struct {
	// acquiredAt is when the holder took the slot over: a logical time due
	// misfireThreshold or more before is missed (misfire policy), one due
	// later is late, not missed (afterState.missed).
	acquiredAt time.Time
	// freeSince is when the slot's newest record read at takeover ended:
	// its previous holder could start no logical time before.
	freeSince time.Time
	// queued is the latest logical time put in pending.
	queued time.Time
	// pending are the logical times decided and not yet run or recorded,
	// oldest first.
	pending []afterItem
	// inFlight is the logical time of the run started last, until its
	// result is final (no retry left).
	inFlight time.Time
}

type afterKind int

const (
	afterRun afterKind = iota
	afterSkip
	afterMissed
)

// afterItem is a dependent's decision about one logical time.
type afterItem struct {
	t       time.Time
	kind    afterKind
	reason  string // afterSkip, afterMissed: why
	misfire bool   // it was due misfireThreshold or more before the holder took the slot over
}

// afterAcquired starts a new holder's watch over its upstreams: what it
// owes is decided from the newest read, and a fresh read is asked for.
func (s *Scheduler) afterAcquired(sl *slot, read acquiredRead, now time.Time) {
	sl.after = afterState{acquiredAt: now, freeSince: read.lastEnded}
	s.upstream.leading.Store(true)
	ringBell(s.upstream.wake)
	s.afterEvaluate(sl, now)
}

// upstreamsRead takes the reader's newest read and lets every dependent
// slot held here decide the logical times it completes.
func (s *Scheduler) upstreamsRead() {
	read := s.upstream.take()
	if read == nil {
		return
	}
	s.upstreams = read
	now := s.cfg.Clock.Now()
	led := false
	for _, sl := range s.slots {
		if sl.job.spec.Dependent() && sl.held() {
			led = true
			if sl.phase != raising && sl.readAt == sl.token {
				s.afterEvaluate(sl, now)
			}
		}
	}
	s.upstream.leading.Store(led) // true again at the next takeover of a dependent slot
}

// afterEvaluate decides, in order, the logical times after the slot's
// watermark whose upstream fires have all ended, stopping at the first
// that has not; then runs what it can.
func (s *Scheduler) afterEvaluate(sl *slot, now time.Time) {
	if s.upstreams == nil || sl.after.acquiredAt.IsZero() {
		return
	}
	spec := sl.job.spec
	watermark := latest(latest(sl.recorded.Started, sl.recorded.Finished), sl.after.queued)
	var floor time.Time
	if !sl.recorded.Token.Valid() && watermark.IsZero() {
		// Never run: the upstream fires of its catchup_window are owed.
		floor = sl.after.acquiredAt.Add(-spec.CatchupWindow)
	}
	var items []afterItem
	for _, t := range upstream.Times(spec.After, s.upstreams.jobs, watermark) {
		if t.Before(floor) {
			continue
		}
		st := upstream.Decide(spec.After, s.upstreams.jobs, t)
		if !st.Ended {
			break
		}
		it := afterItem{t: t, misfire: sl.after.missed(st.At)}
		if st.Cause != "" {
			it.kind, it.reason = afterSkip, st.Cause
		}
		items = append(items, it)
	}
	if len(items) == 0 {
		return
	}
	sl.after.queued = items[len(items)-1].t
	applyMisfire(items, spec, now)
	sl.after.pending = append(sl.after.pending, items...)
	s.afterNext(sl, now)
}

// missed reports whether a logical time whose upstreams ended at ended
// was due (then, or when the previous holder's last run ended if later)
// misfireThreshold or more before the takeover. One due since (during a
// graceful handover, or a rebalance's drain) is late, not missed: it runs
// as usual under every policy, as a scheduled fire does (catchUp).
func (a afterState) missed(ended time.Time) bool {
	return latest(ended, a.freeSince).Before(a.acquiredAt.Add(-misfireThreshold))
}

// applyMisfire applies the job's misfire policy to the runs of items the
// slot missed (afterState.missed), as a takeover's catch-up does to the
// fires of a schedule: older than catchup_window, missed; under skip,
// missed; under fire-once, all but the latest missed, and that one too
// when a later logical time runs as usual (catchUp runs the late fire
// only); under fire-all, each runs.
func applyMisfire(items []afterItem, spec config.Job, now time.Time) {
	oldest := now.Add(-spec.CatchupWindow)
	var owed []int
	late := false // a logical time after the last owed one runs as usual
	for i := range items {
		it := &items[i]
		switch {
		case !it.misfire && it.kind == afterRun:
			late = true
		case !it.misfire || it.kind != afterRun:
		case it.t.Before(oldest):
			it.kind, it.reason = afterMissed, "older than catchup_window"
		default:
			owed, late = append(owed, i), false
		}
	}
	missed := owed
	switch spec.Misfire {
	case config.MisfireFireAll:
		missed = nil
	case config.MisfireFireOnce:
		if len(owed) > 0 && !late {
			missed = owed[:len(owed)-1]
		}
	}
	for _, i := range missed {
		items[i].kind, items[i].reason = afterMissed, "misfire policy "+string(spec.Misfire)
	}
}

// afterNext runs or records the slot's pending logical times, in order,
// while the slot is free: a skip or a miss is recorded and the next one
// taken; a run is started and the rest wait for its final result. A
// stopping member starts none: what it has not started is the next
// holder's, by the watermark in etcd.
func (s *Scheduler) afterNext(sl *slot, now time.Time) {
	if s.stopping || !sl.wants() || sl.phase != leading || len(sl.runs) > 0 || len(sl.owed.backlog) > 0 || sl.owed.queued != nil {
		return
	}
	if !sl.after.inFlight.IsZero() {
		if s.afterRetrying(sl) {
			return
		}
		sl.after.inFlight = time.Time{}
	}
	for len(sl.after.pending) > 0 {
		it := sl.after.pending[0]
		sl.after.pending = sl.after.pending[1:]
		cause := history.CauseSchedule
		if it.misfire {
			cause = history.CauseCatchup
		}
		f := fire{scheduled: it.t, cause: cause, attempt: 1, id: jobs.ExecutionID(sl.id.Job, sl.id.Partition, it.t), misfire: it.misfire}
		if it.kind != afterRun {
			s.afterRecord(sl, f, it, now)
			continue
		}
		sl.after.inFlight = it.t
		s.dispatch(sl, f, now)
		if len(sl.runs) > 0 {
			return
		}
	}
}

// afterRetrying reports whether the run of the slot's logical time in
// flight ended with a failure it will try again (retries.max).
func (s *Scheduler) afterRetrying(sl *slot) bool {
	st, t := sl.recorded, sl.after.inFlight
	if !st.Started.Equal(t) || !st.Finished.Equal(t) {
		return false // its start was not recorded, or a later fire was
	}
	failed := st.Outcome == string(jobs.Failed) || st.Outcome == string(jobs.TimedOut)
	return failed && st.StartedAttempt <= sl.job.spec.Retries.Max
}

// afterRecord records logical time it as skipped (an upstream outcome not
// allowed) or missed (misfire policy), as finished in the slot's state so
// the watermark passes it, and notifies it.
func (s *Scheduler) afterRecord(sl *slot, f fire, it afterItem, now time.Time) {
	outcome, policy := history.OutcomeSkipped, ""
	if it.kind == afterMissed {
		outcome, policy = history.OutcomeMissed, string(sl.job.spec.Misfire)
	}
	if f.scheduled.After(sl.recorded.Finished) {
		sl.recorded.Finished, sl.recorded.Outcome = f.scheduled, outcome
	}
	s.emit(Event{Kind: Skipped, Slot: sl.id, Token: sl.token, Execution: s.execution(sl, f), Cause: f.cause, Reason: it.reason, Policy: policy, At: now})
	r := history.Record{ExecutionID: f.id, ScheduledTime: f.scheduled, StartedAt: now, FinishedAt: now,
		Outcome: outcome, Attempt: 1, Cause: f.cause, Error: it.reason}
	s.record(sl, r, nil)
	s.notify(sl, r)
}

// becameDependent makes a held slot whose job now has after: stop its
// schedule: its armed fire and its start recorded ahead are taken back,
// and it fires after its upstreams as if taken over now: the upstream
// fires after its watermark (its last fire) that ended misfireThreshold or
// more before now are owed under its misfire policy (applyMisfire:
// fire-once runs the latest, fire-all each in catchup_window, skip none);
// later ones run as usual.
// A slot already a dependent keeps its takeover time.
func (s *Scheduler) becameDependent(sl *slot, now time.Time) {
	if sl.phase != leading || now.IsZero() {
		return
	}
	s.unschedule(sl)
	s.disarm(sl)
	takeBackAhead(sl)
	if sl.after.acquiredAt.IsZero() {
		sl.after = afterState{acquiredAt: now}
	}
	s.upstream.leading.Store(true)
	ringBell(s.upstream.wake)
}
