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
// alone (shard.Assignment.Place): a job's base does not depend on the other
// jobs, but the leftovers of all jobs are spread over the members' totals
// together, so shard.Assign over the whole catalog may place the job's
// leftovers elsewhere and move a few leftovers of other jobs. The loop
// computes the whole assignment again, coalesced (reassignQuiet after the
// last such change, at most reassignMax after the first), and moves only
// the slots whose owner changed: the slots end where a whole install puts
// them. Meanwhile two members may both prefer a slot, or neither, as while
// they run different catalog revisions; the slot's election keeps it safe.
// Held by TestUpdatesAddAndRemoveJobsInPlace and
// TestIncrementalInstallsConvergeToTheWholeOne.

// reassignQuiet and reassignMax pace the whole assignment after jobs were
// placed one by one: at 100,000 single-slot jobs it costs about 0.4 s of
// CPU (BenchmarkCatalogChange, reassign), so a stream of single-job
// changes costs it at most every 10 s.
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

// reassignIfDue computes the whole assignment over the view last applied
// once it is due, and moves the slots whose preferred owner it changed (a
// newer view is applied whole anyway: views.Changed has rung).
func (s *Scheduler) reassignIfDue(now time.Time) {
	if s.reassign.due.IsZero() || now.Before(s.reassign.due) {
		return
	}
	s.reassign.first, s.reassign.due = time.Time{}, time.Time{}
	v := s.reassign.view
	owners, err := s.assign(v)
	if err != nil {
		s.cfg.Logger.Error("cannot assign slots; keeping the previous assignment", "revision", v.Revision, "err", err)
		return
	}
	me := s.member.ID()
	for _, sl := range s.slots {
		if wanted := !sl.removed && v.Contains(me) && owners.Owner(sl.id) == me; wanted != sl.wanted {
			sl.wanted = wanted
			s.reconcile(sl)
			s.dropIfRemoved(sl)
		}
	}
}
