package scheduler

import (
	"container/heap"
	"errors"
	"slices"
	"time"

	"github.com/kira-scheduler/kira/fencing"
)

// One-off runs (kira trigger --at, --in) are manual triggers with a time:
// the holder keeps each in its slot's owed fires (owedFires.later) and in
// the loop's heap of them until its time, then dispatches it as any manual
// trigger (it runs whatever the overlap policy, even while paused). Its key
// stays in etcd until its start consumes it, in the same fenced write that
// records the start, guarded by the key's create revision: a cancel
// (the key deleted) and a start race in etcd, and exactly one wins. A new
// holder reads the waiting ones with the other triggers: those still in the
// future wait again, the ones past due run at once, late. Held by
// TestOneOffRunsOnceAtItsTime, TestOneOffSurvivesAChangeOfHolder and
// TestCancelledOneOffNeverRuns.

// errTriggerGone is why a manual run did not start: its trigger's key was
// deleted (kira trigger --cancel) before its start was written.
var errTriggerGone = errors.New("cancelled before its start")

// oneOff is a waiting one-off run in the loop's heap, kept under the
// slot's token of the time: an entry whose slot has changed hands since,
// or whose run was cancelled, is dropped when it comes up.
type oneOff struct {
	sl    *slot
	token fencing.Token
	f     fire
}

// oneOffHeap orders the waiting one-off runs by their time.
type oneOffHeap []oneOff

func (h oneOffHeap) Len() int           { return len(h) }
func (h oneOffHeap) Less(i, j int) bool { return h[i].f.scheduled.Before(h[j].f.scheduled) }
func (h oneOffHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *oneOffHeap) Push(x any)        { *h = append(*h, x.(oneOff)) }
func (h *oneOffHeap) Pop() any {
	old := *h
	o := old[len(old)-1]
	old[len(old)-1] = oneOff{}
	*h = old[:len(old)-1]
	return o
}

// notYet reports whether f is a one-off run whose time is after now.
func notYet(f fire, now time.Time) bool { return f.oneOff && f.scheduled.After(now) }

// waitOneOff keeps one-off run f until its time.
func (s *Scheduler) waitOneOff(sl *slot, f fire) {
	sl.owed.later = append(sl.owed.later, f)
	heap.Push(&s.oneOffs, oneOff{sl: sl, token: sl.token, f: f})
}

// nextOneOff is when the earliest waiting one-off run is due, if any.
func (s *Scheduler) nextOneOff() (time.Time, bool) {
	if len(s.oneOffs) == 0 {
		return time.Time{}, false
	}
	return s.oneOffs[0].f.scheduled, true
}

// fireOneOffs dispatches the one-off runs whose time has come, on the
// slots still led under the token they were kept under.
func (s *Scheduler) fireOneOffs() {
	now := s.cfg.Clock.Now()
	for len(s.oneOffs) > 0 && !s.oneOffs[0].f.scheduled.After(now) {
		o := heap.Pop(&s.oneOffs).(oneOff)
		sl := o.sl
		if sl.stage != leading || sl.token != o.token || sl.raising || !sl.owed.takeLater(o.f.triggerKey) {
			continue // given up (a later holder runs it), or cancelled
		}
		s.dispatch(sl, o.f, now)
	}
}

// oneOffCancelled forgets the slot's waiting one-off run whose key was
// deleted (kira trigger --cancel). A start already dispatched is not
// affected here: its guarded write finds the key gone and does not run.
func (s *Scheduler) oneOffCancelled(sl *slot, key string) {
	if sl.owed.takeLater(key) {
		delete(s.triggering, key)
	}
}

// takeLater removes the waiting one-off run of trigger key, reporting
// whether it was there.
func (o *owedFires) takeLater(key string) bool {
	i := slices.IndexFunc(o.later, func(f fire) bool { return f.triggerKey == key })
	if i < 0 {
		return false
	}
	o.later = slices.Delete(o.later, i, i+1)
	return true
}

// retriedTrigger is the fire of fr to try again. A manual run's trigger
// was consumed by its start, if that was recorded: the retry then does not
// consume it again (its guard would find it gone and withdraw the run). A
// start etcd refused consumed nothing, and its retry consumes the trigger,
// so a later holder does not run it again. Held by
// TestManualRunRetriesAfterARefusedStartRunOnce.
func retriedTrigger(fr finishedRun) fire {
	f := fr.fire
	if !fr.notStarted {
		f.triggerKey, f.triggerRev, f.oneOff = "", 0, false
	}
	return f
}
