package scheduler

import (
	"fmt"
	"reflect"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/jobs"
	"github.com/kira-scheduler/kira/membership"
	"github.com/kira-scheduler/kira/shard"
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
		if spec.Partitions < 1 {
			return nil, fmt.Errorf("scheduler: job %s has %d partitions; a catalog from config.Parse has at least 1", spec.Name, spec.Partitions)
		}
		if spec.HistoryLimit <= 0 { // a catalog built in code, not parsed
			spec.HistoryLimit = config.DefaultHistoryLimit
		}
		limit := cat.Limit(spec)
		if old, ok := before[spec.Name]; ok && old.limit == limit && reflect.DeepEqual(old.spec, spec) {
			out[spec.Name] = old
			continue
		}
		sched, err := spec.ParsedSchedule()
		if err != nil {
			return nil, fmt.Errorf("scheduler: job %s: %w", spec.Name, err)
		}
		ex, err := jobs.ForJob(spec, handlers)
		if err != nil {
			return nil, fmt.Errorf("scheduler: %w", err)
		}
		out[spec.Name] = &job{spec: spec, schedule: sched, executor: ex, fence: jobs.FenceForJob(spec), limit: limit}
	}
	return out, nil
}

// install makes prepared the set of jobs: new slots are created, slots of
// removed jobs (or partitions) are marked removed (released after their
// in-flight runs, then dropped), and slots of changed jobs take the new
// definition, a new schedule taking effect from its next fire after now.
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
		changed := sl.job != j && !reflect.DeepEqual(sl.job.spec, j.spec)
		sl.job, sl.removed = j, false
		if changed && j.spec.Dependent() {
			s.becameDependent(sl, now)
			continue
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
	for name, j := range prepared {
		for p := 0; p < j.spec.Partitions; p++ {
			id := shard.Slot{Job: name, Partition: p}
			if _, ok := s.slots[id]; !ok {
				s.slots[id] = &slot{id: id, job: j, heapIndex: -1}
			}
		}
	}
}

// SetCatalog makes the scheduler converge to cat, stored at revision rev,
// without a restart: added jobs start, removed jobs stop after their
// in-flight runs, changed jobs take effect at their next fire. A catalog
// whose jobs cannot be prepared (an unregistered handler) is refused whole.
func (s *Scheduler) SetCatalog(cat *config.Catalog, rev int64) error {
	prepared, err := prepareJobs(cat, s.cfg.Handlers, s.lastPrepared())
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.nextCatalog, s.nextCatalogRev = prepared, rev
	s.mu.Unlock()
	ringBell(s.catalogChanged)
	return nil
}

// lastPrepared is the set of jobs SetCatalog (or New) prepared last: the
// one waiting for the loop, else the one it runs.
func (s *Scheduler) lastPrepared() map[string]*job {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nextCatalog != nil {
		return s.nextCatalog
	}
	return s.installed
}

// catalogUpdated installs the catalog SetCatalog prepared, if any, and
// applies view v (the latest) to its slots.
func (s *Scheduler) catalogUpdated(v membership.View) {
	s.mu.Lock()
	prepared, rev := s.nextCatalog, s.nextCatalogRev
	s.nextCatalog = nil
	s.mu.Unlock()
	if prepared == nil {
		return
	}
	s.install(prepared, s.cfg.Clock.Now())
	s.mu.Lock()
	s.catalogRev = rev
	s.mu.Unlock()
	s.emit(Event{Kind: CatalogApplied, Count: int(rev), At: s.cfg.Clock.Now()})
	s.applyView(v)
}

// dropIfRemoved forgets a slot of a removed job once nothing refers to it.
func (s *Scheduler) dropIfRemoved(sl *slot) {
	if sl.removed && sl.stage == idle && len(sl.runs) == 0 {
		delete(s.slots, sl.id)
	}
}
