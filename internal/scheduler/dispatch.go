package scheduler

import (
	"slices"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/jobs"
)

// busy reports whether the slot has a run in flight or catch-ups waiting.
func (sl *slot) busy() bool { return len(sl.runs) > 0 || len(sl.owed.backlog) > 0 }

// dispatch applies pause and overlap policies to a fire and starts it, or not.
func (s *Scheduler) dispatch(sl *slot, f fire, now time.Time) {
	if s.member.TrustLeft() <= 0 {
		s.emit(Event{Kind: Skipped, Slot: sl.id, Token: sl.token, Execution: s.execution(sl, f), Reason: "lease deadline passed", At: now})
		return
	}
	if s.paused[sl.id.Job] && (f.cause == history.CauseSchedule || f.cause == history.CauseCatchup) {
		s.emit(Event{Kind: Skipped, Slot: sl.id, Token: sl.token, Execution: s.execution(sl, f), Reason: "paused", At: now})
		return
	}
	if sl.busy() {
		switch {
		case f.cause == history.CauseManual:
			// An explicit request runs now, whatever the overlap policy.
		case f.cause == history.CauseSchedule && sl.job.spec.Misfire == config.MisfireFireAll &&
			(sl.owed.owesMisfires() || sl.lastMisfire || s.startFailing(sl)):
			// Under fire-all a fire is a misfire, not an overlap, while the
			// slot's misfires (a takeover's catch-ups and unfinished retry) wait
			// or run, or while etcd fails, refuses or hangs recording the
			// slot's previous start (the fire is then a misfire itself; not when etcd is merely
			// slow, where each backlog fire's own start write would feed a
			// spiral): it joins the backlog. The fires that join are not
			// misfires, so a slot whose runs outlast its period falls behind by
			// one round of them, not later and later. Held by
			// TestFireDuringCatchUpJoinsTheBacklog,
			// TestFireDuringTakeoverRetryJoinsTheBacklog,
			// TestFireAfterTheMisfiresIsAnOverlap,
			// TestFiresDueWhileEtcdStallsAreMisfires,
			// TestFireDueAfterARefusedStartIsAMisfire, and for the other
			// policies TestFireDuringTakeoverBacklogIsAnOverlapUnlessFireAll.
			f.misfire = s.startFailing(sl)
			sl.owed.backlog = append(sl.owed.backlog, f)
			s.emit(Event{Kind: Queued, Slot: sl.id, Token: sl.token, Execution: s.execution(sl, f), Cause: f.cause, Attempt: f.attempt, At: now})
			return
		case f.cause == history.CauseRetry || sl.job.spec.Overlap == config.OverlapQueue:
			if sl.owed.queued == nil {
				sl.owed.queued = &f
				s.emit(Event{Kind: Queued, Slot: sl.id, Token: sl.token, Execution: s.execution(sl, f), Cause: f.cause, Attempt: f.attempt, At: now})
				return
			}
			s.skip(sl, f, now, history.SkippedQueued)
			return
		case sl.job.spec.Overlap == config.OverlapSkip && f.cause == history.CauseSchedule &&
			sl.job.spec.Misfire == config.MisfireFireAll && sl.unrecorded.Load() > 0:
			// Under fire-all, whether a fire due while the slot's previous
			// start waits for etcd is an overlap or a misfire is known only
			// when that start is: it waits for it (decideUndecided), rather
			// than on how soon the writer counts as stalled, which depends on
			// the machine's speed. Held by
			// TestFireDueWhileAStartHangsIsNotLostWhenTheStartFails.
			sl.owed.undecided = append(sl.owed.undecided, f)
			s.emit(Event{Kind: Queued, Slot: sl.id, Token: sl.token, Execution: s.execution(sl, f), Cause: f.cause, Attempt: f.attempt, At: now})
			return
		case sl.job.spec.Overlap == config.OverlapSkip:
			s.skip(sl, f, now, history.SkippedRunning)
			return
		case sl.job.spec.Overlap == config.OverlapReplace:
			for _, cancel := range sl.runs {
				cancel()
			}
			sl.owed.backlog = nil
		}
	}
	s.start(sl, f)
}

// decideUndecided settles the fires that fell due while fr's start waited
// for etcd (owedFires.undecided), now that fr has ended: if fr ran, each
// was an overlap and is skipped; if its start was never recorded, each is
// a misfire, owed in the backlog in order of its time.
func (s *Scheduler) decideUndecided(sl *slot, fr finishedRun, now time.Time) {
	fs := sl.owed.undecided
	sl.owed.undecided = nil
	for _, f := range fs {
		if !fr.notStarted {
			s.skip(sl, f, now, history.SkippedRunning)
			continue
		}
		f.misfire = true
		i := slices.IndexFunc(sl.owed.backlog, func(o fire) bool { return o.cause == history.CauseSchedule && o.scheduled.After(f.scheduled) })
		if i < 0 {
			i = len(sl.owed.backlog)
		}
		sl.owed.backlog = slices.Insert(sl.owed.backlog, i, f)
	}
}

// startFailing reports whether etcd fails the slot's starts: it refused
// one whose result the loop has not taken yet, or one waits while the
// writer is stalled.
func (s *Scheduler) startFailing(sl *slot) bool {
	return sl.refused.Load() > 0 || sl.unrecorded.Load() > 0 && s.writer.Stalled()
}

// skip records a fire that was not started. While a run of the slot waits
// for etcd to record its start, the record is carried to the slot's next
// write (that run's result, or the resign) instead of a write of its own,
// and stored in the key of that write's record (history.Stored.Skipped):
// those writes queue behind the pending one anyway, writes of their own
// would fill the writer's queue when thousands of slots are taken at once,
// and keys of their own would cost etcd as much as runs past capacity.
// Held by TestSkipsWhileAStartIsUnrecordedGoWithTheNextWrite. So is it
// while a run of the slot is running and the writer is behind
// (fenced.Writer.Behind): past capacity, runs that outlast their period
// would otherwise write a skip for each run, etcd would pay as much as if
// none were skipped, and the writer's queue would stand; when etcd keeps
// up, a long run's skips are written as they come. Held by
// TestSkipsWhileTheWriterIsBehindGoWithTheRunsResult.
//
// A skip like the slot's previous one (same reason and trigger) whose
// record has not left the writer's queue, or is carried, is added to that
// record (history.Record.Repeats) instead: past capacity, when etcd is
// behind, skips then cost it nothing, and the fires that do run get the
// capacity. Held by TestSkipsWaitingForEtcdAreMerged.
func (s *Scheduler) skip(sl *slot, f fire, now time.Time, reason string) {
	s.recordSkipped(sl, s.skipRecord(sl, f, now, reason))
}

// skipRecord says that fire f was skipped, for reason: to the event's
// listeners, and as the record it returns.
func (s *Scheduler) skipRecord(sl *slot, f fire, now time.Time, reason string) history.Record {
	e := s.execution(sl, f)
	s.emit(Event{Kind: Skipped, Slot: sl.id, Token: sl.token, Execution: e, Reason: reason, At: now})
	return history.Record{ExecutionID: e.ID, ScheduledTime: f.scheduled, StartedAt: now, FinishedAt: now,
		Outcome: history.OutcomeSkipped, Attempt: f.attempt, Cause: f.cause, Error: reason}
}

// recordSkipped notifies skip record r and writes it, or adds it to the
// slot's previous skip record (see skip).
func (s *Scheduler) recordSkipped(sl *slot, r history.Record) {
	s.notify(sl, r)
	if n := len(sl.carried); n > 0 && sameSkip(sl.carried[n-1], r) {
		sl.carried[n-1] = mergeSkip(sl.carried[n-1], r)
		return
	}
	if s.amendQueuedSkip(sl, r) {
		return
	}
	if (sl.unrecorded.Load() > 0 || len(sl.runs) > 0 && s.writer.Behind()) && len(sl.carried) < maxCarried {
		sl.carried = append(sl.carried, r)
		return
	}
	s.recordSkip(sl, r)
}

// sameSkip reports whether skip record r can take in the skip next.
func sameSkip(r, next history.Record) bool {
	return r.Outcome == history.OutcomeSkipped && r.Error == next.Error && r.Cause == next.Cause && r.Attempt == next.Attempt
}

// mergeSkip is skip record r standing for the fires of skip record next as
// well.
func mergeSkip(r, next history.Record) history.Record {
	r.Repeats += next.Fires()
	last := next.ScheduledTime
	if next.LastScheduledTime != nil {
		last = *next.LastScheduledTime
	}
	r.LastScheduledTime = &last
	r.FinishedAt = next.FinishedAt
	return r
}

// maxCarried bounds the skip records a slot carries to its next write.
const maxCarried = 8

// takeCarried returns the slot's carried records and forgets them.
func (sl *slot) takeCarried() []history.Record {
	c := sl.carried
	sl.carried = nil
	return c
}

func (s *Scheduler) execution(sl *slot, f fire) jobs.Execution {
	return jobs.Execution{
		Job: sl.id.Job, Partition: sl.id.Partition, Partitions: sl.job.spec.Partitions,
		Token: sl.token, ID: f.id, ScheduledTime: f.scheduled, Member: s.member.ID(), LeaderKey: sl.leaderKey,
	}
}

// startWaiting starts the next catch-up fire or the queued fire once the slot is free.
// A stopping member starts none of a limited job's: it would wait for a
// permit it must not take (permits.go), and its recorded start would hide
// the unfinished fire before it from the next holder
// (TestQueuedFireOfAStoppingMemberIsLeftToTheNextHolder).
func (s *Scheduler) startWaiting(sl *slot, now time.Time) {
	if sl.phase != leading || len(sl.runs) > 0 || s.stopping && sl.job.limit.Limited() {
		return
	}
	if len(sl.owed.backlog) > 0 {
		if now.Before(sl.owed.holdUntil) {
			return // its head waits to be tried again (startAgainLater); a wake comes then
		}
		f := sl.owed.backlog[0]
		sl.owed.backlog = sl.owed.backlog[1:]
		s.dispatchFree(sl, f, now)
		return
	}
	if sl.owed.queued != nil {
		f := *sl.owed.queued
		sl.owed.queued = nil
		s.dispatchFree(sl, f, now)
		return
	}
	s.afterNext(sl, now) // a dependent's next logical time
}

// dispatchFree dispatches a fire on a slot known to have nothing running.
func (s *Scheduler) dispatchFree(sl *slot, f fire, now time.Time) {
	pending := sl.owed.backlog
	// The overlap policy sees a free slot; the state written meanwhile (the
	// start's) still names the rest owed (owedFires).
	sl.owed.backlog, sl.owed.aside = nil, pending
	s.dispatch(sl, f, now)
	sl.owed.backlog, sl.owed.aside = append(sl.owed.backlog, pending...), nil
}
