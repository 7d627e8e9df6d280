package scheduler

import (
	"context"
	"errors"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/history"
	"github.com/kira-scheduler/kira/jobs"
	"github.com/kira-scheduler/kira/scheduler/internal/fenced"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

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
	if a := sl.ahead; a != nil && f.cause == history.CauseSchedule && a.scheduled.Equal(f.scheduled) {
		recorded = a.done // recorded ahead: no round trip now
		if !at.IsZero() {
			armed = &armedRun{run: sl.runSeq + 1, ahead: a, at: at, place: s.gates.wait(at, slow)}
			sl.armed = armed
		}
	} else {
		if f.cause != history.CauseManual && !f.scheduled.Before(sl.recorded.Started) {
			sl.recorded.Started, sl.recorded.StartedID, sl.recorded.StartedAttempt = f.scheduled, f.id, f.attempt
		}
		ops := []clientv3.Op{s.stateOp(sl)}
		if f.triggerKey != "" {
			ops = append(ops, clientv3.OpDelete(f.triggerKey))
		}
		recorded = make(chan error, 1)
		s.writer.Enqueue(fenced.Write{Claim: sl.claim(), Ops: ops, Done: recorded})
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
			attribute.String("kira.cause", string(f.cause)),
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
					s.gates.leave(armed.place)
				}
			}
			defer leave()
			stopWaking = context.AfterFunc(ctx, armed.place.wake)
			<-armed.place.woken
			if !armed.fate.CompareAndSwap(armedWaiting, armedStarted) {
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
					// its exec needs.
					ctx = jobs.WithStarted(ctx, leave)
				} else {
					leave()
				}
				span.SetAttributes(attribute.Int64("kira.lateness_ns", int64(fr.started.Sub(due))))
				s.emit(Event{Kind: Started, Slot: id, Token: e.Token, Execution: e, Cause: f.cause, Attempt: f.attempt, At: fr.started})
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

// slowStart reports whether an execution by ex is slow to start, so that its
// fire goes first at its instant (releaser.wait): a command forks and execs.
func slowStart(ex jobs.Executor) bool {
	_, command := ex.(*jobs.Command)
	return command
}
