package scheduler

import (
	"errors"
	"iter"
	"sync/atomic"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/fenced"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
)

type finishedRun struct {
	slot       shard.Slot
	run        uint64
	fire       fire
	exec       jobs.Execution
	res        jobs.Result
	started    time.Time
	finished   time.Time
	notStarted bool   // its start could not be recorded, so it did not run
	withdrawn  bool   // its trigger was gone (cancelled) when its start was written: nothing to record
	refused    bool   // etcd refused its start (counted in slot.refused)
	traceID    string // the execution's trace, if its span is recorded
	// sampled: the span is exported, so its trace id goes in the record
	// (TestExecutionsAreTraced); an unsampled trace is nowhere to link to.
	sampled bool
}

// finishedRuns is where execution goroutines leave their results, for the
// loop to take in batches: put never blocks, and rings bell (capacity one) so
// the loop knows there is something to take. A lock-free stack: thousands of
// runs of one second end together, and must not queue for a lock.
type finishedRuns struct {
	head atomic.Pointer[finishedNode]
	bell chan struct{}
}

type finishedNode struct {
	run  finishedRun
	next *finishedNode
}

func newFinishedRuns() *finishedRuns { return &finishedRuns{bell: make(chan struct{}, 1)} }

func (f *finishedRuns) put(r finishedRun) {
	n := &finishedNode{run: r}
	for {
		n.next = f.head.Load()
		if f.head.CompareAndSwap(n.next, n) {
			break
		}
	}
	ringBell(f.bell)
}

// take returns what was put since the last take, in the order it was put.
// It reverses the list in place rather than copying it into a slice, which
// would allocate on every take of a whole second's runs.
// Held by TestFinishedRunsAreTakenInOrder.
func (f *finishedRuns) take() iter.Seq[finishedRun] {
	var oldest *finishedNode
	for n := f.head.Swap(nil); n != nil; {
		next := n.next
		n.next = oldest
		oldest, n = n, next
	}
	return func(yield func(finishedRun) bool) {
		for n := oldest; n != nil; n = n.next {
			if !yield(n.run) {
				return
			}
		}
	}
}

func (s *Scheduler) runEnded(fr finishedRun) {
	if fr.fire.triggerKey != "" {
		delete(s.triggering, fr.fire.triggerKey)
	}
	sl, ok := s.slots[fr.slot]
	if !ok {
		return
	}
	if fr.refused {
		sl.refused.Add(-1)
	}
	if cancel, ok := sl.runs[fr.run]; ok {
		cancel()
		delete(sl.runs, fr.run)
		s.running--
	}
	if sl.armed != nil && sl.armed.run == fr.run {
		sl.armed = nil
	}
	now := s.cfg.Clock.Now()
	s.emit(Event{Kind: Finished, Slot: sl.id, Token: fr.exec.Token, Execution: fr.exec, Result: fr.res, Cause: fr.fire.cause, Attempt: fr.fire.attempt, StartedAt: fr.started, TraceID: fr.traceID, At: now})
	if sl.held() && sl.token == fr.exec.Token && !fr.withdrawn { // still the holder that started it
		s.decideUndecided(sl, fr, now)
		r := s.recordResult(sl, fr)
		if fr.res.Outcome == jobs.Fenced {
			// A protected resource saw a newer token: we are not the holder any
			// more, whatever etcd told us. Stop this slot's work and recheck.
			s.notify(sl, r)
			s.endLeadership(sl, Released, "fenced by a protected resource")
			return
		}
		if !s.tryAgain(sl, fr) {
			s.notify(sl, r)
		}
	}
	if sl.held() && !sl.wants() && len(sl.runs) == 0 {
		s.endLeadership(sl, Released, sl.unwanted())
		return
	}
	s.startWaiting(sl, now)
}

// recordResult records a run's result, with the slot's next start recorded
// ahead unless a resource fenced it, and returns the record.
func (s *Scheduler) recordResult(sl *slot, fr finishedRun) history.Record {
	if fr.fire.triggerKey == "" && !fr.notStarted && !fr.fire.scheduled.Before(sl.recorded.Finished) {
		sl.recorded.Finished, sl.recorded.Outcome = fr.fire.scheduled, string(fr.res.Outcome)
	}
	r := history.Record{ExecutionID: fr.exec.ID, ScheduledTime: fr.fire.scheduled, StartedAt: fr.started, FinishedAt: fr.finished,
		Outcome: string(fr.res.Outcome), Attempt: fr.fire.attempt, Cause: fr.fire.cause, OutputTail: fr.res.OutputTail}
	r.ExitCode, r.HTTPStatus = jobs.Codes(sl.job.executor, fr.res)
	if fr.sampled {
		r.TraceID = fr.traceID
	}
	if r.StartedAt.IsZero() {
		r.StartedAt = fr.finished
	}
	if fr.res.Err != nil {
		r.Error = fr.res.Err.Error()
	}
	var done chan error
	if fr.res.Outcome != jobs.Fenced && !startsAgain(sl, fr) { // a fire started again comes first (startAgainLater)
		if a := s.recordAhead(sl); a != nil {
			done = a.done
		}
	}
	s.triggerEnded(sl, fr)
	s.recordWith(sl, r, nil, done)
	return r
}

// startsAgain reports whether fr's fire is started again because it did
// not start: etcd did not record its start, or the member could not prove
// its lease at the fire's instant (a stalled process whose keepalive was
// answered since, TestAFireNotStartedForAnUnprovenLeaseStartsAgain). Under
// fire-all a scheduled or owed fire (not a manual one) is not lost to
// either; a lease truly lost ends the slot, and its next holder finds the
// fire's start recorded and its result not.
func startsAgain(sl *slot, fr finishedRun) bool {
	unstarted := fr.res.Outcome == jobs.Failed && !errors.Is(fr.res.Err, fenced.ErrBehind) ||
		fr.res.Outcome == jobs.Cancelled && errors.Is(fr.res.Err, ErrUntrusted)
	return fr.notStarted && unstarted && fr.fire.triggerKey == "" && sl.job.spec.Misfire == config.MisfireFireAll
}

// retriesLeft reports whether fr's run failed or timed out with retries left.
func retriesLeft(sl *slot, fr finishedRun) bool {
	return (fr.res.Outcome == jobs.Failed || fr.res.Outcome == jobs.TimedOut) && fr.fire.attempt <= sl.job.spec.Retries.Max
}

// tryAgain schedules the fire again if its run's result calls for it: a
// start etcd did not record, under fire-all; a failure or a timeout with
// retries left. It reports whether it did: if not, the result is final.
func (s *Scheduler) tryAgain(sl *slot, fr finishedRun) bool {
	switch {
	case startsAgain(sl, fr):
		s.startAgainLater(sl, fr.fire, fr.finished)
		return true
	case retriesLeft(sl, fr):
		s.retryLater(sl, fr.fire, fr.finished)
		return true
	}
	return false
}
