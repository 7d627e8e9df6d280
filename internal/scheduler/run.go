package scheduler

import (
	"context"
	"time"

	"github.com/kira-scheduler/kira/internal/scheduler/internal/gate"
)

// Run campaigns for the preferred slots and runs their fires until ctx ends
// (a graceful stop: returns nil after in-flight executions finished or the
// grace period ran out) or the member's lease is lost (returns
// member.ErrSessionLost or ErrUntrusted after cancelling everything).
// After Run returns the member should Leave: revoking its lease deletes every
// election key it holds in one revision, so the next owners take over at once.
//
// A run goes through three phases: running (the loop), draining (a graceful
// stop only: idle slots handed over, in-flight runs finish) and closing
// (every slot dropped, owned goroutines waited for, the last writes
// committed).
func (s *Scheduler) Run(ctx context.Context) error {
	defer s.cancelCleanup()
	bg := s.startBackground()
	defer bg.abandonWrites()

	err := s.loop(ctx)
	if err != nil {
		bg.abandonWrites() // the lease is gone: nothing fenced by it can be committed
	}
	s.stopFiring()
	if err == nil {
		s.runDraining()
	}
	s.runClosing(err == nil, bg)
	return err
}

// background is what Run starts beside the loop: the election and control
// watches, the journals' and the deleted jobs' sweeps, the takeovers' reads, the campaigns' first
// transactions, the gate opener shared by the process, the fenced writer
// and the notifier.
type background struct {
	stopNotifier  context.CancelFunc
	notifierDone  chan struct{}
	stopWatches   context.CancelFunc
	giveGates     func()
	stopWriter    chan struct{}
	writerDone    chan struct{}
	abandonWrites context.CancelFunc
}

func (s *Scheduler) startBackground() *background {
	watchCtx, stopWatches := context.WithCancel(context.Background())
	s.wg.Add(7)
	go s.watchUpstreams(watchCtx)
	go s.watchElections(watchCtx)
	go s.watchControl(watchCtx)
	go s.sweepJournals(watchCtx, s.cfg.JournalSweep)
	go s.sweepJobs(watchCtx)
	go func() { defer s.wg.Done(); s.reads.Run(watchCtx) }()
	go func() { defer s.wg.Done(); s.candidacies.Run(watchCtx) }()
	g, giveGates := gate.Start(s.cfg.Clock)
	s.gates = g
	writerCtx, abandonWrites := context.WithCancel(context.Background())
	bg := &background{stopWatches: stopWatches, giveGates: giveGates, stopWriter: make(chan struct{}),
		writerDone: make(chan struct{}), abandonWrites: abandonWrites}
	go func() { s.writer.Run(writerCtx, bg.stopWriter); close(bg.writerDone) }()
	var notifyCtx context.Context
	notifyCtx, bg.stopNotifier = context.WithCancel(context.Background())
	bg.notifierDone = make(chan struct{})
	go func() { s.notifier.Run(notifyCtx); close(bg.notifierDone) }()
	return bg
}

// stopFiring ends the running phase: no more fires, no more campaigns,
// whatever the view says; armed fires that have not started go with their
// slots.
func (s *Scheduler) stopFiring() {
	for _, sl := range s.slots {
		if sl.phase == campaigning {
			s.abandonCampaign(sl)
		}
		s.unschedule(sl)
	}
	s.stopping = true
	s.stopWaits()
	for _, sl := range s.slots {
		s.disarm(sl)
	}
}

// runDraining hands the slots over as their runs end. Slots with nothing
// running are handed over at once, not after the others' executions drain
// (up to Grace): their next fires belong to the next holder, who takes over
// within milliseconds. The member leaves the view first, so that the others
// want its slots (and campaign for them) by the time they are resigned.
// Held by TestStopWithRunInFlightHandsIdleSlotsOverAtOnce.
func (s *Scheduler) runDraining() {
	if s.running > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
		if err := s.member.Withdraw(ctx); err != nil {
			s.cfg.Logger.Warn("could not leave the view; idle slots are handed over when the lease is revoked", "err", err)
		}
		cancel()
		for _, sl := range s.slots {
			if sl.held() && len(sl.runs) == 0 {
				s.endLeadership(sl, Released, "stopping")
			}
		}
	}
	s.drain(s.cfg.Grace)
}

// runClosing drops every slot still led (on a graceful stop, after writing
// its state as it leaves it, its start recorded ahead taken back), cancels what still runs, waits for
// the goroutines the scheduler owns, and commits the last writes. The lease
// revoke that follows (Member.Leave) deletes every key of the member in one
// revision: one request, not one resign per slot.
func (s *Scheduler) runClosing(graceful bool, bg *background) {
	for _, sl := range s.slots {
		if !sl.held() {
			continue
		}
		if graceful { // committed before the member leaves: the writer is flushed below
			takeBackAhead(sl)
			s.writeLastState(sl)
		}
		s.dropLeadership(sl, Released, "stopping")
		s.setPhase(sl, idle)
	}
	s.drain(0)
	bg.stopWatches()
	bg.giveGates()
	s.waitOwned(ownedWait)
	s.permits.Close(permitsWait(graceful))
	close(s.stopped)
	close(bg.stopWriter)
	<-bg.writerDone
	s.stopNotifier(bg.stopNotifier, bg.notifierDone)
}

// drain waits for in-flight executions, up to grace, then cancels the rest
// and waits for them to return.
func (s *Scheduler) drain(grace time.Duration) {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	for s.running > 0 {
		select {
		case <-s.finished.bell:
			s.finishedDraining(grace > 0)
		case r := <-s.resigned:
			s.resignEnded(r)
		case r := <-s.results:
			s.campaignEnded(r)
		case r := <-s.raised:
			s.raiseEnded(r)
		case <-deadline.C:
			s.cancelRuns()
		}
	}
}

// finishedDraining takes the runs that ended while draining; with handOver,
// a slot whose run is over is handed over without waiting for the others.
func (s *Scheduler) finishedDraining(handOver bool) {
	for f := range s.finished.take() {
		s.runEnded(f)
		if sl, ok := s.slots[f.slot]; ok && handOver && sl.held() && len(sl.runs) == 0 && s.running > 0 {
			s.endLeadership(sl, Released, "stopping")
		}
	}
}

// cancelRuns cancels every execution still in flight.
func (s *Scheduler) cancelRuns() {
	for _, sl := range s.slots {
		if sl.cancelLead != nil {
			sl.cancelLead()
		}
	}
}

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
			s.campaignEndedClosing(r)
		case <-s.resigned:
		case <-s.raised:
		case <-s.retries:
		case <-s.finished.bell:
			s.finishedClosing()
		}
	}
}

// campaignEndedClosing resigns a campaign that won after the scheduler
// stopped.
func (s *Scheduler) campaignEndedClosing(r campaignResult) {
	if r.err == nil {
		resign(s.cleanupCtx, r.election)
	}
}

// finishedClosing forgets the runs that ended after the slots were dropped.
func (s *Scheduler) finishedClosing() {
	for f := range s.finished.take() {
		if sl, ok := s.slots[f.slot]; ok {
			if _, ok := sl.runs[f.run]; ok {
				delete(sl.runs, f.run)
				s.running--
			}
		}
	}
}

// permitsWait bounds how long closing waits for the deletes of the permits
// its runs released. After a lost lease it waits for none: the keys go with
// the lease (revoked as the member leaves, or by its next incarnation, or
// expired), and on an etcd that cannot answer the wait would only hold the
// rejoin back.
// Held by TestLostLeaseDoesNotWaitForPermitDeletes.
func permitsWait(graceful bool) time.Duration {
	if graceful {
		return resignTimeout
	}
	return 0
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
