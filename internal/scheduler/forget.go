package scheduler

import (
	"github.com/kira-scheduler/kira/internal/shard"
)

// What a member keeps of a job the catalog removed: its slots, each until
// it is released after its runs and dropped (dropIfRemoved), and then
// nothing by the job's name. The loop counts the slots still here of each
// removed job (loopState.leaving) and emits Forgotten when the last goes,
// so that observers that keep something by job (the metrics' series of
// cmd/kira) drop it too; it hands the job to the sweeper of its keys
// (jobsweep.go) at once. Held by TestAChurnOfJobsLeavesEtcdFlat.

// jobRemoved notes that the catalog removed job, of which slots are still
// here (after those dropped at once).
func (s *Scheduler) jobRemoved(job string, slots int) {
	s.sweeps.add(job)
	if slots == 0 {
		delete(s.leaving, job)
		s.forgotten(job)
		return
	}
	s.leaving[job] = slots
}

// jobBack notes that the catalog has job again: its slots are its own.
func (s *Scheduler) jobBack(job string) { delete(s.leaving, job) }

// slotDropped counts a dropped slot of a removed job.
func (s *Scheduler) slotDropped(id shard.Slot) {
	n, ok := s.leaving[id.Job]
	switch {
	case !ok:
	case n <= 1:
		delete(s.leaving, id.Job)
		s.forgotten(id.Job)
	default:
		s.leaving[id.Job] = n - 1
	}
}

func (s *Scheduler) forgotten(job string) {
	s.emit(Event{Kind: Forgotten, Slot: shard.Slot{Job: job}, At: s.cfg.Clock.Now()})
}

// slotsOf counts the slots of job here, of partitions.
func (s *Scheduler) slotsOf(job string, partitions int) int {
	n := 0
	for p := range partitions {
		if _, ok := s.slots[shard.Slot{Job: job, Partition: p}]; ok {
			n++
		}
	}
	return n
}

// jobsRemoved notes the jobs a whole catalog, prepared, removed (gone: the
// slots of each), and that those it has again are back.
func (s *Scheduler) jobsRemoved(gone map[string]int, prepared map[string]*job) {
	for job, n := range gone {
		s.jobRemoved(job, n)
	}
	for job := range s.leaving {
		if prepared[job] != nil {
			s.jobBack(job)
		}
	}
}

// recreated reports whether next is a job created again under the name of
// prev, which was deleted: its create revision is newer. A job whose
// creation was unknown (0) is not.
func recreated(prev, next *job) bool {
	return prev.spec.CreateRevision != 0 && next.spec.CreateRevision > prev.spec.CreateRevision
}
