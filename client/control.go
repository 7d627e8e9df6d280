package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/kira-scheduler/kira/api"
)

// TriggerOptions say which runs Trigger asks for; the zero value is one
// run now of each of the job's slots.
type TriggerOptions struct {
	// Partition, if set, runs that partition only (Partition(n)).
	Partition *int
	// At, if set, runs at that time (in the future) instead of now; In,
	// if set, runs that long from now. Not both.
	At time.Time
	In time.Duration
	// Cascade runs the job's dependents (after:) after it; it runs every
	// partition now, so neither Partition nor At nor In.
	Cascade bool
}

// Trigger asks for one run of each slot of the job, or of one partition,
// now or at a time (POST /v1/jobs/{job}/trigger); the answer names each
// run's execution id. It is not sent again: an error may mean it applied.
func (c *Client) Trigger(ctx context.Context, job string, opt TriggerOptions) (*api.Triggered, error) {
	v := url.Values{}
	if opt.Partition != nil {
		v.Set("partition", strconv.Itoa(*opt.Partition))
	}
	if !opt.At.IsZero() && opt.In != 0 {
		return nil, fmt.Errorf("client: Trigger %s: At and In both set: keep one", job)
	}
	if !opt.At.IsZero() {
		v.Set("at", opt.At.Format(time.RFC3339Nano))
	}
	if opt.In != 0 {
		v.Set("in", opt.In.String())
	}
	if opt.Cascade {
		v.Set("cascade", "true")
	}
	return call[*api.Triggered](ctx, c, http.MethodPost, jobPath(job, "trigger"), v, nil)
}

// CancelledRun answers CancelRun: the run that will not run.
type CancelledRun struct {
	WaitingRun
	Cancelled bool `json:"cancelled"`
}

// CancelRun cancels the job's waiting run id, the execution id Trigger
// answered (DELETE /v1/jobs/{job}/trigger/{id}): a 409 (IsConflict) if it
// is not waiting any more (it started or ran, or was cancelled), never
// both cancelled and run.
func (c *Client) CancelRun(ctx context.Context, job, id string) (*CancelledRun, error) {
	return call[*CancelledRun](ctx, c, http.MethodDelete, jobPath(job, "trigger", id), nil, nil)
}

// Pause stops the job's scheduled fires on every member
// (POST /v1/jobs/{job}/pause).
func (c *Client) Pause(ctx context.Context, job string) (*api.JobState, error) {
	return call[*api.JobState](ctx, c, http.MethodPost, jobPath(job, "pause"), nil, nil)
}

// Resume lets the job's scheduled fires start again
// (POST /v1/jobs/{job}/resume).
func (c *Client) Resume(ctx context.Context, job string) (*api.JobState, error) {
	return call[*api.JobState](ctx, c, http.MethodPost, jobPath(job, "resume"), nil, nil)
}
