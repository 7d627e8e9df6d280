package scheduler

import (
	"slices"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/fenced"
	"github.com/kira-scheduler/kira/jobs"
)

// misfireThreshold is how late a fire may start and still not count as
// missed (Quartz's misfireThreshold, much shorter): under misfire skip, a new
// holder runs a fire that fell due less than this before it took over.
const misfireThreshold = 500 * time.Millisecond

// maxMissedCount bounds how far back a catch-up counts missed fires.
const maxMissedCount = 100000

// catchUp decides what a new holder of a slot does about the fires it did not
// see, from the state its predecessors recorded, at now:
//   - a fire that was started but not finished runs again, with the same
//     execution id, as a retry (an idempotent receiver dedupes it);
//   - fires after that up to now are missed; the misfire policy picks which
//     run (none, the latest, or all oldest first), and fires older than the
//     catchup window are dropped. A fire less than misfireThreshold old is
//     late, not missed: it runs under every policy.
//
// A fire its previous holder had taken on and not started when it handed
// the slot over (SlotState.Owed) is owed, not missed: it runs under every
// policy, in its time's order, as that holder would have run it, so that a
// handover changes nothing of what runs (TestCatchUp,
// TestAFireQueuedAtAHandoverRunsOnTheNextHolder).
//
// A slot with no recorded state (never run) has nothing to catch up. It
// returns the fires to run in order, the missed fires not run (within the
// window), and how many older fires were dropped.
func catchUp(st history.SlotState, job config.Job, sched config.Schedule, now time.Time, executionID func(time.Time) string) (runs []fire, missed []time.Time, dropped int) {
	if !st.Token.Valid() {
		return nil, nil, 0
	}
	oldest := now.Add(-job.CatchupWindow)
	from := st.Finished
	if st.Unfinished() {
		from = st.Started
		if st.Started.After(now) {
			// Recorded ahead of its time and not due yet: the normal schedule runs it.
			from = st.Finished
		} else if !st.Started.Before(oldest) {
			runs = append(runs, fire{scheduled: st.Started, cause: history.CauseRetry, attempt: st.StartedAttempt + 1, id: st.StartedID})
		} else {
			dropped++
		}
	}
	owed := owedRuns(st, from, oldest, now, executionID)
	if from.IsZero() {
		// No fire ever finished here, and none is unfinished: the slot was
		// handed over before its first fire (its start recorded ahead, not
		// due yet). Nothing was missed.
		return withOwed(runs, owed), nil, dropped
	}
	var inWindow []time.Time
	for t := sched.Next(from); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		if t.Before(oldest) {
			dropped++
			if dropped >= maxMissedCount {
				// Skip ahead: counting further back is not worth the work.
				t = oldest.Add(-time.Nanosecond)
			}
			continue
		}
		if !slices.ContainsFunc(owed, func(f fire) bool { return f.scheduled.Equal(t) }) {
			inWindow = append(inWindow, t)
		}
	}
	runs, missed = applyPolicy(job.Misfire, inWindow, now, runs, executionID)
	return withOwed(runs, owed), missed, dropped
}

// applyPolicy adds to runs the missed fires of inWindow that the misfire
// policy runs, and returns them with the missed ones it does not run.
func applyPolicy(policy config.Misfire, inWindow []time.Time, now time.Time, runs []fire, executionID func(time.Time) string) ([]fire, []time.Time) {
	var missed []time.Time
	switch policy {
	case config.MisfireSkip:
		missed = inWindow
		if n := len(inWindow); n > 0 && now.Sub(inWindow[n-1]) < misfireThreshold {
			// Late, not missed: the slot changed hands around its time
			// (a graceful handover takes milliseconds). Held by TestCatchUp.
			missed = inWindow[:n-1]
			runs = append(runs, fire{scheduled: inWindow[n-1], cause: history.CauseCatchup, attempt: 1, id: executionID(inWindow[n-1])})
		}
	case config.MisfireFireOnce:
		if n := len(inWindow); n > 0 {
			missed = inWindow[:n-1]
			runs = append(runs, fire{scheduled: inWindow[n-1], cause: history.CauseCatchup, attempt: 1, id: executionID(inWindow[n-1])})
		}
	case config.MisfireFireAll:
		for _, t := range inWindow {
			runs = append(runs, fire{scheduled: t, cause: history.CauseCatchup, attempt: 1, id: executionID(t)})
		}
	}
	return runs, missed
}

// owedRuns are the fires of st.Owed after from, within the catchup window
// (oldest) and due by now.
func owedRuns(st history.SlotState, from, oldest, now time.Time, executionID func(time.Time) string) []fire {
	var out []fire
	for _, t := range st.Owed {
		if t.After(from) && !t.Before(oldest) && !t.After(now) {
			out = append(out, fire{scheduled: t, cause: history.CauseCatchup, attempt: 1, id: executionID(t)})
		}
	}
	return out
}

// withOwed merges owed into runs, keeping a retry of the unfinished fire
// first and the rest in their time's order.
func withOwed(runs, owed []fire) []fire {
	if len(owed) == 0 {
		return runs
	}
	first := 0
	if len(runs) > 0 && runs[0].cause == history.CauseRetry {
		first = 1
	}
	rest := slices.Concat(runs[first:], owed)
	slices.SortStableFunc(rest, func(a, b fire) int { return a.scheduled.Compare(b.scheduled) })
	return append(runs[:first:first], rest...)
}

// acquired runs what a new holder owes: fires its predecessors started but
// did not finish, missed fires by the misfire policy, and waiting manual
// triggers; then the slot follows its schedule.
func (s *Scheduler) acquired(sl *slot, read acquiredRead, triggers []fire, now time.Time) {
	st := read.state
	sl.recorded, sl.ahead, sl.carried, sl.readAt, sl.endedTriggers = st, nil, nil, sl.token, nil
	switch {
	case read.unreadable != nil:
		s.stateReset(sl, read.unreadable, now)
	case read.left:
		s.startAfresh(sl, read)
	case read.journaled:
		s.takeoverWrite(sl, read.copies)
	}
	executionID := func(t time.Time) string { return jobs.ExecutionID(sl.id.Job, sl.id.Partition, t) }
	runs, missed, dropped := catchUp(st, sl.job.spec, sl.job.schedule, now.UTC(), executionID)
	sl.recorded.Owed = nil // taken on: this holder's own writes say nothing of them
	if read.unreadable == nil {
		r, m := missedAt(st, sl.job.spec, now.UTC(), executionID)
		runs, missed = append(runs, r...), append(missed, m...)
	}
	if dropped > 0 {
		sl.recorded.MissedDropped += int64(dropped)
		s.emit(Event{Kind: Skipped, Slot: sl.id, Token: sl.token, Reason: "missed fires older than catchup_window", Count: dropped, Policy: "catchup_window", At: now})
	}
	const maxMissedRecords = 20
	if len(missed) > maxMissedRecords {
		missed = missed[len(missed)-maxMissedRecords:]
	}
	for _, t := range missed {
		f := fire{scheduled: t, cause: history.CauseCatchup, attempt: 1, id: jobs.ExecutionID(sl.id.Job, sl.id.Partition, t)}
		s.emit(Event{Kind: Skipped, Slot: sl.id, Token: sl.token, Execution: s.execution(sl, f), Cause: history.CauseCatchup,
			Reason: "missed (misfire " + string(sl.job.spec.Misfire) + ")", Policy: string(sl.job.spec.Misfire), At: now})
		r := history.Record{ExecutionID: f.id, ScheduledTime: t, StartedAt: now, FinishedAt: now,
			Outcome: history.OutcomeMissed, Attempt: 1, Cause: history.CauseCatchup, Error: "misfire policy " + string(sl.job.spec.Misfire)}
		s.record(sl, r, nil)
		s.notify(sl, r)
	}
	for i := range runs {
		runs[i].misfire = true
	}
	for _, f := range triggers {
		if notYet(f, now) {
			s.waitOneOff(sl, f)
		} else {
			runs = append(runs, f)
		}
	}
	sl.owed.backlog = runs
	// Schedule after the last fire this slot finished, if that is later than
	// our now: a previous owner whose clock ran ahead has run fires that are
	// still in our future, and running them again would be a duplicate.
	// Held by TestNewOwnerDoesNotRerunFiresOfAnAheadClock.
	s.scheduleNext(sl, latest(now, sl.recorded.Finished))
	if a := s.takeOverAhead(sl); a != nil {
		s.writer.Enqueue(fenced.Write{Claim: sl.claim(), Ops: s.stateOps(sl), Done: a.done})
	}
	if sl.job.spec.Dependent() {
		s.afterAcquired(sl, read, now)
	}
	s.startWaiting(sl, now)
}

// takeOverAhead records the new holder's next fire as started ahead, so it
// is armed like any other. When the state read already names that fire as
// started, its predecessor recorded it ahead and handed the slot over
// before its time (endLeadership leaves that record; the next fire is
// always after now and after the last finished one, so it cannot have
// run): it is recorded again, under this holder's token, where recordAhead
// would refuse it and the fire would start at its time, after a round trip
// to etcd. The execution is the same either way: the normal schedule runs
// that fire (catchUp). Held by TestAFireHandedOverBeforeItsTimeIsArmed.
func (s *Scheduler) takeOverAhead(sl *slot) *aheadRecord {
	if sl.recorded.Started.Equal(sl.nextScheduled) {
		return s.recordAheadOf(sl)
	}
	return s.recordAhead(sl)
}
