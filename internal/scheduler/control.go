package scheduler

import (
	"encoding/json"
	"time"

	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// triggerFire is the fire of a manual run request (kira trigger, written by
// ops.RequestRun): its scheduled time is when it was requested, or
// the time it asks to run at (a one-off run, oneoff.go). A request whose
// start a holder recorded (startedTrigger) is that run in doubt: it runs
// again now, as a retry with the same id.
func triggerFire(s shard.Slot, key string, createRev int64, value []byte) fire {
	var req triggerValue
	if json.Unmarshal(value, &req) != nil || req.RequestedAt.IsZero() {
		req.RequestedAt = time.Now().UTC()
	}
	id := jobs.ManualExecutionID(s.Job, s.Partition, createRev)
	if req.Cascade {
		id = jobs.CascadeExecutionID(s.Job, s.Partition, createRev)
	}
	f := fire{scheduled: req.RequestedAt, cause: history.CauseManual, attempt: 1, id: id, triggerKey: key, triggerRev: createRev}
	if !req.At.IsZero() {
		f.scheduled, f.oneOff = req.At.UTC(), true
	}
	if req.StartedAttempt > 0 {
		f.cause, f.attempt, f.oneOff = history.CauseRetry, req.StartedAttempt+1, false
	}
	return f
}

// triggersFrom turns the manual triggers a takeover read (oldest first,
// takeoverread.Slot.Triggers) into fires; those requested before the job
// was created (created: its create revision) are its predecessor's, and
// not run (afresh).
func triggersFrom(s shard.Slot, kvs []*mvccpb.KeyValue, created int64) []fire {
	var out []fire
	for _, kv := range kvs {
		if kv.CreateRevision >= created {
			out = append(out, triggerFire(s, string(kv.Key), kv.CreateRevision, kv.Value))
		}
	}
	return out
}

func (s *Scheduler) controlChanged(evs []controlEvent) {
	prefix := keyspace.Control(s.member.Cluster())
	now := s.cfg.Clock.Now()
	for _, ev := range evs {
		if ev.key == prefix && ev.deleted {
			for job := range s.paused {
				s.setPaused(job, false, now)
			}
			continue
		}
		ck, ok := keyspace.ParseControl(s.member.Cluster(), ev.key)
		if !ok {
			continue
		}
		if !ck.Trigger {
			s.setPaused(ck.Job, !ev.deleted, now)
			continue
		}
		sl, ok := s.slots[shard.Slot{Job: ck.Job, Partition: ck.Partition}]
		if ev.deleted && ok {
			s.oneOffCancelled(sl, ev.key)
			triggerGone(sl, ev.key)
		}
		if ev.deleted || !ok || !sl.held() || s.triggering[ev.key] || startedTrigger(ev.value) {
			continue // the holder (or the next one, on acquisition) runs it
		}
		if ev.createRev < sl.job.spec.CreateRevision {
			continue // its predecessor's (afresh), deleted with the slot's next write
		}
		s.triggering[ev.key] = true
		f := triggerFire(sl.id, ev.key, ev.createRev, ev.value)
		if sl.phase == raising {
			// Perhaps after the acquisition read the waiting triggers: it
			// runs once the fences are raised (raiseEnded), or is left to
			// the next holder.
			// Held by TestTriggerWhileTheFenceIsRaisedRunsOnce.
			sl.owed.lateTriggers = append(sl.owed.lateTriggers, f)
			continue
		}
		if notYet(f, now) {
			s.waitOneOff(sl, f)
			continue
		}
		s.dispatch(sl, f, now)
	}
}

func (s *Scheduler) setPaused(job string, paused bool, now time.Time) {
	if s.paused[job] == paused {
		return
	}
	kind := Resumed
	if paused {
		kind = Paused
		s.paused[job] = true
	} else {
		delete(s.paused, job)
	}
	s.emit(Event{Kind: kind, Slot: shard.Slot{Job: job}, At: now})
}
