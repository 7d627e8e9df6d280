package scheduler

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/fenced"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
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
// the lease still trusted, and starts. Everything the goroutine needs is
// built here, on the loop: off the fire's instant when the fire is armed.
func (s *Scheduler) startAt(sl *slot, f fire, at time.Time) {
	r := &run{s: s, slot: sl.id, fire: f, exec: s.execution(sl, f), executor: sl.job.executor, timeout: sl.job.spec.Timeout,
		due: f.scheduled.Add(sl.job.spec.JitterOffset(sl.id)), limit: sl.job.limit, unrecorded: &sl.unrecorded, refused: &sl.refused}
	r.slow = slowStart(r.executor)
	r.recorded, r.armed = s.recordStart(sl, f, at, r.slow)
	r.number, r.ctx, r.cancel = s.addRun(sl)
	r.ctx = jobs.WithExecution(r.ctx, r.exec)
	r.spanOpts = spanOptions(r.exec, f)
	if r.armed != nil {
		// Started now, stamped with the fire's instant: the tracer's work
		// is then off the instant, where a second's worth of fires wait.
		r.ctx, r.span = s.cfg.Tracer.Start(r.ctx, r.spanName(), append(r.spanOpts, trace.WithTimestamp(at))...)
	}
	s.wg.Add(1)
	r.unrecorded.Add(1)
	go r.run()
}

// recordStart returns the answer of the fenced write that records the
// fire's start: the start recorded ahead, if it is this fire's (no round
// trip now, and the fire is armed when at is set), or a write queued now.
func (s *Scheduler) recordStart(sl *slot, f fire, at time.Time, slow bool) (chan error, *armedRun) {
	defer func() { sl.ahead, sl.lastMisfire = nil, f.misfire }()
	if a := sl.ahead; a != nil && f.cause == history.CauseSchedule && a.scheduled.Equal(f.scheduled) {
		if at.IsZero() {
			return a.done, nil
		}
		sl.armed = &armedRun{run: sl.runSeq + 1, ahead: a, at: at, place: s.gates.Wait(at, slow)}
		return a.done, sl.armed
	}
	if f.triggerKey == "" && !f.scheduled.Before(sl.recorded.Started) {
		sl.recorded.Started, sl.recorded.StartedID, sl.recorded.StartedAttempt = f.scheduled, f.id, f.attempt
	}
	w := fenced.Write{Claim: sl.claim(), Ops: s.stateOps(sl), Done: make(chan error, 1)}
	if f.triggerKey != "" {
		// Marked started only if it is still the trigger read: a cancel
		// that deleted it first wins, and the run does not start
		// (fenced.ErrGuard). Held by TestCancelRacingTheStartHasOneAnswer.
		w.Ops = append(w.Ops, clientv3.OpPut(f.triggerKey, startedValue(f)))
		guard := clientv3.Compare(clientv3.CreateRevision(f.triggerKey), "=", f.triggerRev)
		w.Guard = &guard
	}
	s.writer.Enqueue(w)
	return w.Done, nil
}

// addRun registers a new run of the slot: its number, and a context that
// ends with the slot's leadership or when the loop cancels the run.
func (s *Scheduler) addRun(sl *slot) (uint64, context.Context, context.CancelFunc) {
	sl.runSeq++
	ctx, cancel := context.WithCancel(sl.leadCtx)
	if sl.runs == nil {
		sl.runs = map[uint64]context.CancelFunc{} // made on a slot's first run: most slots a member knows it never leads
	}
	sl.runs[sl.runSeq] = cancel
	s.running++
	return sl.runSeq, ctx, cancel
}

// spanOptions are the attributes of an execution's span.
func spanOptions(e jobs.Execution, f fire) []trace.SpanStartOption {
	return []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("kira.job", e.Job),
			attribute.Int("kira.partition", e.Partition),
			attribute.Int64("kira.fencing_token", int64(e.Token)),
			attribute.String("kira.execution_id", e.ID),
			attribute.String("kira.scheduled_time", e.ScheduledTimeText()),
			attribute.String("kira.member", e.Member),
			attribute.String("kira.trigger", string(f.cause)),
			attribute.Int("kira.attempt", f.attempt),
		)}
}

// run is one execution in flight, from the loop's decision to start it to
// its result handed back (finishedRuns). Only its own goroutine touches it.
type run struct {
	s          *Scheduler
	slot       shard.Slot
	number     uint64
	fire       fire
	exec       jobs.Execution
	executor   jobs.Executor
	slow       bool // a command: woken first at its instant, see gate.Gates.Wait
	timeout    time.Duration
	limit      config.Limit  // its job's concurrency limit: it waits for a permit (permits.go)
	due        time.Time     // scheduled time + jitter: lateness counts from here
	recorded   chan error    // the answer of the write that records the start
	armed      *armedRun     // nil unless armed ahead of its time
	unrecorded *atomic.Int32 // the slot's count of runs waiting for their start record
	refused    *atomic.Int32 // the slot's count of runs whose start etcd refused (slot.refused)
	ctx        context.Context
	cancel     context.CancelFunc
	span       trace.Span // started at arming for an armed run, else at the start
	spanOpts   []trace.SpanStartOption
	left       bool        // the run left its place at the gate
	stopWaking func() bool // stops the run's context from waking its place
}

func (r *run) spanName() string { return "kira.execution " + r.exec.Job }

// run is the run's goroutine: wait for the instant if armed, wait for the
// start to be recorded, start (or not), and hand the result back.
func (r *run) run() {
	defer r.s.wg.Done()
	r.stopWaking = func() bool { return false }
	if r.armed != nil {
		defer r.leave()
		if !r.waitForInstant() {
			return
		}
	}
	if r.timeout > 0 && !r.limit.Limited() { // counted from the fire's time, not from arming
		var stop context.CancelFunc
		r.ctx, stop = context.WithTimeout(r.ctx, r.timeout)
		defer stop()
	}
	if r.span == nil {
		r.ctx, r.span = r.s.cfg.Tracer.Start(r.ctx, r.spanName(), r.spanOpts...)
	}
	fr := finishedRun{slot: r.slot, run: r.number, fire: r.fire, exec: r.exec}
	if sc := r.span.SpanContext(); sc.HasTraceID() {
		fr.traceID, fr.sampled = sc.TraceID().String(), sc.IsValid() && sc.IsSampled()
	}
	select {
	case err := <-r.recorded:
		r.unrecorded.Add(-1)
		r.startRecorded(&fr, err)
	case <-r.ctx.Done():
		r.unrecorded.Add(-1)
		fr.res, fr.notStarted = jobs.Result{Outcome: jobs.Cancelled, Err: r.ctx.Err()}, true
		if errors.Is(r.ctx.Err(), context.DeadlineExceeded) {
			// The job's timeout passed while etcd had not recorded the
			// start: a start that failed, as one etcd refused, which
			// fire-all starts again (startsAgain); not the slot's end.
			// Held by TestStartNotRecordedWithinTheTimeoutIsAFailedStart.
			fr.res = jobs.Result{Outcome: jobs.Failed, Err: errStartTimedOut}
			fr.refused = true
			r.refused.Add(1)
		}
	}
	r.leave()
	fr.finished = r.s.cfg.Clock.Now()
	r.stopWaking()
	r.cancel()
	r.endSpan(fr.res)
	r.s.finished.put(fr)
}

// waitForInstant parks an armed run at its gate until the instant (or its
// context ends), then claims it against the loop's disarm: false means the
// loop took it back, and the run has ended without starting.
func (r *run) waitForInstant() bool {
	r.stopWaking = context.AfterFunc(r.ctx, r.armed.place.Wake)
	<-r.armed.place.Woken()
	if r.armed.fate.CompareAndSwap(armedWaiting, armedStarted) {
		return true
	}
	r.unrecorded.Add(-1) // disarmed: the loop has forgotten this run
	r.stopWaking()
	r.cancel()
	r.span.SetAttributes(attribute.String("kira.outcome", "withdrawn"))
	r.span.End()
	return false
}

// leave ends an armed run's wait at its place, once.
func (r *run) leave() {
	if r.armed != nil && !r.left {
		r.left = true
		r.s.gates.Leave(r.armed.place)
	}
}

// errStartTimedOut is why a run whose job's timeout passed before etcd
// recorded its start did not start.
var errStartTimedOut = errors.New("the job's timeout passed before etcd recorded its start")

// startRecorded starts the execution once its start record's write
// answered err, unless the write failed, the run was cancelled, or the
// lease is no longer trusted (checked again for an armed fire, whose
// dispatch was decided before its time).
func (r *run) startRecorded(fr *finishedRun, err error) {
	switch {
	case errors.Is(err, fenced.ErrGuard):
		fr.res, fr.notStarted, fr.withdrawn = jobs.Result{Outcome: jobs.Cancelled, Err: errTriggerGone}, true, true
	case err != nil:
		fr.res = jobs.Result{Outcome: jobs.Failed, Err: err}
		if errors.Is(err, fencing.ErrFenced) {
			fr.res.Outcome = jobs.Fenced
		} else {
			fr.refused = true
			r.refused.Add(1) // before the loop can take the result
		}
		fr.notStarted = true
	case r.ctx.Err() != nil:
		fr.res, fr.notStarted = jobs.Result{Outcome: jobs.Cancelled, Err: r.ctx.Err()}, true
	case r.s.member.TrustLeft() <= 0:
		fr.res, fr.notStarted = jobs.Result{Outcome: jobs.Cancelled, Err: ErrUntrusted}, true
	default:
		pm, ok := r.awaitPermit(fr)
		if !ok {
			return
		}
		ctx := r.ctx
		if r.timeout > 0 && r.limit.Limited() { // counted from its start, after the wait for its permit
			var stop context.CancelFunc
			ctx, stop = context.WithTimeout(ctx, r.timeout)
			defer stop()
		}
		fr.started = r.s.cfg.Clock.Now()
		if r.slow {
			// Starting until its process has: the work that waits for the
			// instant's starts would take the CPU its exec needs.
			ctx = jobs.WithStarted(ctx, r.leave)
		} else {
			r.leave()
		}
		r.span.SetAttributes(attribute.Int64("kira.lateness_ns", int64(fr.started.Sub(r.due))))
		r.s.emit(Event{Kind: Started, Slot: fr.slot, Token: r.exec.Token, Execution: r.exec, Cause: r.fire.cause, Attempt: r.fire.attempt, TraceID: fr.traceID, At: fr.started})
		fr.res = r.executor.Execute(ctx, r.exec)
		pm.Release()
		// The rest is bookkeeping: let the fires whose gate opened with this one
		// start first.
		<-r.s.gates.Settled()
		r.stopWaking() // off the instant: it locks the run's context
	}
}

// endSpan records the outcome on the run's span, with the semantic
// conventions' names where one exists, and ends it.
func (r *run) endSpan(res jobs.Result) {
	r.span.SetAttributes(attribute.String("kira.outcome", string(res.Outcome)))
	if res.OutputTail != "" {
		// The tail the executor kept (jobs.OutputTailBytes); etcd's record
		// keeps only its end (history.StoredOutputBytes).
		r.span.SetAttributes(attribute.String("kira.output_tail", res.OutputTail))
	}
	exit, status := jobs.Codes(r.executor, res)
	if status != nil {
		r.span.SetAttributes(attribute.Int("http.response.status_code", *status))
	}
	if exit != nil {
		r.span.SetAttributes(attribute.Int("process.exit.code", *exit))
	}
	if res.Outcome != jobs.Succeeded {
		r.span.SetAttributes(attribute.String("error.type", string(res.Outcome)))
		msg := string(res.Outcome)
		if res.Err != nil {
			msg = res.Err.Error()
		}
		r.span.SetStatus(codes.Error, msg)
	}
	r.span.End()
}

// slowStart reports whether an execution by ex is slow to start, so that its
// fire goes first at its instant (gate.Gates.Wait): a command forks and execs.
func slowStart(ex jobs.Executor) bool {
	_, command := ex.(*jobs.Command)
	return command
}
