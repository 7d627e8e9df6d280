package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/shard"
)

// oneOffTime is the time POST /v1/jobs/{job}/trigger asks its runs for:
// ?at=RFC 3339 with a zone, or ?in=a duration; zero for now.
func oneOffTime(r *http.Request, now time.Time) (time.Time, error) {
	at, in := r.URL.Query().Get("at"), r.URL.Query().Get("in")
	switch {
	case at != "" && in != "":
		return time.Time{}, errorf(http.StatusBadRequest, "at and in both set: keep one")
	case at != "":
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return time.Time{}, errorf(http.StatusBadRequest, "at=%q: want RFC 3339 with a zone, such as 2027-01-01T09:00:00Z", at)
		}
		if !t.After(now) {
			return time.Time{}, errorf(http.StatusBadRequest, "at=%s is not in the future (now %s): leave at out to run now", at, now.UTC().Format(time.RFC3339))
		}
		return t, nil
	case in != "":
		d, err := time.ParseDuration(in)
		if err != nil || d <= 0 {
			return time.Time{}, errorf(http.StatusBadRequest, "in=%q: want a positive duration, such as 90s or 2h", in)
		}
		return now.Add(d), nil
	}
	return time.Time{}, nil
}

// requestRuns requests the runs of slots now, or at at when it is set.
func (s *server) requestRuns(ctx context.Context, slots []shard.Slot, at time.Time) ([]string, error) {
	if at.IsZero() {
		return ops.RequestRun(ctx, s.cfg.KV, s.cfg.Cluster, slots)
	}
	return ops.RequestRunAt(ctx, s.cfg.KV, s.cfg.Cluster, slots, at)
}

// Cancelled answers DELETE /v1/jobs/{job}/trigger/{id}.
type Cancelled struct {
	ops.WaitingRun
	Cancelled bool `json:"cancelled"`
}

// cancelRun cancels the job's waiting run {id}: 200 if it will not run,
// 409 if it is not waiting (it started or ran, was cancelled, or never
// existed), never both (ops.CancelRun); 404, with nothing cancelled,
// if it is another job's run (TestCancelThroughAnotherJobsPath).
func (s *server) cancelRun(ctx context.Context, r *http.Request) (any, error) {
	j, err := s.job(ctx, r)
	if err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	w, err := ops.CancelJobRun(ctx, s.cfg.KV, s.cfg.Cluster, j.Name, id)
	switch {
	case errors.Is(err, ops.ErrOtherJob):
		return nil, errorf(http.StatusNotFound, "run %s is of job %s, not %s: nothing cancelled", id, w.Job, j.Name)
	case errors.Is(err, ops.ErrNotWaiting):
		if rec, ok, rerr := ops.FindRun(ctx, s.cfg.KV, s.cfg.Cluster, j.Name, id); rerr == nil && ok {
			return nil, errorf(http.StatusConflict, "not cancelled: run %s already ran: %s, started %s", id, rec.Outcome, rec.StartedAt.UTC().Format(time.RFC3339))
		}
		return nil, errorf(http.StatusConflict, "not cancelled: %v", err)
	case err != nil:
		return nil, err
	}
	return Cancelled{WaitingRun: w, Cancelled: true}, nil
}
