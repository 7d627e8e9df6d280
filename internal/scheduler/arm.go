package scheduler

import (
	"sync/atomic"
	"time"

	"github.com/kira-scheduler/kira/internal/scheduler/internal/gate"
)

// arm starts the slot's next fire ahead of its time if nothing could change
// the dispatch decision before then: the slot is free, the fire's start is
// already recorded (so it needs no etcd round trip), the job is not paused,
// and the lease is trusted past the fire's time, and the job has no
// concurrency limit (its fires wait for a permit instead: permits.go). The run's goroutine waits
// for the instant, so the loop's per-fire work and its wake-up are not in
// the fire's lateness.
func (s *Scheduler) arm(sl *slot, now time.Time) bool {
	a := sl.ahead
	if a == nil || sl.job.limit.Limited() || !a.scheduled.Equal(sl.nextScheduled) || sl.busy() || sl.owed.queued != nil || sl.phase == raising ||
		s.paused[sl.id.Job] || s.member.TrustLeft() <= sl.next.Sub(now) {
		return false
	}
	at, f := sl.next, sl.scheduledFire()
	s.scheduleNext(sl, f.scheduled)
	if sl.nextScheduled.IsZero() {
		s.unschedule(sl)
	}
	s.startAt(sl, f, at)
	if s.armedHook != nil {
		s.armedHook(sl.id)
	}
	return true
}

// disarm takes back the slot's armed fire if it has not started,
// when the slot is given up or its schedule changed: the start recorded ahead
// is the slot's again (see endLeadership and runClosing for what becomes of
// it). A fire that already started is left to finish.
func (s *Scheduler) disarm(sl *slot) {
	a := sl.armed
	if a == nil || !a.fate.CompareAndSwap(armedWaiting, armedWithdrawn) {
		return
	}
	sl.armed = nil
	if cancel, ok := sl.runs[a.run]; ok {
		cancel()
		delete(sl.runs, a.run)
		s.running--
	}
	sl.ahead = a.ahead
}

// armedRun is a fire started ahead of its time (see Config.ArmAhead). Its
// goroutine waits for the fire's instant (its gate opens then) and
// then claims the run (waiting → started); until then the loop can take it
// back (waiting → withdrawn: disarm) when it gives the slot up, and the fire stays
// recorded ahead for the next holder. The compare-and-swap decides which happened, so a run is never
// both withdrawn and started.
type armedRun struct {
	run   uint64
	ahead *aheadRecord // consumed by the run; given back on withdrawal
	at    time.Time    // the fire's instant
	place *gate.Place
	// fate is armedWaiting until the loop disarms the run or its
	// goroutine starts it, whichever swaps first.
	fate atomic.Int32
}

const (
	armedWaiting int32 = iota
	armedStarted
	armedWithdrawn
)
