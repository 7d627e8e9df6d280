package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// RequestRunAt requests one run of each given slot at time at (a one-off
// run), by whichever member holds the slot then, and returns the execution
// ids the runs will have; each is also the id to cancel its run by
// (CancelRun). A time already past runs at once. The request is a key in
// etcd: it outlives every member, and a new holder reads it on takeover.
func RequestRunAt(ctx context.Context, kv clientv3.KV, cluster string, slots []shard.Slot, at time.Time) ([]string, error) {
	at = at.UTC()
	return requestRun(ctx, kv, cluster, slots, triggerRequest{RequestedAt: time.Now().UTC(), At: &at})
}

// WaitingRun is a manual run requested and not started yet.
type WaitingRun struct {
	ID          string    `json:"id"` // its execution id
	Job         string    `json:"job"`
	Partition   int       `json:"partition"`
	At          time.Time `json:"at,omitzero"` // a one-off run's time; zero: as soon as the slot's holder sees it
	RequestedAt time.Time `json:"requested_at"`
	key         string
	rev         int64
	started     int // the attempt its holder marked started; 0: waiting
}

// WaitingRuns returns the manual runs of job (every job when job is "")
// requested and not started, one-off runs included, by time.
func WaitingRuns(ctx context.Context, kv clientv3.KV, cluster, job string) ([]WaitingRun, error) {
	all, err := manualRuns(ctx, kv, cluster, job)
	out := []WaitingRun{}
	for _, w := range all {
		if w.started == 0 {
			out = append(out, w)
		}
	}
	return out, err
}

// manualRuns returns the manual run requests of job (every job when job
// is ""), started or not, by time.
func manualRuns(ctx context.Context, kv clientv3.KV, cluster, job string) ([]WaitingRun, error) {
	prefix := keyspace.Control(cluster)
	if job != "" {
		prefix += job + "/trigger/"
	}
	resp, err := kv.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := []WaitingRun{}
	for _, k := range resp.Kvs {
		ck, ok := keyspace.ParseControl(cluster, string(k.Key))
		if !ok || !ck.Trigger {
			continue
		}
		var req triggerRequest
		_ = json.Unmarshal(k.Value, &req) // junk still runs, now (see the scheduler's triggerFire)
		w := WaitingRun{ID: jobs.ManualExecutionID(ck.Job, ck.Partition, k.CreateRevision), Job: ck.Job, Partition: ck.Partition,
			RequestedAt: req.RequestedAt, key: string(k.Key), rev: k.CreateRevision, started: req.StartedAttempt}
		if req.At != nil {
			w.At = req.At.UTC()
		}
		out = append(out, w)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		return out[i].rev < out[j].rev
	})
	return out, nil
}

// ErrNotWaiting says a run to cancel is not waiting: it has started (and
// perhaps ended), was cancelled already, or never existed.
var ErrNotWaiting = errors.New("not waiting")

// CancelRun cancels the waiting manual run with execution id id, if it has
// not started, and returns it. The cancel deletes the run's key only if it
// is unmodified since its creation, in one transaction; a run's start
// marks the key (under its holder's fence) only if it still exists, so of
// a cancel and a start that race, exactly one wins: either the run is
// cancelled and never runs, or CancelRun returns ErrNotWaiting and the run
// has started. Held by TestCancelRacingTheStartHasOneAnswer.
func CancelRun(ctx context.Context, kv clientv3.KV, cluster, id string) (WaitingRun, error) {
	return CancelJobRun(ctx, kv, cluster, "", id)
}

// ErrOtherJob says a run to cancel is of another job than the one named.
var ErrOtherJob = errors.New("of another job")

// CancelJobRun is CancelRun for a run of job ("": of any job): a run of
// another job is left as it is, and the answer is that run with
// ErrOtherJob (TestCancelThroughAnotherJobsPath in package api).
func CancelJobRun(ctx context.Context, kv clientv3.KV, cluster, job, id string) (WaitingRun, error) {
	if !strings.HasPrefix(id, "manual-") {
		return WaitingRun{}, fmt.Errorf("%q is not the id of a manual run (manual-…): only those can be cancelled", id)
	}
	runs, err := manualRuns(ctx, kv, cluster, "")
	if err != nil {
		return WaitingRun{}, err
	}
	for _, w := range runs {
		if w.ID != id {
			continue
		}
		slot := shard.Slot{Job: w.Job, Partition: w.Partition}
		if job != "" && w.Job != job {
			return w, fmt.Errorf("run %s is of job %s, not %s: %w", id, w.Job, job, ErrOtherJob)
		}
		if w.started > 0 {
			return w, fmt.Errorf("run %s of %s: %w: it has started (attempt %d) and not ended", id, slot, ErrNotWaiting, w.started)
		}
		// Unmodified since its creation: not marked started by a holder.
		resp, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(w.key), "=", w.rev)).Then(clientv3.OpDelete(w.key)).Commit()
		if err != nil {
			return w, err
		}
		if !resp.Succeeded {
			return w, fmt.Errorf("run %s of %s: %w: it started just now", id, slot, ErrNotWaiting)
		}
		return w, nil
	}
	return WaitingRun{}, fmt.Errorf("run %s: %w: it has started or ended, was cancelled already, or never existed", id, ErrNotWaiting)
}

// FindRun returns the history record of execution id among job's records
// (any attempt; the newest), if there is one.
func FindRun(ctx context.Context, kv clientv3.KV, cluster, job, id string) (history.Record, bool, error) {
	recs, err := ReadHistoryWhere(ctx, kv, nil, cluster, job, -1, 1, func(r history.Record) bool { return r.ExecutionID == id })
	if err != nil || len(recs) == 0 {
		return history.Record{}, false, err
	}
	return recs[0], true, nil
}
