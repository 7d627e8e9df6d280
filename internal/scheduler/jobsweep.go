package scheduler

import (
	"context"
	"sync"
	"time"

	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/sweep"
)

// Who sweeps a deleted job's keys, and when. One member sweeps: the first
// of the latest view (its ids sorted), so the cluster sends etcd one sweep
// of each job, not one per member; two members that briefly both think
// they are first sweep the same keys under the same guards. The loop hands
// the sweeper every job the catalog removes or creates again under a name
// it had (jobSweeps); the sweeper tries each at once, and while a slot of
// the job is still held (its holder releasing it after its runs, or a
// member paused) again after a pause that doubles up to sweepRetryMax. It
// also looks through etcd for keys of jobs the catalog lacks (sweep.Scan)
// every Config.JobSweep: a job deleted while no member ran, or whose
// sweeper left before it swept, or a slot that a member behind on the
// catalog wrote after the sweep.
// The guards are package sweep's. Held by TestADeletedJobsKeysAreSwept and
// TestAChurnOfJobsLeavesEtcdFlat.

// DefaultJobSweep is how often the sweeper looks through etcd for keys of
// jobs the catalog lacks.
const DefaultJobSweep = 10 * time.Minute

// sweepRetry and sweepRetryMax pace the sweeps of a job whose slots are
// still held.
const (
	sweepRetry    = 250 * time.Millisecond
	sweepRetryMax = 30 * time.Second
)

// sweepTimeout bounds one sweep of a job, or one scan.
const sweepTimeout = 30 * time.Second

// jobSweeps is what the loop hands the sweeper (sweepJobs): the jobs to
// sweep, and whether this member sweeps, by the latest view.
type jobSweeps struct {
	mu      sync.Mutex
	jobs    map[string]bool
	sweeper bool
	bell    chan struct{} // capacity one
}

func newJobSweeps() *jobSweeps {
	return &jobSweeps{jobs: map[string]bool{}, bell: make(chan struct{}, 1)}
}

// add hands job to the sweeper: the catalog removed it, or created it
// again.
func (j *jobSweeps) add(job string) {
	j.mu.Lock()
	j.jobs[job] = true
	j.mu.Unlock()
	ringBell(j.bell)
}

// viewApplied says whether this member, me, sweeps under view v.
func (j *jobSweeps) viewApplied(v member.View, me string) {
	first := len(v.Members) > 0 && v.Members[0] == me
	j.mu.Lock()
	changed := j.sweeper != first
	j.sweeper = first
	j.mu.Unlock()
	if changed {
		ringBell(j.bell)
	}
}

// take returns the jobs handed over since the last take, and whether this
// member sweeps.
func (j *jobSweeps) take() (jobs []string, sweeper bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for job := range j.jobs {
		jobs = append(jobs, job)
	}
	clear(j.jobs)
	return jobs, j.sweeper
}

// pendingSweep is a job the sweeper will try again: when, and after what
// pause the next time.
type pendingSweep struct {
	at    time.Time
	pause time.Duration
}

// sweepJobs sweeps the jobs the loop hands over, and those a scan finds,
// while this member is the sweeper; it stops with ctx.
func (s *Scheduler) sweepJobs(ctx context.Context) {
	defer s.wg.Done()
	scan := time.NewTicker(s.cfg.JobSweep)
	defer scan.Stop()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	pending := map[string]*pendingSweep{}
	scanDue := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.sweeps.bell:
		case <-scan.C:
			scanDue = true
		case <-retry.C:
		}
		jobs, sweeper := s.sweeps.take()
		if !sweeper {
			clear(pending) // the sweeper's, whose scan finds them
			scanDue = false
			continue
		}
		if scanDue {
			jobs = append(jobs, s.scanJobs(ctx)...)
			scanDue = false
		}
		now := time.Now()
		for _, job := range jobs {
			pending[job] = &pendingSweep{at: now, pause: sweepRetry}
		}
		retry.Reset(s.sweepDue(ctx, pending))
	}
}

// scanJobs lists the jobs whose keys a scan finds to sweep.
func (s *Scheduler) scanJobs(ctx context.Context) []string {
	ctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	defer cancel()
	jobs, err := sweep.Scan(ctx, s.cli, s.member.Cluster(), s.liveJob)
	if err != nil && ctx.Err() == nil {
		s.cfg.Logger.Debug("could not look for the keys of deleted jobs", "err", err)
	}
	return jobs
}

// liveJob is the create revision of job in the catalog the loop runs.
func (s *Scheduler) liveJob(job string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.installed[job]
	if !ok {
		return 0, false
	}
	return j.spec.CreateRevision, true
}

// sweepDue sweeps the pending jobs whose time has come, and returns how
// long until the next one's.
func (s *Scheduler) sweepDue(ctx context.Context, pending map[string]*pendingSweep) time.Duration {
	next := time.Hour
	for job, p := range pending {
		if wait := time.Until(p.at); wait > 0 {
			next = min(next, wait)
			continue
		}
		if s.sweepJob(ctx, job) {
			delete(pending, job)
			continue
		}
		next = min(next, p.pause)
		p.at, p.pause = time.Now().Add(p.pause), min(2*p.pause, sweepRetryMax)
	}
	return next
}

// sweepJob sweeps job once, and reports whether it is done with: swept,
// nothing left, or a catalog whose jobs' creation is unknown.
func (s *Scheduler) sweepJob(ctx context.Context, job string) bool {
	ctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	defer cancel()
	plan, o, err := sweep.Job(ctx, s.cli, s.member.Cluster(), job)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			s.cfg.Logger.Debug("could not sweep the keys of a deleted job; trying again", "job", job, "err", err)
		}
		return false
	case o == sweep.Swept && plan.Keys < 0:
		s.cfg.Logger.Info("deleted the keys of a deleted job", "job", job)
	case o == sweep.Swept:
		s.cfg.Logger.Info("deleted the keys a job created again had from before", "job", job, "keys", plan.Keys)
	}
	return o != sweep.Held && o != sweep.Moved
}
