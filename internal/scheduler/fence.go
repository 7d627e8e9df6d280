package scheduler

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/highwater"
	"github.com/kira-scheduler/kira/internal/shard"
	"go.opentelemetry.io/otel/attribute"
)

// raiseTimeout bounds raising the fences of a newly won slot: the job's
// fence and the OnAcquire hook, and each transaction of the takeover reads.
// A read waiting its turn in the reads' queue is not bounded by it (only by
// the slot's leadership): a member that takes tens of thousands of slots at
// once queues their reads for longer than that, and giving them up for it
// only starts their campaigns over
// (TestAQueuedTakeoverReadOutlastsTheRaiseTimeout). A variable for that
// test only; the takeover reads take it when the scheduler is made (New).
var raiseTimeout = 30 * time.Second

type raisedFence struct {
	slot  shard.Slot
	token fencing.Token
	read  acquiredRead
	err   error
}

// raiseFences prepares a newly won slot off the loop: it loads the slot's
// recorded state and waiting manual triggers, then runs the job's fence_url or
// fence_command and the OnAcquire hook. The slot fires only when all that
// succeeded (raiseEnded).
func (s *Scheduler) raiseFences(sl *slot) {
	leadCtx := sl.leadCtx
	id, fence, claim, hook := sl.id, sl.job.fence, fencing.Claim{LeaderKey: sl.leaderKey, Token: sl.token}, s.cfg.OnAcquire
	dependent, created := sl.job.spec.Dependent(), sl.job.spec.CreateRevision
	reads, journals := s.reads, s.journals
	journals.Hold()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		spanCtx, span := s.slotSpan(leadCtx, "fence.raise", id, attribute.Int64("kira.fencing_token", int64(claim.Token)))
		read, err := readTakeover(spanCtx, reads, id, dependent, created)
		journals.Release()
		ctx, cancel := context.WithTimeout(spanCtx, raiseTimeout)
		defer cancel()
		if err == nil && fence != nil {
			err = fence.Raise(ctx, id.Job, id.Partition, claim)
		}
		if err == nil && hook != nil {
			err = hook(fencing.WithClaim(ctx, claim), id, claim)
		}
		endSlotSpan(span, err)
		select {
		case s.raised <- raisedFence{slot: id, token: claim.Token, read: read, err: err}:
		case <-s.stopped:
		}
	}()
}

// TakingOver is how many slots this member leads whose takeover has not
// finished (their fence is being raised: their state, ring, triggers and
// the journals read, the job's fence and OnAcquire run): they do not fire
// yet. Held by TestSlotsTakingOverAreCounted.
func (s *Scheduler) TakingOver() int { return int(s.takingOver.Load()) }

func (s *Scheduler) raiseEnded(r raisedFence) {
	sl := s.slots[r.slot]
	if sl.phase != raising || sl.token != r.token {
		return // the slot was given up meanwhile
	}
	s.setPhase(sl, leading)
	triggers := r.read.triggers
	for _, f := range sl.owed.lateTriggers {
		if !slices.ContainsFunc(triggers, func(g fire) bool { return g.triggerKey == f.triggerKey }) {
			triggers = append(triggers, f)
		}
	}
	sl.owed.lateTriggers = nil
	for _, f := range triggers {
		// Their watch events, if they come now, are not dispatched again.
		s.triggering[f.triggerKey] = true
	}
	if r.err != nil {
		s.forgetTriggers(triggers)
		s.raiseFailed(sl, r.err)
		sl.backoff = true
		s.endLeadership(sl, Released, "fence not raised: "+r.err.Error())
		return
	}
	now := s.cfg.Clock.Now()
	s.emit(Event{Kind: Raised, Slot: sl.id, Token: sl.token, At: now})
	if !sl.wants() {
		s.forgetTriggers(triggers)
		s.endLeadership(sl, Released, sl.unwanted())
		return
	}
	s.acquired(sl, r.read, triggers, now)
}

// raiseFailed logs why a won slot is given up before it fires. A fence
// that refuses a newly won token has seen a higher one: a newer holder
// took the slot meanwhile (rare: this member's lease ended while it raised),
// or etcd's revision went back, and the log says so in the words of package
// highwater. Held by TestRefusedTokensStartNothing.
func (s *Scheduler) raiseFailed(sl *slot, err error) {
	switch {
	case errors.Is(err, fencing.ErrFenced):
		s.cfg.Logger.Error("a fence refused the newly won token "+sl.token.String()+": it has seen a higher token; unless a newer holder took the slot meanwhile, etcd's revision went back below a token already handed out (etcd restored without raising its revision): "+highwater.Fix,
			"slot", sl.id.String(), "token", sl.token.String(), "err", err)
	default:
		s.cfg.Logger.Warn("could not raise the fence; giving the slot up", "slot", sl.id.String(), "token", sl.token.String(), "err", err)
	}
}

// forgetTriggers unmarks triggers this member will not run (the slot is
// given up): the next holder reads them at acquisition.
func (s *Scheduler) forgetTriggers(fs []fire) {
	for _, f := range fs {
		if f.triggerKey != "" {
			delete(s.triggering, f.triggerKey)
		}
	}
}
