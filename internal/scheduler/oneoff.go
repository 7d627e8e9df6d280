package scheduler

import (
	"container/heap"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/jobs"
)

// One-off runs (kira trigger --at, --in) are manual triggers with a time:
// the holder keeps each in its slot's owed fires (owedFires.later) and in
// the loop's heap of them until its time, then dispatches it as any manual
// trigger (it runs whatever the overlap policy, even while paused). Its key
// stays in etcd until its final result deletes it; its start marks it
// (startedValue), in the fenced write that records the start, guarded by
// the key's create revision: a cancel (the unmarked key deleted) and a
// start race in etcd, and exactly one wins. A new
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
		if sl.phase != leading || sl.token != o.token || !sl.owed.takeLater(o.f.triggerKey) {
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

// triggerValue is a manual run request as stored (ops.RequestRun),
// and StartedAttempt as its holder marks it when the run starts.
type triggerValue struct {
	RequestedAt    time.Time `json:"requested_at"`
	At             time.Time `json:"at,omitzero"`
	Cascade        bool      `json:"cascade,omitempty"` // kira trigger --cascade (after.go)
	StartedAttempt int       `json:"started_attempt,omitempty"`
}

// startedValue is the trigger of f marked started by f's attempt. The
// start of a manual run marks its trigger, in the fenced write that records
// the start, and its final result deletes it, in the write that records the
// result: a trigger still marked when a new holder reads it is the run in
// doubt (its holder crashed, or lost the slot, before its result was
// recorded), and runs again as a retry with the same id, once per change of
// holder, as a scheduled fire's does. Held by TestManualRunInDoubtRerunsWithSameID.
func startedValue(f fire) string {
	v := triggerValue{RequestedAt: f.scheduled, Cascade: jobs.Cascades(f.id), StartedAttempt: f.attempt}
	if f.oneOff || f.cause == history.CauseRetry {
		v.At = f.scheduled // a retry's time is its first attempt's, whatever it was
	}
	data, _ := json.Marshal(v)
	return string(data)
}

// startedTrigger reports whether a trigger's value is marked started.
func startedTrigger(value []byte) bool {
	var v triggerValue
	return json.Unmarshal(value, &v) == nil && v.StartedAttempt > 0
}

// triggerEnded is what fr's result does to its trigger: a manual run that
// started and whose result is final (no retry follows, and no fence
// refused it) deletes it, in the write of its result and in every write of
// the slot after it until the key is gone (triggerDeletes). A run that did
// not start leaves it unmarked, for the slot's next holder (as before its
// start); a run that will be retried leaves it marked.
func (s *Scheduler) triggerEnded(sl *slot, fr finishedRun) {
	if fr.fire.triggerKey == "" || fr.notStarted || fr.res.Outcome == jobs.Fenced || retriesLeft(sl, fr) {
		return
	}
	if !slices.Contains(sl.endedTriggers, fr.fire.triggerKey) {
		sl.endedTriggers = append(sl.endedTriggers, fr.fire.triggerKey)
	}
}

// triggerGone forgets the ended manual run whose trigger key etcd deleted:
// its delete committed.
func triggerGone(sl *slot, key string) {
	sl.endedTriggers = slices.DeleteFunc(sl.endedTriggers, func(k string) bool { return k == key })
}
