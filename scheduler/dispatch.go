package scheduler

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/jobs"
	"github.com/kira-scheduler/kira/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// JitterOffset is the slot's fixed delay within the job's jitter: derived
// from the slot alone, so every member fires the slot at the same instant.
// A fire is due at its scheduled time plus this offset; its lateness is
// counted from then.
func JitterOffset(j config.Job, id shard.Slot) time.Duration {
	if j.Jitter <= 0 {
		return 0
	}
	return time.Duration(xxhash.Sum64String(id.String()) % uint64(j.Jitter))
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
	sl.next = sl.nextScheduled.Add(JitterOffset(sl.job.spec, sl.id))
	sl.wakeAt = sl.next.Add(-s.cfg.ArmAhead)
	if sl.heapIndex >= 0 {
		heap.Fix(&s.heap, sl.heapIndex)
	} else {
		heap.Push(&s.heap, sl)
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
		if !next.IsZero() && !next.Add(JitterOffset(sl.job.spec, sl.id)).After(now) {
			// The loop fell behind (a stalled process, a jumped clock): the
			// fires in between are missed, not burst through.
			s.emit(Event{Kind: Skipped, Slot: sl.id, Token: sl.token, Reason: "fell behind schedule", At: now})
			s.scheduleNext(sl, now)
		} else {
			s.scheduleNext(sl, scheduled)
		}
		if sl.nextScheduled.IsZero() && sl.heapIndex >= 0 {
			heap.Remove(&s.heap, sl.heapIndex)
		}
		s.dispatch(sl, f, now)
	}
}

// arm starts the slot's next fire ahead of its time if nothing could change
// the dispatch decision before then: the slot is free, the fire's start is
// already recorded (so it needs no etcd round trip), the job is not paused,
// and the lease is trusted past the fire's time. The run's goroutine waits
// for the instant; measured by kira bench, this takes the loop's per-fire work
// and its wake-up out of the fires' lateness.
func (s *Scheduler) arm(sl *slot, now time.Time) bool {
	a := sl.ahead
	if a == nil || !a.scheduled.Equal(sl.nextScheduled) || sl.busy() || sl.queued != nil || sl.raising ||
		s.paused[sl.id.Job] || s.member.TrustLeft() <= sl.next.Sub(now) {
		return false
	}
	at, f := sl.next, sl.scheduledFire()
	s.scheduleNext(sl, f.scheduled)
	if sl.nextScheduled.IsZero() && sl.heapIndex >= 0 {
		heap.Remove(&s.heap, sl.heapIndex)
	}
	s.startAt(sl, f, at)
	if s.armedHook != nil {
		s.armedHook(sl.id)
	}
	return true
}

// withdrawArmed takes back the slot's armed fire if it has not started,
// when the slot is given up or its schedule changed: the start recorded ahead
// is the slot's again (see endLeadership and retractAhead for what becomes of
// it). A fire that already started is left to finish.
func (s *Scheduler) withdrawArmed(sl *slot) {
	a := sl.armed
	if a == nil || !a.state.CompareAndSwap(armedWaiting, armedWithdrawn) {
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

// scheduledFire is the slot's next fire by its schedule.
func (sl *slot) scheduledFire() fire {
	t := sl.nextScheduled
	return fire{scheduled: t, trigger: TriggerSchedule, attempt: 1, id: jobs.ExecutionID(sl.id.Job, sl.id.Partition, t)}
}

// busy reports whether the slot has a run in flight or catch-ups waiting.
func (sl *slot) busy() bool { return len(sl.runs) > 0 || len(sl.pending) > 0 }

// dispatch applies pause and overlap policies to a fire and starts it, or not.
func (s *Scheduler) dispatch(sl *slot, f fire, now time.Time) {
	if s.member.TrustLeft() <= 0 {
		s.emit(Event{Kind: Skipped, Slot: sl.id, Token: sl.token, Execution: s.execution(sl, f), Reason: "lease deadline passed", At: now})
		return
	}
	if s.paused[sl.id.Job] && (f.trigger == TriggerSchedule || f.trigger == TriggerCatchup) {
		s.emit(Event{Kind: Skipped, Slot: sl.id, Token: sl.token, Execution: s.execution(sl, f), Reason: "paused", At: now})
		return
	}
	if sl.busy() {
		switch {
		case f.trigger == TriggerManual:
			// An explicit request runs now, whatever the overlap policy.
		case f.trigger == TriggerSchedule && (len(sl.pending) > 0 ||
			sl.job.spec.Misfire == config.MisfireFireAll && (sl.lastTakeover || sl.unrecorded.Load() > 0 && s.writer.stalled())):
			// The slot is working off the backlog of a takeover (its
			// catch-ups, or the retry of a fire the previous holder left
			// unfinished: found by the chaos suite, a kill 1.3 s before a
			// fire, the new holder in 17 ms before the next), or its
			// previous fire has not even started because etcd fails or
			// hangs recording it (unreachable, electing a leader): this fire is a
			// misfire, not an overlap with a running execution, and under
			// fire-all it joins the backlog. Found by the chaos soak. (Not
			// when etcd is merely slow: each backlog fire records its own
			// start, and at 10,000 slots that fed a spiral; kira bench.)
			sl.pending = append(sl.pending, f)
			s.emit(Event{Kind: Queued, Slot: sl.id, Token: sl.token, Execution: s.execution(sl, f), Trigger: f.trigger, Attempt: f.attempt, At: now})
			return
		case f.trigger == TriggerRetry || sl.job.spec.Overlap == config.OverlapQueue:
			if sl.queued == nil {
				sl.queued = &f
				s.emit(Event{Kind: Queued, Slot: sl.id, Token: sl.token, Execution: s.execution(sl, f), Trigger: f.trigger, Attempt: f.attempt, At: now})
				return
			}
			s.skip(sl, f, now, "a run is already queued")
			return
		case sl.job.spec.Overlap == config.OverlapSkip:
			s.skip(sl, f, now, "previous run still running")
			return
		case sl.job.spec.Overlap == config.OverlapReplace:
			for _, cancel := range sl.runs {
				cancel()
			}
			sl.pending = nil
		}
	}
	s.start(sl, f)
}

// skip records a fire that was not started. While a run of the slot waits
// for etcd to record its start, the record is carried to the slot's next
// write (that run's result, or the resign) instead of a write of its own:
// those writes queue behind the pending one anyway, and at 10,000 slots taken
// at once they kept the writer's queue full, so that more starts waited past
// the next fire and were skipped in turn (kira bench: 2,000–7,000 skips a
// second for ~10 s after every slot was owned).
func (s *Scheduler) skip(sl *slot, f fire, now time.Time, reason string) {
	e := s.execution(sl, f)
	s.emit(Event{Kind: Skipped, Slot: sl.id, Token: sl.token, Execution: e, Reason: reason, At: now})
	r := Record{ExecutionID: e.ID, ScheduledTime: f.scheduled, StartedAt: now, FinishedAt: now,
		Outcome: OutcomeSkipped, Attempt: f.attempt, Trigger: f.trigger, Error: reason}
	if sl.unrecorded.Load() > 0 && len(sl.carried) < maxCarried {
		sl.carried = append(sl.carried, r)
		return
	}
	s.record(sl, r, nil)
}

// maxCarried bounds the skip records a slot carries to its next write.
const maxCarried = 8

// takeCarried returns the slot's carried records and forgets them.
func (sl *slot) takeCarried() []Record {
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

func (sl *slot) claim() fencing.Claim { return fencing.Claim{LeaderKey: sl.leaderKey, Token: sl.token} }

// stateOp is the put of the slot's current state into its state key, for a
// write without a record (see storedRecord).
func (s *Scheduler) stateOp(sl *slot) clientv3.Op {
	sl.st.Token, sl.st.Member = sl.token, s.member.ID()
	data, _ := json.Marshal(sl.st)
	return clientv3.OpPut(StateKey(s.member.Cluster(), sl.id), string(data))
}

// record writes an execution record (and the slot's state) under the fence.
func (s *Scheduler) record(sl *slot, r Record, extra []clientv3.Op) {
	s.recordWith(sl, r, extra, nil)
}

func (s *Scheduler) recordWith(sl *slot, r Record, extra []clientv3.Op, done chan error) {
	limit := sl.job.spec.HistoryLimit
	if sl.st.HistoryLimit != limit {
		// The limit changed, or the state predates it: drop the records the
		// new ring will never overwrite.
		extra = append(slices.Clip(extra), historyTrim(s.member.Cluster(), sl.id, limit))
		sl.st.HistoryLimit = limit
	}
	ops := append(s.recordOps(sl, append(sl.takeCarried(), r)), extra...)
	lazy := done == nil // a record: nothing waits for it
	if a := sl.ahead; a != nil && done == a.done {
		lazy = sl.next.Sub(s.cfg.Clock.Now()) > lingerAhead // with a start recorded ahead
	}
	s.writer.enqueue(fencedWrite{claim: sl.claim(), ops: ops, done: done, lazy: lazy})
}

// recordOps are the puts of records into the slot's history ring, at its
// next sequence numbers (see lastPutPerKey), each with the slot's state as of
// this write, which they hold from then on (storedRecord): the body of a
// record, and no put of the state key.
func (s *Scheduler) recordOps(sl *slot, records []Record) []clientv3.Op {
	first := sl.st.HistorySeq
	sl.st.HistorySeq += int64(len(records))
	sl.st.Token, sl.st.Member = sl.token, s.member.ID()
	st := sl.st
	puts := make([]clientv3.Op, 0, len(records))
	for i, r := range records {
		r.Job, r.Partition, r.Member, r.Token = sl.id.Job, sl.id.Partition, s.member.ID(), sl.token
		data, _ := json.Marshal(storedRecord{Record: r, State: &st})
		puts = append(puts, clientv3.OpPut(historyKey(s.member.Cluster(), sl.id, first+int64(i), sl.job.spec.HistoryLimit), string(data)))
	}
	return lastPutPerKey(puts)
}

// lastPutPerKey keeps, of puts to the same key, the last: records carried
// past the length of the ring overwrite each other, and etcd refuses a
// transaction that writes a key twice.
func lastPutPerKey(puts []clientv3.Op) []clientv3.Op {
	last := make(map[string]int, len(puts))
	for i, op := range puts {
		last[string(op.KeyBytes())] = i
	}
	out := puts[:0]
	for i, op := range puts {
		if last[string(op.KeyBytes())] == i {
			out = append(out, op)
		}
	}
	return out
}

// recordAhead marks the slot's next scheduled fire as started, in the state
// being written now, and returns the record the fire will wait on. A holder
// that stops before that fire leaves it recorded as started: the next holder
// re-runs it with the same execution id, which is safe, and starts nothing
// twice. Only when nothing of the slot runs: a record for a later fire would
// otherwise hide a run still in flight.
func (s *Scheduler) recordAhead(sl *slot) *aheadRecord {
	if len(sl.runs) > 0 || len(sl.pending) > 0 || sl.queued != nil || sl.heapIndex < 0 || sl.nextScheduled.IsZero() ||
		!sl.nextScheduled.After(sl.st.Started) {
		return nil
	}
	next := sl.nextScheduled
	a := &aheadRecord{scheduled: next, done: make(chan error, 1),
		prevStarted: sl.st.Started, prevStartedID: sl.st.StartedID, prevAttempt: sl.st.StartedAttempt}
	sl.st.Started, sl.st.StartedID, sl.st.StartedAttempt = next, jobs.ExecutionID(sl.id.Job, sl.id.Partition, next), 1
	sl.ahead = a
	return a
}

// start records that the fire starts (in the same fenced write as anything it
// consumes, such as a manual trigger's key) and runs it once that is committed:
// a fire whose start could not be recorded under the fence does not run.
func (s *Scheduler) start(sl *slot, f fire) { s.startAt(sl, f, time.Time{}) }

// startAt is start for a fire armed ahead of its time: its goroutine waits
// until at (unless at is zero), then checks that the slot is still held and
// the lease still trusted, and starts.
func (s *Scheduler) startAt(sl *slot, f fire, at time.Time) {
	e := s.execution(sl, f)
	ex := sl.job.executor
	slow := slowStart(ex)
	var recorded chan error
	var armed *armedRun
	if a := sl.ahead; a != nil && f.trigger == TriggerSchedule && a.scheduled.Equal(f.scheduled) {
		recorded = a.done // recorded ahead: no round trip now
		if !at.IsZero() {
			armed = &armedRun{run: sl.runSeq + 1, ahead: a, at: at, place: s.release.wait(at, slow)}
			sl.armed = armed
		}
	} else {
		if f.trigger != TriggerManual && !f.scheduled.Before(sl.st.Started) {
			sl.st.Started, sl.st.StartedID, sl.st.StartedAttempt = f.scheduled, f.id, f.attempt
		}
		ops := []clientv3.Op{s.stateOp(sl)}
		if f.triggerKey != "" {
			ops = append(ops, clientv3.OpDelete(f.triggerKey))
		}
		recorded = make(chan error, 1)
		s.writer.enqueue(fencedWrite{claim: sl.claim(), ops: ops, done: recorded})
	}
	sl.ahead = nil
	sl.lastTakeover = f.takeover

	sl.runSeq++
	run := sl.runSeq
	ctx, cancel := context.WithCancel(sl.leadCtx)
	if sl.runs == nil {
		sl.runs = map[uint64]context.CancelFunc{} // made on a slot's first run: most slots a member knows it never leads
	}
	sl.runs[run] = cancel
	s.running++
	id, timeout := sl.id, sl.job.spec.Timeout
	due := f.scheduled.Add(JitterOffset(sl.job.spec, sl.id)) // lateness counts from here; computed off the instant
	clock, tracer, member := s.cfg.Clock, s.cfg.Tracer, s.member
	// Built here, off the fire's instant when the fire is armed.
	spanOpts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("kira.job", e.Job),
			attribute.Int("kira.partition", e.Partition),
			attribute.Int64("kira.fencing_token", int64(e.Token)),
			attribute.String("kira.execution_id", e.ID),
			attribute.String("kira.scheduled_time", e.ScheduledTimeText()),
			attribute.String("kira.member", e.Member),
			attribute.String("kira.trigger", string(f.trigger)),
			attribute.Int("kira.attempt", f.attempt),
		)}
	spanName := "kira.execution " + e.Job
	ctx = jobs.WithExecution(ctx, e)
	var span trace.Span
	if armed != nil {
		// Started now, stamped with the fire's instant: the tracer's work
		// is then off the instant, where a second's worth of fires wait.
		ctx, span = tracer.Start(ctx, spanName, append(spanOpts, trace.WithTimestamp(at))...)
	}
	s.wg.Add(1)
	unrecorded := &sl.unrecorded
	unrecorded.Add(1)
	go func() {
		defer s.wg.Done()
		leave := func() {}
		stopWaking := func() bool { return false }
		if armed != nil {
			left := false
			leave = func() {
				if !left {
					left = true
					s.release.leave(armed.place)
				}
			}
			defer leave()
			stopWaking = context.AfterFunc(ctx, armed.place.wake)
			<-armed.place.woken
			if !armed.state.CompareAndSwap(armedWaiting, armedReleased) {
				unrecorded.Add(-1) // withdrawn: the loop has forgotten this run
				stopWaking()
				cancel()
				span.SetAttributes(attribute.String("kira.outcome", "withdrawn"))
				span.End()
				return
			}
		}
		if timeout > 0 { // counted from the fire's time, not from arming
			var stop context.CancelFunc
			ctx, stop = context.WithTimeout(ctx, timeout)
			defer stop()
		}
		fr := finishedRun{slot: id, run: run, fire: f, exec: e}
		if span == nil {
			ctx, span = tracer.Start(ctx, spanName, spanOpts...)
		}
		select {
		case err := <-recorded:
			unrecorded.Add(-1)
			switch {
			case err != nil:
				fr.res = jobs.Result{Outcome: jobs.Failed, Err: err}
				if errors.Is(err, fencing.ErrFenced) {
					fr.res.Outcome = jobs.Fenced
				}
				fr.notStarted = true
			case ctx.Err() != nil:
				fr.res, fr.notStarted = jobs.Result{Outcome: jobs.Cancelled, Err: ctx.Err()}, true
			case member.TrustLeft() <= 0:
				// Checked again here for an armed fire, whose dispatch
				// was decided before its time.
				fr.res, fr.notStarted = jobs.Result{Outcome: jobs.Cancelled, Err: ErrUntrusted}, true
			default:
				fr.started = clock.Now()
				if slow {
					// Starting until its process has: the work that
					// waits for the instant's starts would take the CPU
					// its exec needs (kira bench --sh-probe).
					ctx = jobs.WithStarted(ctx, leave)
				} else {
					leave()
				}
				span.SetAttributes(attribute.Int64("kira.lateness_ns", int64(fr.started.Sub(due))))
				s.emit(Event{Kind: Started, Slot: id, Token: e.Token, Execution: e, Trigger: f.trigger, Attempt: f.attempt, At: fr.started})
				fr.res = ex.Execute(ctx, e)
				// The rest is bookkeeping: let the fires released with
				// this one start first.
				<-startingFires.settled()
				stopWaking() // off the instant: it locks the run's context
			}
		case <-ctx.Done():
			unrecorded.Add(-1)
			fr.res, fr.notStarted = jobs.Result{Outcome: jobs.Cancelled, Err: ctx.Err()}, true
		}
		leave()
		fr.finished = clock.Now()
		stopWaking()
		cancel()
		span.SetAttributes(attribute.String("kira.outcome", string(fr.res.Outcome)))
		if fr.res.Outcome != jobs.Succeeded {
			msg := string(fr.res.Outcome)
			if fr.res.Err != nil {
				msg = fr.res.Err.Error()
			}
			span.SetStatus(codes.Error, msg)
		}
		span.End()
		s.finished.put(fr)
	}()
}

func (s *Scheduler) runEnded(fr finishedRun) {
	if fr.fire.triggerKey != "" {
		delete(s.triggering, fr.fire.triggerKey)
	}
	sl, ok := s.slots[fr.slot]
	if !ok {
		return
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
	s.emit(Event{Kind: Finished, Slot: sl.id, Token: fr.exec.Token, Execution: fr.exec, Result: fr.res, Trigger: fr.fire.trigger, Attempt: fr.fire.attempt, StartedAt: fr.started, At: now})
	holds := sl.state == leading && sl.token == fr.exec.Token
	if holds {
		if fr.fire.trigger != TriggerManual && !fr.notStarted && !fr.fire.scheduled.Before(sl.st.Finished) {
			sl.st.Finished, sl.st.Outcome = fr.fire.scheduled, string(fr.res.Outcome)
		}
		r := Record{ExecutionID: fr.exec.ID, ScheduledTime: fr.fire.scheduled, StartedAt: fr.started, FinishedAt: fr.finished,
			Outcome: string(fr.res.Outcome), Attempt: fr.fire.attempt, Trigger: fr.fire.trigger, OutputTail: fr.res.OutputTail}
		if r.StartedAt.IsZero() {
			r.StartedAt = fr.finished
		}
		if fr.res.Err != nil {
			r.Error = fr.res.Err.Error()
		}
		var done chan error
		if fr.res.Outcome != jobs.Fenced {
			if a := s.recordAhead(sl); a != nil {
				done = a.done
			}
		}
		s.recordWith(sl, r, nil, done)
	}
	if fr.res.Outcome == jobs.Fenced && holds {
		// A protected resource saw a newer token: we are not the holder any
		// more, whatever etcd told us. Stop this slot's work and recheck.
		s.endLeadership(sl, Released, "fenced by a protected resource")
		return
	}
	switch {
	case holds && fr.notStarted && fr.res.Outcome == jobs.Failed && fr.fire.trigger != TriggerManual && sl.job.spec.Misfire == config.MisfireFireAll &&
		!errors.Is(fr.res.Err, errWriterBehind):
		s.startAgainLater(sl, fr.fire, fr.finished)
	case holds && (fr.res.Outcome == jobs.Failed || fr.res.Outcome == jobs.TimedOut) && fr.fire.attempt <= sl.job.spec.Retries.Max:
		s.retryLater(sl, fr.fire, fr.finished)
	}
	if sl.state == leading && !sl.wanted && len(sl.runs) == 0 {
		s.endLeadership(sl, Released, "not preferred in the current view")
		return
	}
	s.startWaiting(sl, now)
}

// startWaiting starts the next catch-up fire or the queued fire once the slot is free.
func (s *Scheduler) startWaiting(sl *slot, now time.Time) {
	if sl.state != leading || sl.raising || len(sl.runs) > 0 {
		return
	}
	if len(sl.pending) > 0 {
		f := sl.pending[0]
		sl.pending = sl.pending[1:]
		s.dispatchFree(sl, f, now)
		return
	}
	if sl.queued != nil {
		f := *sl.queued
		sl.queued = nil
		s.dispatchFree(sl, f, now)
	}
}

// dispatchFree dispatches a fire on a slot known to have nothing running.
func (s *Scheduler) dispatchFree(sl *slot, f fire, now time.Time) {
	pending := sl.pending
	sl.pending = nil // so the overlap policy sees a free slot
	s.dispatch(sl, f, now)
	sl.pending = append(sl.pending, pending...)
}

// backoff is the pause before attempt+1: exponential from the job's backoff,
// capped, with jitter in [d/2, d) so retries of many slots spread out.
func backoff(r config.Retries, attempt int) time.Duration {
	d := r.Backoff
	for i := 1; i < attempt && d < r.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, r.MaxBackoff)
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}

// retryLater tries the fire again a backoff after the failed attempt ended,
// while the slot is held.
func (s *Scheduler) retryLater(sl *slot, f fire, ended time.Time) {
	next := f
	next.trigger, next.attempt = TriggerRetry, f.attempt+1
	s.redispatchAt(sl, retryFire{fire: next}, ended.Add(backoff(sl.job.spec.Retries, f.attempt)))
}

// startAgainLater puts a fire whose start etcd did not record (unreachable,
// electing a leader) back at the head of the slot's backlog a moment later:
// it never ran, so under fire-all it is not lost. Its id and attempt stay.
// Found by the chaos soak (an etcd leader kill).
func (s *Scheduler) startAgainLater(sl *slot, f fire, ended time.Time) {
	s.redispatchAt(sl, retryFire{fire: f, backlog: true}, ended.Add(startAgainDelay))
}

// startAgainDelay spaces the attempts to start a fire while etcd refuses.
const startAgainDelay = 500 * time.Millisecond

// redispatchAt hands r back to the loop at when, while the slot is held.
func (s *Scheduler) redispatchAt(sl *slot, r retryFire, when time.Time) {
	next := r.fire
	timer := s.cfg.Clock.NewTimer(time.Hour)
	timer.ResetAt(when)
	lead, id, token := sl.leadCtx, sl.id, sl.token
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer timer.Stop()
		select {
		case <-timer.C():
		case <-lead.Done():
			return
		}
		select {
		case s.retries <- retryFire{slot: id, token: token, fire: next, backlog: r.backlog}:
		case <-lead.Done():
		case <-s.stopped:
		}
	}()
}

func (s *Scheduler) retryDue(r retryFire) {
	sl, ok := s.slots[r.slot]
	if !ok || sl.state != leading || sl.token != r.token {
		return // retry only while the slot is still held
	}
	if r.backlog {
		sl.pending = append([]fire{r.fire}, sl.pending...)
		s.startWaiting(sl, s.cfg.Clock.Now())
		return
	}
	s.dispatch(sl, r.fire, s.cfg.Clock.Now())
}

// acquired runs what a new holder owes: fires its predecessors started but
// did not finish, missed fires by the misfire policy, and waiting manual
// triggers; then the slot follows its schedule.
func (s *Scheduler) acquired(sl *slot, st SlotState, triggers []fire, now time.Time) {
	sl.st, sl.ahead, sl.carried = st, nil, nil
	runs, missed, dropped := catchUp(st, sl.job.spec, sl.job.schedule, now.UTC(), func(t time.Time) string {
		return jobs.ExecutionID(sl.id.Job, sl.id.Partition, t)
	})
	if dropped > 0 {
		sl.st.MissedDropped += int64(dropped)
		s.emit(Event{Kind: Skipped, Slot: sl.id, Token: sl.token, Reason: "missed fires older than catchup_window", Count: dropped, At: now})
	}
	const maxMissedRecords = 20
	if len(missed) > maxMissedRecords {
		missed = missed[len(missed)-maxMissedRecords:]
	}
	for _, t := range missed {
		f := fire{scheduled: t, trigger: TriggerCatchup, attempt: 1, id: jobs.ExecutionID(sl.id.Job, sl.id.Partition, t)}
		s.emit(Event{Kind: Skipped, Slot: sl.id, Token: sl.token, Execution: s.execution(sl, f), Trigger: TriggerCatchup,
			Reason: "missed (misfire " + string(sl.job.spec.Misfire) + ")", At: now})
		s.record(sl, Record{ExecutionID: f.id, ScheduledTime: t, StartedAt: now, FinishedAt: now,
			Outcome: OutcomeMissed, Attempt: 1, Trigger: TriggerCatchup, Error: "misfire policy " + string(sl.job.spec.Misfire)}, nil)
	}
	for i := range runs {
		runs[i].takeover = true
	}
	sl.pending = append(runs, triggers...)
	// Schedule after the last fire this slot finished, if that is later than
	// our now: a previous owner whose clock ran ahead has run fires that are
	// still in our future, and running them again would be a duplicate.
	// Found by the chaos suite (a member 30 s ahead).
	s.scheduleNext(sl, latest(now, sl.st.Finished))
	if a := s.recordAhead(sl); a != nil {
		s.writer.enqueue(fencedWrite{claim: sl.claim(), ops: []clientv3.Op{s.stateOp(sl)}, done: a.done})
	}
	s.startWaiting(sl, now)
}

// retractAhead takes back a start recorded ahead for a fire that will not
// run here, so the next holder does not take it for a started fire. It
// returns the write's answer channel (nil when there was nothing to take back).
func (s *Scheduler) retractAhead(sl *slot) chan error {
	a := sl.ahead
	sl.ahead = nil
	if a == nil || !sl.st.Started.Equal(a.scheduled) {
		return nil
	}
	sl.st.Started, sl.st.StartedID, sl.st.StartedAttempt = a.prevStarted, a.prevStartedID, a.prevAttempt
	done := make(chan error, 1)
	s.writer.enqueue(fencedWrite{claim: sl.claim(), ops: []clientv3.Op{s.stateOp(sl)}, done: done})
	return done
}

// slowStart reports whether an execution by ex is slow to start, so that its
// fire goes first at its instant (releaser.wait): a command forks and execs.
func slowStart(ex jobs.Executor) bool {
	_, command := ex.(*jobs.Command)
	return command
}
