package scheduler

import (
	"time"

	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/shard"
)

// A catalog change that names its jobs (config.Update with Since) is
// installed job by job: only the named jobs' slots are touched, each as a
// whole install would touch it. A job whose slots move (added, removed, its
// partitions or placement changed) is placed into the current assignment
// alone (shard.Assignment.Place), by the job and the view's members alone:
// every member places it the same way at once, whatever assignment it
// holds, so its slots are wanted by one member each
// (TestAJobAddedIsWantedByOneMember). shard.Assign over the whole catalog
// bounds the members' totals, so it may put the job's leftovers elsewhere
// and move a few leftovers of other jobs. The loop has it computed again,
// coalesced (reassignQuiet after the last such change, at most reassignMax
// after the first), off its goroutine, and moves only the slots whose
// owner changed: the slots end where a whole install puts them, each move
// a handover under the slot's fence. Members compute it at different
// moments, over the catalog each runs then, so until they all ran it over
// the same catalog two may prefer a few slots of other jobs, or neither, as
// while they run different catalog revisions; the slot's election keeps it
// safe. Held by TestUpdatesAddAndRemoveJobsInPlace and
// TestIncrementalInstallsConvergeToTheWholeOne.

// reassignQuiet and reassignMax pace the whole assignment after jobs were
// placed one by one: it costs CPU in proportion to the catalog
// (BenchmarkCatalogChange, reassign), so a stream of single-job changes
// costs it at most every reassignMax.
const (
	reassignQuiet = time.Second
	reassignMax   = 10 * time.Second
)

// installChanges installs changes, each job by name (nil: removed), over
// the jobs the loop runs.
func (s *Scheduler) installChanges(changes map[string]*job, v member.View, now time.Time) {
	for name, j := range changes {
		s.installJob(name, j, v, now)
	}
}

// installJob makes j (nil: none) the job of that name: its new slots are
// created and assigned, its slots beyond its partitions (all, when
// removed) are marked removed, released after their in-flight runs and
// then dropped, and the others take the new definition (installSlot); no
// other slot is touched.
func (s *Scheduler) installJob(name string, j *job, v member.View, now time.Time) {
	old := s.jobs[name]
	if old == j {
		return
	}
	s.mu.Lock()
	if j == nil {
		delete(s.jobs, name)
	} else {
		s.jobs[name] = j
	}
	s.mu.Unlock()
	oldP, newP := partitions(old), partitions(j)
	moved := old == nil || j == nil || oldP != newP || old.spec.Placement.String() != j.spec.Placement.String()
	if moved {
		s.place(name, j, v, now)
	}
	me := s.member.ID()
	for p := range max(oldP, newP) {
		id := shard.Slot{Job: name, Partition: p}
		sl := s.slots[id]
		switch {
		case p >= newP && sl == nil:
			continue
		case p >= newP:
			sl.removed, sl.wanted = true, false
		case sl == nil:
			sl = &slot{id: id, job: j, heapIndex: -1}
			s.slots[id] = sl
		default:
			s.installSlot(sl, j, now)
		}
		if moved && !sl.removed {
			sl.wanted = v.Contains(me) && s.assigned.out != nil && s.assigned.out.Owner(id) == me
		}
		s.reconcile(sl)
		s.dropIfRemoved(sl)
	}
	if j == nil {
		s.jobRemoved(name, s.slotsOf(name, oldP))
	} else {
		s.jobBack(name)
	}
}

func partitions(j *job) int {
	if j == nil {
		return 0
	}
	return j.spec.Partitions
}

// place puts job j (nil: none) of that name into the loop's assignment
// alone, and has the whole assignment computed again soon.
func (s *Scheduler) place(name string, j *job, v member.View, now time.Time) {
	a := s.assigned.out
	if a == nil {
		return // no view applied yet: catalogUpdated applies it whole
	}
	s.assigned.in = nil // no longer shard.Assign's answer: assign computes it again
	s.assigned.gen++    // one computing off the loop lacks this change
	s.reassignSoon(now, v)
	if j == nil {
		a.Remove(name)
		s.mu.Lock()
		delete(s.eligible, name)
		s.mu.Unlock()
		delete(s.unplaced, name)
		return
	}
	ids := v.Matching(j.spec.Selector())
	if err := a.Place(shard.Job{Name: name, Partitions: j.spec.Partitions, Members: ids}); err != nil {
		s.cfg.Logger.Error("cannot place the job's slots until the next assignment", "job", name, "err", err)
		a.Remove(name)
	}
	s.mu.Lock()
	if s.eligible == nil {
		s.eligible = map[string]int{}
	}
	s.eligible[name] = len(ids)
	s.mu.Unlock()
	s.reportPlacement(j.spec, len(ids), v.Revision)
}

// reassignSoon has the whole assignment computed reassignQuiet from now,
// and at most reassignMax after the first change that asked for it.
func (s *Scheduler) reassignSoon(now time.Time, v member.View) {
	s.reassign.view = v
	if s.reassign.first.IsZero() {
		s.reassign.first = now
	}
	s.reassign.due = now.Add(reassignQuiet)
	if last := s.reassign.first.Add(reassignMax); last.Before(s.reassign.due) {
		s.reassign.due = last
	}
}

// wholeAssignment is a whole assignment computed off the loop over view,
// asked for at the loop's assignment generation gen.
type wholeAssignment struct {
	gen  uint64
	view member.View
	in   map[string]shard.Job
	out  *shard.Assignment
	err  error
}

// reassignIfDue starts the whole assignment over the view last applied
// once it is due: the loop takes its input, and a goroutine of the
// scheduler's own computes it, one at a time, so that the loop keeps
// firing meanwhile (TestTheLoopFiresWhileTheWholeAssignmentComputes;
// docs/decisions/0047-a-new-job-placed-by-itself.md); reassigned installs
// it.
func (s *Scheduler) reassignIfDue(now time.Time) {
	if s.reassign.due.IsZero() || now.Before(s.reassign.due) || s.reassign.computing {
		return
	}
	s.reassign.first, s.reassign.due = time.Time{}, time.Time{}
	s.reassign.computing = true
	w := wholeAssignment{gen: s.assigned.gen, view: s.reassign.view}
	jobs := s.assignInput(w.view)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if s.assignHook != nil {
			s.assignHook()
		}
		w.out, w.err = shard.Assign(jobs)
		w.in = byName(jobs)
		s.wholes <- w // room for one: never blocks
	}()
}

// reassigned installs w, a whole assignment computed off the loop, and
// moves the slots whose preferred owner it changed, if the loop's
// assignment did not change since w was asked for. Otherwise w is stale
// and dropped: a job placed since asked for the next (reassignSoon), and a
// view applied since computed its own (TestAStaleWholeAssignmentIsDropped).
func (s *Scheduler) reassigned(w wholeAssignment) {
	s.reassign.computing = false
	if w.gen != s.assigned.gen {
		return
	}
	if w.err != nil {
		s.cfg.Logger.Error("cannot assign slots; keeping the previous assignment", "revision", w.view.Revision, "err", w.err)
		return
	}
	s.assigned.in, s.assigned.out = w.in, w.out
	me := s.member.ID()
	for _, sl := range s.slots {
		if wanted := !sl.removed && w.view.Contains(me) && w.out.Owner(sl.id) == me; wanted != sl.wanted {
			sl.wanted = wanted
			s.reconcile(sl)
			s.dropIfRemoved(sl)
		}
	}
}
