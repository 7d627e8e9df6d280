package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/kira-scheduler/kira/fencing"
)

// Execution is one record of a job's history, as kira history -o json
// prints it: every field is always present.
type Execution struct {
	Job           string        `json:"job"`
	Partition     int           `json:"partition"`
	ExecutionID   string        `json:"execution_id"`
	Member        string        `json:"member"`
	Token         fencing.Token `json:"token"`
	ScheduledTime time.Time     `json:"scheduled_time"`
	StartedAt     time.Time     `json:"started_at"`
	FinishedAt    time.Time     `json:"finished_at"`
	// Outcome is succeeded, failed, timed_out, cancelled, fenced, skipped,
	// missed or reset.
	Outcome string `json:"outcome"`
	Attempt int    `json:"attempt"`
	// Trigger is why it ran: schedule, catchup, manual or retry.
	Trigger    string `json:"trigger"`
	OutputTail string `json:"output_tail"`
	Error      string `json:"error"`
	// ExitCode is a command job's exit code, HTTPStatus an HTTP job's
	// answer; nil otherwise.
	ExitCode   *int `json:"exit_code"`
	HTTPStatus *int `json:"http_status"`
	// Repeats counts the further fires, up to LastScheduledTime, that a
	// skip record stands for; 0 and nil for every other record.
	Repeats           int        `json:"repeats"`
	LastScheduledTime *time.Time `json:"last_scheduled_time"`
	// TraceID is the execution's OpenTelemetry trace id, or "".
	TraceID string `json:"trace_id"`
}

// ExecutionsQuery selects the records Executions reads; the zero value is
// the newest 20 of every partition.
type ExecutionsQuery struct {
	// Partition, if set, reads that partition's only (Partition(n)).
	Partition *int
	// Limit is how many records, 1 to 10000; 0 is the API's default (20).
	Limit int
	// Outcome, if set, keeps the records that ended so.
	Outcome string
}

// Partition is a pointer to n, for ExecutionsQuery and TriggerOptions.
func Partition(n int) *int { return &n }

// Executions reads the job's recent executions, newest first
// (GET /v1/jobs/{job}/executions).
func (c *Client) Executions(ctx context.Context, job string, q ExecutionsQuery) ([]Execution, error) {
	v := url.Values{}
	if q.Partition != nil {
		v.Set("partition", strconv.Itoa(*q.Partition))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Outcome != "" {
		v.Set("outcome", q.Outcome)
	}
	return call[[]Execution](ctx, c, http.MethodGet, jobPath(job, "executions"), v, nil)
}

// Execution reads one execution of the job by its id, while its slot's
// history keeps it (GET /v1/jobs/{job}/executions/{id}); else a 404.
func (c *Client) Execution(ctx context.Context, job, id string) (*Execution, error) {
	return call[*Execution](ctx, c, http.MethodGet, jobPath(job, "executions", id), nil, nil)
}
