package scheduler

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/shard"
)

// loop is the running phase: the one goroutine that owns every slot. Each
// case of its select is one call; it returns nil when ctx ends, or the
// cause when the lease is lost or no longer trusted (after lose).
func (s *Scheduler) loop(ctx context.Context) error {
	timer := s.cfg.Clock.NewTimer(time.Hour)
	defer timer.Stop()
	// Trust is judged by the member's clock (monotonic), never by the
	// scheduling clock: a member whose wall clock is off keeps a sound
	// lease, and its trust deadline is timed by a timer of its own.
	trustTimer := time.NewTimer(time.Hour)
	defer trustTimer.Stop()
	s.applyView(s.views.Latest())
	for {
		if err := s.checkTrust(trustTimer); err != nil {
			return err
		}
		timer.ResetAt(s.nextWake())
		finished, settled := s.finishedOrSettled()
		select {
		case <-ctx.Done():
			return nil
		case <-s.member.Done():
			return s.lose(member.ErrSessionLost)
		case <-trustTimer.C: // the top of the loop checks the window again
		case <-settled: // the instant's fires have started: results next
		case <-s.views.Changed():
			if err := s.viewChanged(); err != nil {
				return err
			}
		case <-timer.C():
			s.fireDue()
			s.fireOneOffs()
			s.reassignIfDue(s.cfg.Clock.Now())
		case w := <-s.wholes:
			s.reassigned(w)
		case r := <-s.results:
			s.campaignEnded(r)
		case <-s.campaignsDue.bell:
			s.campaignsFreed()
		case <-finished:
			s.takeFinished()
		case r := <-s.resigned:
			s.resignEnded(r)
		case r := <-s.raised:
			s.raiseEnded(r)
		case r := <-s.retries:
			s.retryDue(r)
		case evs := <-s.control:
			s.controlChanged(evs)
		case <-s.catalogChanged:
			s.catalogUpdated(s.views.Latest())
		case <-s.upstream.ready:
			s.upstreamsRead()
		case c := <-s.created:
			s.ownKeyCreated(c)
		case d := <-s.deleted:
			s.ownKeyDeleted(d)
		}
	}
}

// checkTrust loses everything once the member cannot prove its lease alive,
// and otherwise times the window's end.
func (s *Scheduler) checkTrust(trustTimer *time.Timer) error {
	trust := s.member.TrustLeft()
	if trust > 0 {
		trustTimer.Reset(trust)
		return nil
	}
	select {
	case <-s.member.Done():
		return s.lose(member.ErrSessionLost)
	default:
		return s.lose(ErrUntrusted)
	}
}

// nextWake is when the loop next has to look at a slot: the top of the
// heap or of the one-off runs' heap, or an hour from now.
func (s *Scheduler) nextWake() time.Time {
	wake := s.cfg.Clock.Now().Add(time.Hour)
	if len(s.heap) > 0 && s.heap[0].wakeAt.Before(wake) {
		wake = s.heap[0].wakeAt
	}
	if t, ok := s.nextOneOff(); ok && t.Before(wake) {
		wake = t
	}
	if t := s.reassign.due; !t.IsZero() && !s.reassign.computing && t.Before(wake) {
		wake = t
	}
	return wake
}

// finishedOrSettled returns the channels the loop waits on for results:
// finished runs, unless fires whose gate opened are still starting
// (see gate.Gates.Settled), in which case settled says when they have.
func (s *Scheduler) finishedOrSettled() (finished, settled <-chan struct{}) {
	if c := s.gates.Settled(); !isClosed(c) {
		return nil, c
	}
	return s.finished.bell, nil
}

// takeFinished takes every run that ended since the last take.
func (s *Scheduler) takeFinished() {
	for f := range s.finished.take() {
		s.runEnded(f)
	}
}

// viewChanged applies the latest view. A view without this member, once it
// has been in one, means its lease is gone: its record lives under the
// lease, even if no keepalive has told the session yet.
func (s *Scheduler) viewChanged() error {
	v := s.views.Latest()
	if s.seenSelf && !v.Contains(s.member.ID()) {
		return s.lose(member.ErrSessionLost)
	}
	s.seenSelf = s.seenSelf || v.Contains(s.member.ID())
	s.applyView(v)
	return nil
}

// ownKeyDeleted ends the leadership whose key was deleted behind our back.
// The same lease always campaigns with the same key, so only a delete after
// our key's creation ends our current leadership.
func (s *Scheduler) ownKeyDeleted(d deletedKey) {
	if sl, ok := s.byKey[d.key]; ok && sl.held() && d.rev > int64(sl.token) {
		s.endLeadership(sl, Lost, "election key deleted")
		s.reconcile(sl)
		s.dropIfRemoved(sl)
	}
}

// applyView recomputes which slots this member is preferred for: the
// assignment of every job's slots over the view's members its placement
// admits (every member for a job without one).
func (s *Scheduler) applyView(v member.View) {
	s.reassign.first, s.reassign.due = time.Time{}, time.Time{} // the whole assignment, now
	s.sweeps.viewApplied(v, s.member.ID())
	s.assigned.gen++ // one computing off the loop is for an older view
	s.historyFormat = v.HistoryFormat
	s.writer.SetStateFormat(v.HistoryFormat)
	owners, err := s.assign(v)
	if err != nil {
		s.cfg.Logger.Error("cannot assign slots; keeping the previous assignment", "revision", v.Revision, "err", err)
		return
	}
	me := s.member.ID()
	for _, sl := range s.slots {
		sl.wanted = !sl.removed && v.Contains(me) && owners.Owner(sl.id) == me
		s.reconcile(sl)
		s.dropIfRemoved(sl)
	}
}

// assign computes the preferred owner of every slot of the catalog over the
// members of v each job's placement admits (assignInput). When every job's
// partitions and admitted members are those of the last call (a catalog
// change that moved no slot, a view change of nothing but a member's
// catalog revision), the last assignment is the answer: shard.Assign is a
// pure function of them. Held by TestAssignmentKeptWhenItsInputIsUnchanged.
func (s *Scheduler) assign(v member.View) (*shard.Assignment, error) {
	jobs := s.assignInput(v)
	if s.assigned.out != nil && sameAssignInput(s.assigned.in, jobs) {
		return s.assigned.out, nil
	}
	out, err := shard.Assign(jobs)
	if err != nil {
		return nil, err
	}
	s.assigned.in, s.assigned.out = byName(jobs), out
	return out, nil
}

// assignInput is every job of the catalog with the members of v its
// placement admits, and records how many members each job may run on.
func (s *Scheduler) assignInput(v member.View) []shard.Job {
	byPlacement := map[string][]string{}
	eligible := make(map[string]int, len(s.jobs))
	jobs := make([]shard.Job, 0, len(s.jobs))
	for name, j := range s.jobs {
		key := j.spec.Placement.String()
		ids, ok := byPlacement[key]
		if !ok {
			ids = v.Matching(j.spec.Selector())
			byPlacement[key] = ids
		}
		jobs = append(jobs, shard.Job{Name: name, Partitions: j.spec.Partitions, Members: ids})
		eligible[name] = len(ids)
		s.reportPlacement(j.spec, eligible[name], v.Revision)
	}
	s.mu.Lock()
	s.eligible = eligible
	s.mu.Unlock()
	return jobs
}

// byName is jobs by name.
func byName(jobs []shard.Job) map[string]shard.Job {
	out := make(map[string]shard.Job, len(jobs))
	for _, j := range jobs {
		out[j.Name] = j
	}
	return out
}

// sameAssignInput reports whether jobs are the jobs of in, each with the
// same partitions and members.
func sameAssignInput(in map[string]shard.Job, jobs []shard.Job) bool {
	if len(in) != len(jobs) {
		return false
	}
	for _, j := range jobs {
		old, ok := in[j.Name]
		if !ok || old.Partitions != j.Partitions || !slices.Equal(old.Members, j.Members) {
			return false
		}
	}
	return true
}

// reportPlacement logs when a job's placement stops (and starts again)
// matching any member of the view: meanwhile nobody runs it, and the
// member that takes its slots applies its misfire policy to the fires
// missed.
func (s *Scheduler) reportPlacement(j config.Job, eligible int, rev int64) {
	if j.Placement == nil || rev == 0 { // no view read yet
		return
	}
	switch unplaced := eligible == 0; {
	case unplaced && !s.unplaced[j.Name]:
		s.cfg.Logger.Warn("no live member matches the job's placement: nobody runs it until one joins", "job", j.Name, "placement", j.Placement.String(), "view", rev)
	case !unplaced && s.unplaced[j.Name]:
		s.cfg.Logger.Info("a live member matches the job's placement again", "job", j.Name, "placement", j.Placement.String(), "members", eligible)
	}
	s.unplaced[j.Name] = eligible == 0
}

// Eligible returns, for each job of the catalog the scheduler runs, how
// many members of the latest view its placement admits.
func (s *Scheduler) Eligible() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.eligible)
}

// reconcile moves a slot toward what the view wants, between executions.
func (s *Scheduler) reconcile(sl *slot) {
	if s.stopping {
		return
	}
	switch {
	case sl.wanted && sl.phase == idle:
		s.startCampaign(sl, 0)
	case sl.wants() && sl.phase == leading && sl.heapIndex < 0 && sl.leadCtx.Err() == nil:
		// Wanted again while it was draining to resign: keep firing.
		s.resume(sl)
	case !sl.wanted && sl.phase == campaigning:
		s.abandonCampaign(sl)
	case !sl.wants() && sl.held():
		s.unschedule(sl)
		s.disarm(sl)
		if len(sl.runs) == 0 {
			s.endLeadership(sl, Released, sl.unwanted())
		}
	}
}
