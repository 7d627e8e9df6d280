package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// TimelineQuery selects what Timeline reads; the zero value is the API's
// defaults: the last 15 minutes in 60 buckets, every job, the first 100
// rows.
type TimelineQuery struct {
	// Since is the window, up to now: 1m to 24h.
	Since time.Duration
	// Bucket is the width of an aggregated job's buckets, 1s to Since.
	Bucket time.Duration
	// Job, if set, answers that job's slots as the rows.
	Job string
	// Offset and Limit page the rows (jobs, or a job's slots); Limit is
	// 1 to 1000.
	Offset, Limit int
}

// Timeline is the executions and holders over a window
// (GET /v1/timeline): a job of at most 16 partitions, or the one the
// query names, has its slots in detail, any other its Buckets.
type Timeline struct {
	Cluster  string    `json:"cluster"`
	Revision int64     `json:"revision"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	// BucketSeconds is the width of the Buckets.
	BucketSeconds float64 `json:"bucket_seconds"`
	// Members names the live members by id.
	Members map[string]string `json:"members"`
	// Rows is how many rows there are in all; Jobs holds those from Offset on.
	Rows   int           `json:"rows"`
	Offset int           `json:"offset"`
	Jobs   []JobTimeline `json:"jobs"`
}

// JobTimeline is one job of a Timeline.
type JobTimeline struct {
	Job        string `json:"job"`
	Schedule   string `json:"schedule"`
	Partitions int    `json:"partitions"`
	Paused     bool   `json:"paused"`
	// Detail says whether Slots lists the job's slots; else Buckets sums them.
	Detail  bool           `json:"detail"`
	Slots   []SlotTimeline `json:"slots"`
	Buckets []Bucket       `json:"buckets"`
	// Led counts the slots answered that have a leader now.
	Led int `json:"led"`
}

// SlotTimeline is one slot: its executions, oldest first, the holders its
// records show, and who holds it now.
type SlotTimeline struct {
	Partition  int                 `json:"partition"`
	Owner      string              `json:"owner"`
	Token      int64               `json:"token"`
	Executions []TimelineExecution `json:"executions"`
	Holders    []Holding           `json:"holders"`
}

// TimelineExecution is one history record as the timeline shows it.
type TimelineExecution struct {
	ID        string    `json:"id"`
	Attempt   int       `json:"attempt"`
	Trigger   string    `json:"trigger"`
	Member    string    `json:"member"`
	Token     int64     `json:"token"`
	Scheduled time.Time `json:"scheduled"`
	// Started is nil for a fire that did not run (skipped, missed).
	Started *time.Time `json:"started"`
	// DurationMS and LatenessMS are 0 when it did not start.
	DurationMS int64  `json:"duration_ms"`
	LatenessMS int64  `json:"lateness_ms"`
	Outcome    string `json:"outcome"`
	ExitCode   *int   `json:"exit_code"`
	HTTPStatus *int   `json:"http_status"`
	Repeats    int    `json:"repeats"`
	TraceID    string `json:"trace_id"`
}

// Holding is a stretch of time a slot's records show one holder acting.
type Holding struct {
	Member string    `json:"member"`
	Token  int64     `json:"token"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
}

// Bucket sums an aggregated job's slots over one time bucket.
type Bucket struct {
	Start time.Time `json:"start"`
	// Outcomes counts the fires scheduled in the bucket by outcome.
	Outcomes      map[string]int `json:"outcomes"`
	MaxLatenessMS int64          `json:"max_lateness_ms"`
	HolderChanges int            `json:"holder_changes"`
}

// Timeline reads the executions and holders of the window q asks for
// (GET /v1/timeline).
func (c *Client) Timeline(ctx context.Context, q TimelineQuery) (*Timeline, error) {
	v := url.Values{}
	if q.Since != 0 {
		v.Set("since", q.Since.String())
	}
	if q.Bucket != 0 {
		v.Set("bucket", q.Bucket.String())
	}
	if q.Job != "" {
		v.Set("job", q.Job)
	}
	if q.Offset != 0 {
		v.Set("offset", strconv.Itoa(q.Offset))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return call[*Timeline](ctx, c, http.MethodGet, "/v1/timeline", v, nil)
}
