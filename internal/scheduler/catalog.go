package scheduler

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
)

// job is a catalog job prepared for dispatch.
type job struct {
	spec     config.Job
	schedule config.Schedule
	executor jobs.Executor
	fence    jobs.Fence   // nil without fence_url or fence_command
	limit    config.Limit // the concurrency limit its runs share (permits.go)
}

// prepareJobs parses a catalog's jobs into dispatchable form. A job of
// before whose definition and limit are unchanged is kept as it was
// prepared, so that a change to one job of many re-prepares one job, and
// install finds the others unchanged by identity. Held by
// TestUnchangedJobsKeepTheirPreparation.
func prepareJobs(cat *config.Catalog, handlers jobs.Handlers, before map[string]*job) (map[string]*job, error) {
	out := make(map[string]*job, len(cat.Jobs))
	for _, spec := range cat.Jobs {
		j, err := prepareJob(cat, spec, handlers, before[spec.Name])
		if err != nil {
			return nil, err
		}
		out[spec.Name] = j
	}
	return out, nil
}

// prepareReplaced prepares the jobs at the indexes replaced of cat, a
// catalog whose other jobs are those of before, and returns the whole set
// and the names of the jobs replaced. It returns no set when before lacks
// a job replaced: cat does not replace jobs of before, and is prepared
// whole (TestUpdatesPrepareOnlyTheJobsReplaced).
func prepareReplaced(cat *config.Catalog, replaced []int, handlers jobs.Handlers, before map[string]*job) (map[string]*job, []string, error) {
	fresh := make(map[string]*job, len(replaced))
	for _, i := range replaced {
		if i < 0 || i >= len(cat.Jobs) || before[cat.Jobs[i].Name] == nil {
			return nil, nil, nil
		}
		spec := cat.Jobs[i]
		j, err := prepareJob(cat, spec, handlers, before[spec.Name])
		if err != nil {
			return nil, nil, err
		}
		fresh[spec.Name] = j
	}
	out := maps.Clone(before)
	maps.Copy(out, fresh)
	return out, slices.Collect(maps.Keys(fresh)), nil
}

// prepareJob prepares spec, a job of cat, or returns old, its preparation
// of before, when neither its definition nor its limit changed.
func prepareJob(cat *config.Catalog, spec config.Job, handlers jobs.Handlers, old *job) (*job, error) {
	if spec.Partitions < 1 {
		return nil, fmt.Errorf("scheduler: job %s has %d partitions; a catalog from config.Parse has at least 1", spec.Name, spec.Partitions)
	}
	if spec.HistoryLimit <= 0 { // a catalog built in code, not parsed
		spec.HistoryLimit = config.DefaultHistoryLimit
	}
	limit := cat.Limit(spec)
	if old != nil && old.limit == limit && reflect.DeepEqual(old.spec, spec) {
		return old, nil
	}
	sched, err := spec.ParsedSchedule()
	if err != nil {
		return nil, fmt.Errorf("scheduler: job %s: %w", spec.Name, err)
	}
	ex, err := jobs.ForJob(spec, handlers)
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	return &job{spec: spec, schedule: sched, executor: ex, fence: jobs.FenceForJob(spec), limit: limit}, nil
}

// install makes prepared the set of jobs: new slots are created, slots of
// removed jobs (or partitions) are marked removed (released after their
// in-flight runs, then dropped), and slots of changed jobs take the new
// definition (installSlot).
func (s *Scheduler) install(prepared map[string]*job, now time.Time) {
	s.jobs = prepared
	s.mu.Lock()
	s.installed = prepared
	s.mu.Unlock()
	for id, sl := range s.slots {
		j, ok := prepared[id.Job]
		if !ok || id.Partition >= j.spec.Partitions {
			sl.removed = true
			continue
		}
		s.installSlot(sl, j, now)
	}
	for name, j := range prepared {
		for p := 0; p < j.spec.Partitions; p++ {
			id := shard.Slot{Job: name, Partition: p}
			if _, ok := s.slots[id]; !ok {
				s.slots[id] = &slot{id: id, job: j, heapIndex: -1}
			}
		}
	}
}

// installSlot gives sl the definition j, a new schedule taking effect from
// its next fire after now.
func (s *Scheduler) installSlot(sl *slot, j *job, now time.Time) {
	changed := sl.job != j && !reflect.DeepEqual(sl.job.spec, j.spec)
	sl.job, sl.removed = j, false
	if changed && j.spec.Dependent() {
		s.becameDependent(sl, now)
		return
	}
	if changed && sl.heapIndex >= 0 && !now.IsZero() {
		// A fire armed under the old schedule is taken back; one that
		// already started is not fired again under the new one.
		s.disarm(sl)
		from := now
		if sl.armed != nil {
			from = latest(now, sl.armed.ahead.scheduled)
		}
		s.scheduleNext(sl, from)
	}
}

// installReplaced is install for a set of jobs that differs from the one
// installed only in the jobs replaced, when those keep their partitions
// and placement: only their slots take the new definitions, and the
// assignment, a function of partitions, placements and the view, stands.
// False, with nothing changed, when a job replaced moved a slot: the set
// is installed whole (TestUpdatesPrepareOnlyTheJobsReplaced).
func (s *Scheduler) installReplaced(prepared map[string]*job, replaced map[string]bool, now time.Time) bool {
	for name := range replaced {
		old, j := s.jobs[name], prepared[name]
		if old == nil || j == nil || old.spec.Partitions != j.spec.Partitions || old.spec.Placement.String() != j.spec.Placement.String() {
			return false
		}
		for p := 0; p < j.spec.Partitions; p++ {
			if sl := s.slots[shard.Slot{Job: name, Partition: p}]; sl == nil || sl.removed {
				return false
			}
		}
	}
	s.jobs = prepared
	s.mu.Lock()
	s.installed = prepared
	s.mu.Unlock()
	for name := range replaced {
		j := prepared[name]
		for p := 0; p < j.spec.Partitions; p++ {
			sl := s.slots[shard.Slot{Job: name, Partition: p}]
			s.installSlot(sl, j, now)
			s.reconcile(sl)
		}
	}
	return true
}

// SetCatalog makes the scheduler converge to cat, stored at revision rev,
// without a restart: added jobs start, removed jobs stop after their
// in-flight runs, changed jobs take effect at their next fire. A catalog
// whose jobs cannot be prepared (an unregistered handler) is refused whole.
func (s *Scheduler) SetCatalog(cat *config.Catalog, rev int64) error {
	return s.SetCatalogUpdate(config.Update{Catalog: cat, Revision: rev})
}

// SetCatalogUpdate is SetCatalog for a version config.WatchStored
// delivers. When it replaces jobs of the catalog last given (u.Since is
// that one's revision), only those jobs are prepared, and the loop touches
// only their slots; otherwise the catalog is prepared whole. Either way the
// scheduler converges to the same jobs (TestUpdatesPrepareOnlyTheJobsReplaced).
func (s *Scheduler) SetCatalogUpdate(u config.Update) error {
	s.setMu.Lock()
	defer s.setMu.Unlock()
	var next map[string]*job
	var names []string
	var err error
	if u.Since != 0 && u.Since == s.preparedRev {
		next, names, err = prepareReplaced(u.Catalog, u.Replaced, s.cfg.Handlers, s.prepared)
	}
	if next == nil && err == nil {
		next, err = prepareJobs(u.Catalog, s.cfg.Handlers, s.prepared)
	}
	if err != nil {
		return err
	}
	s.prepared, s.preparedRev = next, u.Revision
	s.mu.Lock()
	switch {
	case names == nil || (s.nextCatalog != nil && s.nextReplaced == nil):
		s.nextReplaced = nil // installed whole
	case s.nextCatalog == nil:
		s.nextReplaced = make(map[string]bool, len(names))
		fallthrough
	default:
		for _, name := range names {
			s.nextReplaced[name] = true
		}
	}
	s.nextCatalog, s.nextCatalogRev = next, u.Revision
	s.mu.Unlock()
	ringBell(s.catalogChanged)
	return nil
}

// catalogUpdated installs the catalog SetCatalog prepared, if any, and
// applies view v (the latest) to its slots, unless it only replaced jobs
// whose slots and placement stand (installReplaced).
func (s *Scheduler) catalogUpdated(v member.View) {
	s.mu.Lock()
	prepared, rev, replaced := s.nextCatalog, s.nextCatalogRev, s.nextReplaced
	s.nextCatalog, s.nextReplaced = nil, nil
	s.mu.Unlock()
	if prepared == nil {
		return
	}
	now := s.cfg.Clock.Now()
	inPlace := replaced != nil && s.installReplaced(prepared, replaced, now)
	if !inPlace {
		s.install(prepared, now)
	}
	s.mu.Lock()
	s.catalogRev = rev
	s.mu.Unlock()
	s.emit(Event{Kind: CatalogApplied, Count: int(rev), At: s.cfg.Clock.Now()})
	if !inPlace {
		s.applyView(v)
	}
}

// dropIfRemoved forgets a slot of a removed job once nothing refers to it.
func (s *Scheduler) dropIfRemoved(sl *slot) {
	if sl.removed && sl.phase == idle && len(sl.runs) == 0 {
		delete(s.slots, sl.id)
	}
}
