package client

import (
	"context"
	"net/http"
	"time"

	"github.com/kira-scheduler/kira/config"
)

// JobStatus is one job as an operator sees it (GET /v1/jobs).
type JobStatus struct {
	Name       string `json:"name"`
	Schedule   string `json:"schedule"`
	Timezone   string `json:"timezone"`
	Partitions int    `json:"partitions"`
	Paused     bool   `json:"paused"`
	SlotsLed   int    `json:"slots_led"`
	// Shares is how many slots each member leads.
	Shares []Share `json:"shares"`
	// Placement is the labels a member needs, key=value pairs ("" for
	// any member); EligibleMembers counts the live members with them.
	Placement       string `json:"placement"`
	EligibleMembers int    `json:"eligible_members"`
	// Manager is who writes the job (apply, file, api:<identity>,
	// cli:<name>), Revision the catalog revision of its last write.
	Manager  string `json:"manager"`
	Revision int64  `json:"revision"`
	// Labels are the job's labels:, or nil.
	Labels map[string]string `json:"labels"`
	// LastFire is the newest execution of any of its slots, or nil.
	LastFire *Fire `json:"last_fire"`
	// NextFire is the next scheduled time, or nil when the schedule ends.
	NextFire *time.Time `json:"next_fire"`
	// After names the jobs it runs after, Dependents those that run
	// after it; Waiting is where a dependent stands, or nil.
	After      []string `json:"after"`
	Dependents []string `json:"dependents"`
	Waiting    *Waiting `json:"waiting"`
}

// Fire is one execution as the job views show it.
type Fire struct {
	ScheduledTime time.Time `json:"scheduled_time"`
	Outcome       string    `json:"outcome"`
	Member        string    `json:"member"`
	ExecutionID   string    `json:"execution_id"`
}

// Waiting is where a dependent job stands: the oldest logical time of
// its upstreams after its own newest fire, and how many partitions of
// each upstream have not ended that fire.
type Waiting struct {
	LogicalTime time.Time      `json:"logical_time"`
	Upstreams   []UpstreamWait `json:"upstreams"`
}

// UpstreamWait is one upstream of a Waiting.
type UpstreamWait struct {
	Job        string `json:"job"`
	Partitions int    `json:"partitions"`
	Pending    int    `json:"pending"`
}

// JobDetail is one job with its spec and each of its slots
// (GET /v1/jobs/{job}). A reader without credentials sees the spec's
// secrets redacted (api.Redacted).
type JobDetail struct {
	JobStatus
	Spec  config.Job `json:"spec"`
	Slots []JobSlot  `json:"slots"`
	// Upcoming are the next scheduled times, in UTC.
	Upcoming []time.Time `json:"upcoming"`
	// WaitingRuns are the manual runs not started yet.
	WaitingRuns []WaitingRun `json:"waiting_runs"`
}

// JobSlot is one slot of a job.
type JobSlot struct {
	Partition int    `json:"partition"`
	Owner     string `json:"owner"`
	Token     int64  `json:"token"`
	LastFire  *Fire  `json:"last_fire"`
	// NextFire is the job's next scheduled time plus the slot's jitter;
	// nil when the schedule has ended.
	NextFire *time.Time `json:"next_fire"`
}

// WaitingRun is a manual run requested and not started yet.
type WaitingRun struct {
	ID        string `json:"id"` // its execution id
	Job       string `json:"job"`
	Partition int    `json:"partition"`
	// At is a one-off run's time; zero: as soon as the slot's holder sees it.
	At          time.Time `json:"at,omitzero"`
	RequestedAt time.Time `json:"requested_at"`
}

// Jobs reads every job of the stored catalog, with who leads its slots,
// its last fire and its next (GET /v1/jobs).
func (c *Client) Jobs(ctx context.Context) ([]JobStatus, error) {
	return call[[]JobStatus](ctx, c, http.MethodGet, "/v1/jobs", nil, nil)
}

// Job reads one job: its spec, each slot's owner, token and last fire,
// its next fires and waiting runs (GET /v1/jobs/{job}). No such job is a
// 404 (IsNotFound).
func (c *Client) Job(ctx context.Context, job string) (*JobDetail, error) {
	return call[*JobDetail](ctx, c, http.MethodGet, jobPath(job), nil, nil)
}
