package scheduler

import (
	"container/heap"
	"context"
	"time"
)

// Run campaigns for the preferred slots and runs their fires until ctx ends
// (a graceful stop: returns nil after in-flight executions finished or the
// grace period ran out) or the member's lease is lost (returns
// membership.ErrSessionLost or ErrUntrusted after cancelling everything).
// After Run returns the member should Leave: revoking its lease deletes every
// election key it holds in one revision, so the next owners take over at once.
func (s *Scheduler) Run(ctx context.Context) error {
	defer s.cancelCleanup()
	watchCtx, stopWatch := context.WithCancel(context.Background())
	s.wg.Add(2)
	go s.watchElections(watchCtx)
	go s.watchControl(watchCtx)
	release, giveBack := useGates(s.cfg.Clock)
	s.gates = release
	stopWriter := make(chan struct{})
	writerDone := make(chan struct{})
	writerCtx, abandonWrites := context.WithCancel(context.Background())
	defer abandonWrites()
	go func() { s.writer.Run(writerCtx, stopWriter); close(writerDone) }()

	err := s.loop(ctx)
	if err != nil {
		abandonWrites() // the lease is gone: nothing fenced by it can be committed
	}

	// Stop: no more fires, no more campaigns.
	for _, sl := range s.slots {
		if sl.stage == campaigning {
			s.abandonCampaign(sl)
		}
		if sl.heapIndex >= 0 {
			heap.Remove(&s.heap, sl.heapIndex)
		}
	}
	s.stopping = true
	for _, sl := range s.slots {
		s.disarm(sl) // not started: it goes with the slot
	}
	if err == nil {
		if s.inFlight() > 0 {
			// Slots with nothing running are handed over now, not after the
			// others' executions drain (up to Grace): their next fires belong
			// to the next holder, who takes over within milliseconds. The
			// member leaves the view first, so that the others want its slots
			// (and campaign for them) by the time they are resigned.
			wctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
			if err := s.member.Withdraw(wctx); err != nil {
				s.cfg.Logger.Warn("could not leave the view; idle slots are handed over when the lease is revoked", "err", err)
			}
			cancel()
			for _, sl := range s.slots {
				if sl.stage == leading && len(sl.runs) == 0 {
					s.endLeadership(sl, Released, "stopping")
				}
			}
		}
		s.drain(s.cfg.Grace)
	}
	// The lease revoke that follows (Member.Leave) deletes every key this
	// member holds in one revision: one request, not one resign per slot.
	for _, sl := range s.slots {
		if sl.stage == leading && err == nil {
			s.retractAhead(sl) // committed before the member leaves: the writer is flushed first
		}
		if sl.stage == leading {
			sl.cancelLead()
			delete(s.byKey, sl.leaderKey)
			s.setSnapshot(sl.id, 0, false)
			s.emit(Event{Kind: Released, Slot: sl.id, Token: sl.token, Reason: "stopping", At: s.cfg.Clock.Now()})
			sl.stage = idle
		}
	}
	s.drain(0)
	stopWatch()
	giveBack()
	s.waitOwned(ownedWait)
	close(s.stopped)
	// The last results are committed (under the fence) before the member leaves.
	close(stopWriter)
	<-writerDone
	return err
}

// drain waits for in-flight executions, up to grace, then cancels the rest
// and waits for them to return.
func (s *Scheduler) drain(grace time.Duration) {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	for s.inFlight() > 0 {
		select {
		case <-s.finished.bell:
			for f := range s.finished.take() {
				s.runEnded(f)
				if sl, ok := s.slots[f.slot]; ok && grace > 0 && sl.stage == leading && len(sl.runs) == 0 && s.inFlight() > 0 {
					s.endLeadership(sl, Released, "stopping") // its run is over: hand it over without waiting for the others
				}
			}
		case r := <-s.resigned:
			s.resignEnded(r)
		case r := <-s.results:
			s.campaignEnded(r)
		case r := <-s.raised:
			s.raiseEnded(r)
		case <-deadline.C:
			for _, sl := range s.slots {
				if sl.cancelLead != nil {
					sl.cancelLead()
				}
			}
		}
	}
}

func (s *Scheduler) inFlight() int { return s.running }

// waitOwned waits for campaign, resign and execution goroutines, answering
// them until they are gone or bound passes. Goroutines still inside an etcd
// call then return when the caller closes the etcd client; none of them can
// act any more (their contexts are cancelled and nobody reads their results).
func (s *Scheduler) waitOwned(bound time.Duration) {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	limit := time.NewTimer(bound)
	defer limit.Stop()
	for {
		select {
		case <-done:
			return
		case <-limit.C:
			s.cfg.Logger.Warn("stopped with etcd calls still pending; closing the client releases them")
			return
		case r := <-s.results:
			if r.err == nil {
				resign(s.cleanupCtx, r.election)
			}
		case <-s.resigned:
		case <-s.raised:
		case <-s.retries:
		case <-s.finished.bell:
			for f := range s.finished.take() {
				if sl, ok := s.slots[f.slot]; ok {
					if _, ok := sl.runs[f.run]; ok {
						delete(sl.runs, f.run)
						s.running--
					}
				}
			}
		}
	}
}

// ownedWait bounds how long Run waits for its campaign goroutines after it
// stopped. etcd's Election.Campaign resigns on cancel with the client's own
// context, so on an unreachable etcd it returns only when the client closes.
const ownedWait = resignTimeout + time.Second

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
