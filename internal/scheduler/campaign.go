package scheduler

import (
	"context"
	"sync"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.opentelemetry.io/otel/attribute"
)

// campaignRetry is the pause before a failed campaign is tried again.
const campaignRetry = 500 * time.Millisecond

// maxCampaigning bounds the campaigns of a member that talk to etcd at once:
// a member taking thousands of slots at once would otherwise send every
// campaign, fence read and first write together, and delay its own
// keepalive acks (docs/decisions/0027-at-most-256-campaigns.md).
const maxCampaigning = 256

// campaignHold is how long a campaign keeps its place among maxCampaigning.
const campaignHold = time.Second

type campaignResult struct {
	slot     shard.Slot
	gen      uint64
	election *concurrency.Election
	err      error
}

// startCampaign puts a slot in line for a campaign, after delay. Only
// maxCampaigning campaigns have a goroutine at a time; the others wait in
// s.waiting, which costs nothing per slot. A goroutine apiece would
// make a member taking 10,000 slots start 10,000 goroutines, whose
// descriptors Go keeps for good. Held by TestCampaignsInLineHaveNoGoroutine.
func (s *Scheduler) startCampaign(sl *slot, delay time.Duration) {
	if sl.backoff {
		delay, sl.backoff = max(delay, campaignRetry), false
	}
	sl.gen++
	s.setPhase(sl, campaigning)
	q := queuedCampaign{sl: sl, gen: sl.gen}
	if delay > 0 {
		sl.campaignTimer = time.AfterFunc(delay, func() { s.campaignsDue.put(q) })
		return
	}
	s.waiting = append(s.waiting, q)
	s.startWaitingCampaigns()
}

// queuedCampaign is a slot in line for a campaign; gen tells whether the
// campaign was abandoned meanwhile.
type queuedCampaign struct {
	sl  *slot
	gen uint64
}

// campaignBell is where campaign goroutines and retry timers tell the loop
// that a place among maxCampaigning came free or a delayed campaign is due.
type campaignBell struct {
	mu   sync.Mutex
	due  []queuedCampaign
	bell chan struct{} // capacity one
}

func (b *campaignBell) put(q queuedCampaign) {
	b.mu.Lock()
	b.due = append(b.due, q)
	b.mu.Unlock()
	ringBell(b.bell)
}

func (b *campaignBell) take() []queuedCampaign {
	b.mu.Lock()
	defer b.mu.Unlock()
	due := b.due
	b.due = nil
	return due
}

// campaignsFreed answers the campaign bell: delayed campaigns join the line,
// and the line moves up into the places that came free.
func (s *Scheduler) campaignsFreed() {
	s.waiting = append(s.waiting, s.campaignsDue.take()...)
	s.startWaitingCampaigns()
}

// startWaitingCampaigns starts the campaigns in line, in order, while there
// are places among maxCampaigning.
func (s *Scheduler) startWaitingCampaigns() {
	for len(s.waiting) > 0 {
		q := s.waiting[0]
		if sl := q.sl; sl.gen != q.gen || sl.phase != campaigning || s.slots[sl.id] != sl {
			s.waiting = s.waiting[1:] // abandoned while in line
			continue
		}
		select {
		case s.campaigning <- struct{}{}:
		default:
			return // every place taken: a campaign that leaves rings the bell
		}
		s.waiting = s.waiting[1:]
		s.runCampaign(q.sl)
	}
	s.waiting = nil // let the array go once the line is empty
}

// runCampaign campaigns for a slot in a goroutine of its own, holding one of
// the maxCampaigning places.
func (s *Scheduler) runCampaign(sl *slot) {
	sl.campaignTimer = nil
	ctx, cancel := context.WithCancel(context.Background())
	sl.cancelCampaign = cancel
	prefix := keyspace.Election(s.member.Cluster(), sl.id)
	id, gen, session := sl.id, sl.gen, s.member.Session()
	key := keyspace.Candidacy(s.member.Cluster(), id, int64(session.Lease()))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		// A campaign waiting for another member's key to go (until its
		// lease expires, say) gives its place up after a while, so it holds
		// up nobody for long.
		leave := sync.OnceFunc(func() {
			<-s.campaigning
			ringBell(s.campaignsDue.bell)
		})
		t := time.AfterFunc(campaignHold, leave)
		_, span := s.slotSpan(ctx, "slot.acquire", id)
		e, err := s.candidacies.Campaign(ctx, session, prefix, s.member.ID())
		if err == nil {
			span.SetAttributes(attribute.Int64("kira.fencing_token", e.Rev()))
		}
		endSlotSpan(span, err)
		t.Stop()
		leave()
		if err == nil && ctx.Err() != nil {
			err = ctx.Err() // won, but the campaign was abandoned meanwhile
		}
		if err != nil {
			deleteCandidacy(s.cleanupCtx, session, key)
		}
		// Always report, so the loop knows this slot has no goroutine left.
		select {
		case s.results <- campaignResult{slot: id, gen: gen, election: e, err: err}:
		case <-s.stopped:
			if err == nil {
				deleteCandidacy(s.cleanupCtx, session, key)
			}
		}
	}()
}

// abandonCampaign cancels a campaign. One still in line (or waiting out its
// delay) has talked to nobody: the slot is idle at once. Otherwise the slot
// waits in resigning until the campaign goroutine has reported (and
// resigned, had it won), because a new campaign on the same lease would
// reuse the very same key.
func (s *Scheduler) abandonCampaign(sl *slot) {
	if sl.cancelCampaign == nil {
		if sl.campaignTimer != nil {
			sl.campaignTimer.Stop()
			sl.campaignTimer = nil
		}
		sl.gen++ // its place in line, if it has one, is void
		s.setPhase(sl, idle)
		return
	}
	sl.cancelCampaign()
	s.setPhase(sl, resigning)
}

// deleteCandidacy deletes this member's candidacy for a slot. A campaign cancelled
// during its first transaction may have created the key without learning it
// (and then Resign does nothing), which would block the preferred member
// until our lease ends; deleting our own key is always safe once we gave up.
func deleteCandidacy(ctx context.Context, session *concurrency.Session, key string) {
	ctx, cancel := context.WithTimeout(ctx, resignTimeout)
	defer cancel()
	_, _ = session.Client().Delete(ctx, key)
}

func (s *Scheduler) campaignEnded(r campaignResult) {
	sl := s.slots[r.slot]
	if sl.gen != r.gen {
		return // cannot happen: a slot has one goroutine at a time
	}
	sl.cancelCampaign = nil    // the campaign's context is done: do not keep it
	if sl.phase == resigning { // abandoned while the result was on its way
		if r.err == nil {
			s.resignAsync(sl, r.election, "campaign abandoned")
			return
		}
		s.setPhase(sl, idle)
		s.reconcile(sl)
		s.dropIfRemoved(sl) // abandoned for the job's removal: TestADeletedJobsKeysAreSwept
		return
	}
	if r.err != nil {
		s.setPhase(sl, idle)
		s.cfg.Logger.Warn("campaign failed; retrying", "slot", sl.id.String(), "err", r.err)
		if sl.wanted {
			s.startCampaign(sl, campaignRetry)
		}
		s.dropIfRemoved(sl)
		return
	}
	if s.cfg.Admit != nil {
		if err := s.cfg.Admit(r.election.Rev()); err != nil {
			// Not led at all (no event): the mark said so once; this comes
			// back every campaignRetry. Held by TestRefusedTokensStartNothing.
			s.cfg.Logger.Debug("won a slot under a token Admit refuses; giving it up", "slot", sl.id.String(), "token", r.election.Rev(), "err", err)
			sl.backoff = true
			s.resignAsync(sl, r.election, err.Error())
			return
		}
	}
	now := s.cfg.Clock.Now()
	s.setPhase(sl, raising)
	sl.election = r.election
	sl.token = fencing.Token(r.election.Rev())
	sl.leaderKey = r.election.Key()
	sl.leadCtx, sl.cancelLead = context.WithCancel(context.Background())
	s.byKey[sl.leaderKey] = sl
	s.setSnapshot(sl.id, sl.token, true)
	s.emit(Event{Kind: Acquired, Slot: sl.id, Token: sl.token, At: now,
		Execution: jobs.Execution{Job: sl.id.Job, Partition: sl.id.Partition, Partitions: sl.job.spec.Partitions}})
	if !sl.wants() {
		s.endLeadership(sl, Released, sl.unwanted())
		return
	}
	s.raiseFences(sl)
}

// ringBell sends on a bell, a channel of capacity one, without blocking: a bell
// already rung and not yet answered says the same.
func ringBell(bell chan<- struct{}) {
	select {
	case bell <- struct{}{}:
	default:
	}
}
