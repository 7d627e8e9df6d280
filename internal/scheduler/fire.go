package scheduler

import (
	"container/heap"
	"github.com/kira-scheduler/kira/config"
	"time"

	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/jobs"
)

// fire is one execution to start: a scheduled time, why, and which attempt.
type fire struct {
	scheduled time.Time
	cause     history.Cause
	attempt   int
	id        string // execution id; derived from the scheduled time unless manual
	// triggerKey is the control key of a manual trigger: marked with its
	// start, deleted with its final result (startedValue).
	triggerKey string
	triggerRev int64 // the trigger key's create revision
	// oneOff marks a manual trigger with a time (kira trigger --at): it
	// does not run before scheduled (oneoff.go).
	oneOff bool
	// misfire marks a fire the slot could not run at its time and owes: a
	// new holder's catch-ups and the retry of a start its previous holder
	// left unfinished (catchUp's), and under fire-all a scheduled fire that
	// came while etcd could not record its predecessor's start. While one
	// waits or runs, a scheduled fire joins the backlog under fire-all; the
	// fires that join so are not misfires (dispatch).
	misfire bool
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// scheduleNext puts a leading slot in the heap for its next scheduled time after t.
func (s *Scheduler) scheduleNext(sl *slot, t time.Time) {
	sl.nextScheduled = sl.job.schedule.Next(t.UTC())
	if sl.nextScheduled.IsZero() {
		return // a schedule that never fires again
	}
	sl.next = sl.nextScheduled.Add(sl.job.spec.JitterOffset(sl.id))
	sl.wakeAt = sl.next.Add(-s.cfg.ArmAhead)
	if sl.heapIndex >= 0 {
		heap.Fix(&s.heap, sl.heapIndex)
	} else {
		heap.Push(&s.heap, sl)
	}
}

// resume puts back in the heap a leading slot that was taken out of it
// while its runs drained to resign, from the fire it was to fire next (by
// its job's schedule now, which may have changed meanwhile, or become
// after: and fire nothing): the fires that fell due meanwhile are
// dispatched, queued or recorded as skipped as for a loop that fell behind
// (fireDue), not passed over. Held by
// TestFiresDueWhileUnwantedAreHandledWhenWantedAgain and
// TestJobBecomingADependentStopsItsSchedule.
func (s *Scheduler) resume(sl *slot) {
	from := s.cfg.Clock.Now()
	if !sl.nextScheduled.IsZero() {
		from = sl.nextScheduled.Add(-time.Nanosecond)
	}
	s.scheduleNext(sl, from)
}

// unschedule takes a slot out of the timer heap, if it is there.
func (s *Scheduler) unschedule(sl *slot) {
	if sl.heapIndex >= 0 {
		heap.Remove(&s.heap, sl.heapIndex)
	}
}

// fireDue dispatches every slot whose fire time has come, and arms the free
// slots whose fire time is less than ArmAhead away.
func (s *Scheduler) fireDue() {
	now := s.cfg.Clock.Now()
	for len(s.heap) > 0 && !s.heap[0].wakeAt.After(now) {
		sl := s.heap[0]
		if sl.next.After(now) {
			if !s.arm(sl, now) {
				sl.wakeAt = sl.next // dispatched at its time instead
				heap.Fix(&s.heap, sl.heapIndex)
			}
			continue
		}
		f := sl.scheduledFire()
		scheduled := f.scheduled
		next := sl.job.schedule.Next(scheduled)
		if !next.IsZero() && !next.Add(sl.job.spec.JitterOffset(sl.id)).After(now) {
			if sl.job.spec.Misfire == config.MisfireFireAll {
				s.queueBehind(sl, f, now)
				continue
			}
			// The loop fell behind (a stalled process, a jumped clock): the
			// fires in between are skipped, not burst through, and recorded
			// as one skip record standing for all of them.
			s.skipBehind(sl, next, now)
			s.scheduleNext(sl, now)
		} else {
			s.scheduleNext(sl, scheduled)
		}
		if sl.nextScheduled.IsZero() {
			s.unschedule(sl)
		}
		s.dispatch(sl, f, now)
	}
}

// scheduledFire is the slot's next fire by its schedule.
func (sl *slot) scheduledFire() fire {
	t := sl.nextScheduled
	return fire{scheduled: t, cause: history.CauseSchedule, attempt: 1, id: jobs.ExecutionID(sl.id.Job, sl.id.Partition, t)}
}

// skipBehind records the fires of the slot from first up to now that the
// loop fell behind on, as one skip record (history.Record.Repeats), counting
// at most maxBehindCount of them. Held by TestFiresFallenBehindAreRecorded.
func (s *Scheduler) skipBehind(sl *slot, first, now time.Time) {
	s.skipFires(sl, first, now.Add(time.Nanosecond), now)
}

// skipFires records the slot's fires from first until before (and not
// after now), as one skip record, counting at most maxBehindCount of them;
// it returns the fire after the last it counted.
func (s *Scheduler) skipFires(sl *slot, first, before, now time.Time) time.Time {
	jitter := sl.job.spec.JitterOffset(sl.id)
	last, n := first, 1
	t := sl.job.schedule.Next(first)
	for ; !t.IsZero() && !t.Add(jitter).After(now) && t.Before(before) && n < maxBehindCount; t = sl.job.schedule.Next(t) {
		last, n = t, n+1
	}
	f := fire{scheduled: first, cause: history.CauseSchedule, attempt: 1, id: jobs.ExecutionID(sl.id.Job, sl.id.Partition, first)}
	r := s.skipRecord(sl, f, now, "fell behind schedule")
	if n > 1 {
		r.Repeats, r.LastScheduledTime = n-1, &last
	}
	s.recordSkipped(sl, r)
	return t
}

// queueBehind is fell-behind under fire-all: fire f and the slot's fires
// due since, within its catchup_window, join the slot's backlog in order as
// misfires and run one at a time, as a takeover's catch-ups do; older ones
// are recorded as skipped, as are those past maxBehindCount. Held by
// TestFiresFallenBehindRunUnderFireAll.
func (s *Scheduler) queueBehind(sl *slot, f fire, now time.Time) {
	jitter, oldest := sl.job.spec.JitterOffset(sl.id), now.Add(-sl.job.spec.CatchupWindow)
	due := func(t time.Time) bool { return !t.IsZero() && !t.Add(jitter).After(now) }
	t := f.scheduled
	if t.Before(oldest) {
		t = s.skipFires(sl, t, oldest, now)
		if t.Before(oldest) { // more than maxBehindCount before the window
			t = sl.job.schedule.Next(oldest.Add(-time.Nanosecond))
		}
	}
	for n := 0; due(t); t, n = sl.job.schedule.Next(t), n+1 {
		if n == maxBehindCount {
			s.skipFires(sl, t, now.Add(time.Nanosecond), now)
			break
		}
		q := fire{scheduled: t, cause: history.CauseSchedule, attempt: 1, id: jobs.ExecutionID(sl.id.Job, sl.id.Partition, t), misfire: true}
		sl.owed.backlog = append(sl.owed.backlog, q)
		s.emit(Event{Kind: Queued, Slot: sl.id, Token: sl.token, Execution: s.execution(sl, q), Cause: q.cause, Attempt: q.attempt, At: now})
	}
	s.scheduleNext(sl, now)
	if sl.nextScheduled.IsZero() {
		s.unschedule(sl)
	}
	s.startWaiting(sl, now)
}

// maxBehindCount bounds the fires one skip record of a loop that fell
// behind counts: counting walks the schedule, and a clock that jumped a
// year over a slot firing every second must not stall the loop.
const maxBehindCount = 1000
