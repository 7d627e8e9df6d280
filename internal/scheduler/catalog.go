package scheduler

import (
	"fmt"
	"maps"
	"reflect"
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

// prepareChanges prepares the jobs u adds and replaces over before, the
// jobs of the catalog of u.Since, and returns them by name, with nil for
// each job u removes. A job removed and added again comes prepared.
func prepareChanges(u config.Update, handlers jobs.Handlers, before map[string]*job) (map[string]*job, error) {
	out := make(map[string]*job, len(u.Added)+len(u.Replaced)+len(u.Removed))
	for _, name := range u.Removed {
		out[name] = nil
	}
	for _, specs := range [][]config.Job{u.Added, u.Replaced} {
		for _, spec := range specs {
			j, err := prepareJob(u.Settings, spec, handlers, before[spec.Name])
			if err != nil {
				return nil, err
			}
			out[spec.Name] = j
		}
	}
	return out, nil
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
// definition (installSlot). prepared becomes the loop's own.
func (s *Scheduler) install(prepared map[string]*job, now time.Time) {
	s.mu.Lock()
	s.jobs, s.installed = prepared, prepared
	s.mu.Unlock()
	gone := map[string]int{} // the removed jobs' slots (forget.go)
	for id, sl := range s.slots {
		j, ok := prepared[id.Job]
		if !ok || id.Partition >= j.spec.Partitions {
			sl.removed = true
			if !ok {
				gone[id.Job]++
			}
			continue
		}
		s.installSlot(sl, j, now)
	}
	s.jobsRemoved(gone, prepared)
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
	if recreated(sl.job, j) {
		s.sweeps.add(j.spec.Name) // its predecessor's keys (jobsweep.go)
	}
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

// SetCatalog makes the scheduler converge to cat, stored at revision rev,
// without a restart: added jobs start, removed jobs stop after their
// in-flight runs, changed jobs take effect at their next fire. A catalog
// whose jobs cannot be prepared (an unregistered handler) is refused whole.
func (s *Scheduler) SetCatalog(cat *config.Catalog, rev int64) error {
	return s.SetCatalogUpdate(config.Update{Catalog: cat, Revision: rev})
}

// SetCatalogUpdate is SetCatalog for a version config.WatchStored
// delivers, from within its apply. When it names its changes to the
// catalog last given (u.Since is that one's revision), only the jobs it
// adds and replaces are prepared, and the loop touches only the slots of
// the jobs it names (installChanges); otherwise the catalog is prepared
// whole. Either way the scheduler converges to the same jobs
// (TestUpdatesPrepareOnlyTheJobsReplaced, TestUpdatesAddAndRemoveJobsInPlace).
func (s *Scheduler) SetCatalogUpdate(u config.Update) error {
	s.setMu.Lock()
	defer s.setMu.Unlock()
	if u.Since != 0 && u.Since == s.preparedRev {
		changes, err := prepareChanges(u, s.cfg.Handlers, s.prepared)
		if err != nil {
			return err
		}
		for name, j := range changes {
			if j == nil {
				delete(s.prepared, name)
			} else {
				s.prepared[name] = j
			}
		}
		s.preparedRev = u.Revision
		s.pend(nil, changes, u.Revision)
		return nil
	}
	cat, err := u.Whole()
	if err != nil {
		return err
	}
	next, err := prepareJobs(cat, s.cfg.Handlers, s.prepared)
	if err != nil {
		return err
	}
	s.prepared, s.preparedRev = next, u.Revision
	s.pend(maps.Clone(next), nil, u.Revision)
	return nil
}

// pend hands the loop a catalog to install: whole, or the changes to the
// one it runs, merged into any the loop has not taken yet (a job removed
// and added again within them comes added).
func (s *Scheduler) pend(whole, changes map[string]*job, rev int64) {
	s.mu.Lock()
	switch {
	case whole != nil:
		s.nextWhole, s.nextChanges = whole, nil
	case s.nextWhole != nil:
		for name, j := range changes {
			if j == nil {
				delete(s.nextWhole, name)
			} else {
				s.nextWhole[name] = j
			}
		}
	case s.nextChanges == nil:
		s.nextChanges = changes
	default:
		maps.Copy(s.nextChanges, changes)
	}
	s.nextCatalogRev = rev
	s.mu.Unlock()
	ringBell(s.catalogChanged)
}

// catalogUpdated installs the catalog SetCatalog prepared, if any: a whole
// one, then view v (the latest) applied to every slot, or the changes to
// the one it runs, job by job (installChanges).
func (s *Scheduler) catalogUpdated(v member.View) {
	s.mu.Lock()
	whole, changes, rev := s.nextWhole, s.nextChanges, s.nextCatalogRev
	s.nextWhole, s.nextChanges = nil, nil
	s.mu.Unlock()
	if whole == nil && changes == nil {
		return
	}
	now := s.cfg.Clock.Now()
	if whole != nil {
		s.install(whole, now)
	} else {
		s.installChanges(changes, v, now)
	}
	s.mu.Lock()
	s.catalogRev = rev
	s.mu.Unlock()
	s.emit(Event{Kind: CatalogApplied, Count: int(rev), At: s.cfg.Clock.Now()})
	if whole != nil || s.assigned.out == nil {
		s.applyView(v)
	}
}

// dropIfRemoved forgets a slot of a removed job once nothing refers to it.
func (s *Scheduler) dropIfRemoved(sl *slot) {
	if sl.removed && sl.phase == idle && len(sl.runs) == 0 {
		delete(s.slots, sl.id)
		s.slotDropped(sl.id)
	}
}
