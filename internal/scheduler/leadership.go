package scheduler

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/fenced"
	"github.com/kira-scheduler/kira/internal/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.opentelemetry.io/otel/attribute"
)

// resignTimeout bounds releasing one slot; lease expiry is the safety net.
const resignTimeout = 5 * time.Second

type resignedSlot struct {
	slot shard.Slot
	gen  uint64
}

// dropLeadership is the one way a slot stops being led here: it leaves the
// timer heap, forgets the fires it owed (their manual triggers are the next
// holder's), cancels its executions' context, and reports kind (Released
// or Lost). The slot's key is the caller's to release.
func (s *Scheduler) dropLeadership(sl *slot, kind EventKind, reason string) {
	s.unschedule(sl)
	sl.recorded.Owed = sl.owedFires() // the state it leaves names them (stateOp)
	s.forgetTriggers(sl.owed.clear())
	sl.cancelLead()
	delete(s.byKey, sl.leaderKey)
	s.setSnapshot(sl.id, 0, false)
	s.emit(Event{Kind: kind, Slot: sl.id, Token: sl.token, Reason: reason, At: s.cfg.Clock.Now()})
}

// endLeadership drops the slot's leadership and releases its key, after
// the records it still carries. A slot Lost is fenced out anyway: it
// releases nothing.
func (s *Scheduler) endLeadership(sl *slot, kind EventKind, reason string) {
	s.dropLeadership(sl, kind, reason)
	if kind == Lost {
		sl.ahead, sl.carried = nil, nil // fenced out anyway
		s.setPhase(sl, idle)
		return
	}
	if c := sl.takeCarried(); len(c) > 0 {
		// Ahead of the resign, which the writer keeps in this order.
		s.writer.Enqueue(s.recordWrite(sl, c[len(c)-1], c[:len(c)-1]))
	}
	// A start recorded ahead is left as it is: the fire is in the future, and
	// the next holder, taking over within milliseconds of the resign, runs it
	// on schedule (catchUp does not take a future start for an unfinished one).
	sl.ahead = nil
	s.resignAsync(sl, sl.election, reason, s.lastState(sl)...)
}

// maxOwed bounds the fires a state names as owed (SlotState.Owed): a slot
// owes a catch-up, an unfinished fire's retry and a queued fire, and under
// fire-all the next holder catches up every missed fire anyway.
const maxOwed = 20

// owedFires are the scheduled times of the fires sl has taken on to run
// and not started, as its state names them (SlotState.Owed): not a manual
// or one-off run (its trigger key is the next holder's), nor one its state
// records as started or finished, nor a dependent's (its logical times
// follow its upstreams). Held by TestAFireQueuedAtAHandoverRunsOnTheNextHolder
// and TestAFireOwedByAHolderLostBeforeItStartedRunsOnTheNext.
func (sl *slot) owedFires() []time.Time {
	o := &sl.owed
	if len(o.backlog) == 0 && len(o.aside) == 0 && len(o.undecided) == 0 && o.queued == nil || sl.job.spec.Dependent() {
		return nil
	}
	fires := slices.Concat(o.backlog, o.aside, o.undecided)
	if o.queued != nil {
		fires = append(fires, *o.queued)
	}
	var out []time.Time
	for _, f := range fires {
		if f.triggerKey == "" && f.scheduled.After(sl.recorded.Finished) && !f.scheduled.Equal(sl.recorded.Started) {
			out = append(out, f.scheduled)
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	out = slices.CompactFunc(out, time.Time.Equal)
	return out[max(0, len(out)-maxOwed):]
}

// resignAsync deletes the slot's key off the loop; the slot stays in
// resigning until that is done so a new campaign (same lease, same key)
// cannot race with the delete. The delete is a fenced write of the state
// writer, so it commits after this slot's writes still queued (the result of
// a run that just ended, a start recorded ahead): resigning before them would
// fence them out, and the next owner would run that fire again. It carries
// state, the put of the slot's state as the member leaves it, in the same
// transaction, and is a last write (never refused for a full queue), so a
// record refused earlier cannot leave the next holder an older state. The
// key is deleted directly only when etcd failed the write: every earlier
// write of the slot was answered by then.
// Held by TestResignCarriesTheLastState and the chaos suite's
// TestGracefulStopDuringARunUnderLoad (no replay after a handover).
func (s *Scheduler) resignAsync(sl *slot, e *concurrency.Election, reason string, state ...clientv3.Op) {
	sl.gen++
	sl.resignRev = e.Rev()
	s.setPhase(sl, resigning)
	id, gen := sl.id, sl.gen
	done := make(chan error, 1)
	claim := fencing.Claim{LeaderKey: e.Key(), Token: fencing.Token(e.Rev())} // the election's own: the slot's may be an older one
	ops := append(state, clientv3.OpDelete(claim.LeaderKey))
	s.writer.Enqueue(fenced.Write{Claim: claim, Ops: ops, Done: done, Handover: true, Last: true})
	s.wg.Add(1)
	_, span := s.slotSpan(context.Background(), "slot.resign", id,
		attribute.Int64("kira.fencing_token", int64(claim.Token)), attribute.String("kira.reason", reason))
	go func() {
		defer s.wg.Done()
		err := <-done
		if err != nil && !errors.Is(err, fencing.ErrFenced) {
			resign(s.cleanupCtx, e) // the writer could not: delete it directly
		}
		endSlotSpan(span, err)
		select {
		case s.resigned <- resignedSlot{slot: id, gen: gen}:
		case <-s.stopped:
		}
	}()
}

func resign(ctx context.Context, e *concurrency.Election) {
	ctx, cancel := context.WithTimeout(ctx, resignTimeout)
	defer cancel()
	_ = e.Resign(ctx)
}

func (s *Scheduler) resignEnded(r resignedSlot) {
	sl := s.slots[r.slot]
	if sl.phase == resigning && sl.gen == r.gen {
		s.setPhase(sl, idle)
		s.reconcile(sl)
		s.dropIfRemoved(sl)
	}
}

// lose ends everything at once: the lease can no longer be trusted.
func (s *Scheduler) lose(cause error) error {
	s.cancelCleanup()
	for _, sl := range s.slots {
		switch sl.phase {
		case raising, leading:
			s.dropLeadership(sl, Lost, cause.Error())
			s.setPhase(sl, idle)
		case campaigning:
			s.abandonCampaign(sl)
		}
	}
	s.cfg.Logger.Error("lost the lease: cancelled every execution", "member", s.member.ID(), "err", cause)
	return cause
}
