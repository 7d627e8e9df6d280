package scheduler

import (
	"container/heap"
	"context"
	"time"

	"github.com/kira-scheduler/kira/membership"
	"github.com/kira-scheduler/kira/shard"
)

func (s *Scheduler) loop(ctx context.Context) error {
	clock := s.cfg.Clock
	timer := clock.NewTimer(time.Hour)
	defer timer.Stop()
	// Trust is judged by the member's clock (monotonic), never by the
	// scheduling clock: a member whose wall clock is off keeps a sound
	// lease, and its trust deadline is timed by a timer of its own.
	trustTimer := time.NewTimer(time.Hour)
	defer trustTimer.Stop()
	s.applyView(s.views.Latest())
	for {
		now := clock.Now()
		trust := s.member.TrustLeft()
		if trust <= 0 {
			select {
			case <-s.member.Done():
				return s.lose(membership.ErrSessionLost)
			default:
				return s.lose(ErrUntrusted)
			}
		}
		trustTimer.Reset(trust)
		wake := now.Add(time.Hour)
		if len(s.heap) > 0 && s.heap[0].wakeAt.Before(wake) {
			wake = s.heap[0].wakeAt
		}
		timer.ResetAt(wake)
		// Results wait while fires released at their instant are starting
		// (see startingFires).
		bell := s.finished.bell
		var settled <-chan struct{}
		if c := startingFires.settled(); !isClosed(c) {
			bell, settled = nil, c
		}
		select {
		case <-settled: // the starts are done: results next
		case <-ctx.Done():
			return nil
		case <-trustTimer.C:
			// The top of the loop finds out whether an ack came in time.
		case <-s.member.Done():
			return s.lose(membership.ErrSessionLost)
		case <-s.views.Changed():
			v := s.views.Latest()
			if s.seenSelf && !v.Contains(s.member.ID()) {
				// Our record lives under our lease: it vanished, so did the
				// lease, even if no keepalive has told the session yet.
				return s.lose(membership.ErrSessionLost)
			}
			s.seenSelf = s.seenSelf || v.Contains(s.member.ID())
			s.applyView(v)
		case <-timer.C():
			s.fireDue()
		case r := <-s.results:
			s.campaignEnded(r)
		case <-s.campaignsDue.bell:
			s.campaignsFreed()
		case <-bell:
			for f := range s.finished.take() {
				s.runEnded(f)
			}
		case r := <-s.resigned:
			s.resignEnded(r)
		case r := <-s.raised:
			s.raiseEnded(r)
		case r := <-s.retries:
			s.retryDue(r)
		case evs := <-s.control:
			s.controlChanged(evs)
		case <-s.catalogChanged:
			s.catalogUpdated()
		case c := <-s.created:
			s.ownKeyCreated(c)
		case d := <-s.deleted:
			// The same lease always campaigns with the same key, so only a
			// delete after our key's creation ends our current leadership.
			if sl, ok := s.byKey[d.key]; ok && sl.stage == leading && d.rev > int64(sl.token) {
				s.endLeadership(sl, Lost, "election key deleted")
				s.reconcile(sl)
			}
		}
	}
}

// applyView recomputes which slots this member is preferred for.
func (s *Scheduler) applyView(v membership.View) {
	ring, err := shard.New(v.Members)
	if err != nil {
		s.cfg.Logger.Error("cannot build ring; keeping the previous assignment", "revision", v.Revision, "err", err)
		return
	}
	me := s.member.ID()
	for _, sl := range s.slots {
		sl.wanted = !sl.removed && v.Contains(me) && ring.Owner(sl.id) == me
		s.reconcile(sl)
		s.dropIfRemoved(sl)
	}
}

// reconcile moves a slot toward what the view wants, between executions.
func (s *Scheduler) reconcile(sl *slot) {
	if s.stopping {
		return
	}
	switch {
	case sl.wanted && sl.stage == idle:
		s.startCampaign(sl, 0)
	case sl.wanted && sl.stage == leading && sl.heapIndex < 0 && !sl.raising && sl.leadCtx.Err() == nil:
		// Wanted again while it was draining to resign: keep firing.
		s.scheduleNext(sl, s.cfg.Clock.Now())
	case !sl.wanted && sl.stage == campaigning:
		s.abandonCampaign(sl)
	case !sl.wanted && sl.stage == leading:
		if sl.heapIndex >= 0 {
			heap.Remove(&s.heap, sl.heapIndex)
		}
		s.disarm(sl)
		if len(sl.runs) == 0 {
			s.endLeadership(sl, Released, "not preferred in the current view")
		}
	}
}
