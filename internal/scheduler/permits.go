package scheduler

import (
	"context"
	"encoding/json"

	"github.com/kira-scheduler/kira/internal/permit"
	"github.com/kira-scheduler/kira/jobs"
)

// The fires of a job with a concurrency limit (config.Limit: max_running,
// or a pool) wait for a permit (package permit) between the write that
// records their start and the start itself: at most the limit's N of them
// run at once across the cluster, the others wait in the order they came,
// and the wait is in their lateness (the record's started_at), not in their
// timeout, which counts from the start (TestTimeoutCountsFromTheStartAfterTheWait). Such fires
// are not armed ahead: they start through the permit's wait, not at a gate.
// While a fire waits, its slot is busy as if it ran: the job's overlap
// policy applies to the fires that come meanwhile. A fire whose slot is
// lost, or whose member stops, while it waits ends cancelled without having
// run; its start stays recorded, so the slot's next holder runs it, under
// its execution id, as any unfinished fire. Only jobs with a limit pay for
// it: the put, the reads while waiting and the delete of their key
// (docs/benchmarks.md#concurrency-limits-etcd-cost).
// Held by TestMaxRunningAcrossMembers, TestPoolSharedByTwoJobs,
// TestPermitOfALostMemberIsFreed and
// TestWaitingFireOfAStoppedMemberRunsOnItsNextHolder.

// permitValue says whose a permit's key is, for a reader of etcd.
type permitValue struct {
	Execution string `json:"execution"`
	Member    string `json:"member"`
}

// awaitPermit waits for the run's permit, if its job has a limit, and
// checks again, once it holds one, that the run may start: its slot still
// held, the member not stopping, the lease trusted. If the run may not
// start, it says why in fr and returns false; the permit is then released.
// The caller releases the permit it returns once the run ended (Release is
// safe on nil).
func (r *run) awaitPermit(fr *finishedRun) (*permit.Permit, bool) {
	if !r.limit.Limited() {
		return nil, true
	}
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	stop := context.AfterFunc(r.s.stopWaiting, cancel) // a stopping member starts nothing new
	defer stop()
	value, _ := json.Marshal(permitValue{Execution: r.exec.ID, Member: r.exec.Member})
	pm, err := r.s.permits.Acquire(ctx, r.limit, string(value))
	switch {
	case err == nil && r.ctx.Err() == nil && r.s.member.TrustLeft() > 0 && r.s.stopWaiting.Err() == nil:
		return pm, true
	case err == nil && r.s.member.TrustLeft() <= 0:
		err = ErrUntrusted
	case r.ctx.Err() != nil:
		err = r.ctx.Err()
	case err == nil:
		err = context.Canceled
	}
	pm.Release()
	fr.res, fr.notStarted = jobs.Result{Outcome: jobs.Cancelled, Err: err}, true
	return nil, false
}
