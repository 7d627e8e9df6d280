package scheduler

import (
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/history"
	"github.com/kira-scheduler/kira/jobs"
	"github.com/kira-scheduler/kira/shard"
)

// EventKind names what happened to a slot on this member.
type EventKind string

const (
	Acquired EventKind = "acquired" // won the slot's election with Token; Execution names the job's partitions
	Raised   EventKind = "raised"   // fences raised for Token (fence_url, OnAcquire); fires may start
	Released EventKind = "released" // gave the slot up: not preferred any more, or stopping
	Lost     EventKind = "lost"     // the slot's key vanished behind our back, or the session ended
	Started  EventKind = "started"  // an execution started
	Finished EventKind = "finished" // an execution ended with Result
	Skipped  EventKind = "skipped"  // a fire was not started (Reason says why)
	Queued   EventKind = "queued"   // a fire waits for the running one (overlap: queue, or a retry)
	Paused   EventKind = "paused"   // this member learned that Slot.Job is paused
	Resumed  EventKind = "resumed"  // this member learned that Slot.Job is resumed
	// CatalogApplied: the loop runs a new catalog, revision Count.
	CatalogApplied EventKind = "catalog-applied"
)

// Event is a typed signal for observers: metrics, logs and tests, which wait
// on events rather than sleeping.
type Event struct {
	Kind      EventKind
	Member    string
	Slot      shard.Slot
	Token     fencing.Token
	Execution jobs.Execution // Started, Finished, Skipped; Acquired: job, partition and partitions only
	Result    jobs.Result    // Finished
	Reason    string         // Skipped, Released, Lost
	Cause     history.Cause  // Started, Finished: why the execution ran
	Attempt   int            // Started, Finished
	Count     int            // Skipped: how many fires, when more than one; CatalogApplied: the revision
	// Policy (Skipped) names what let missed fires go unrun: the job's
	// misfire policy, or catchup_window; empty for other skips.
	Policy string
	// TraceID (Started, Finished) is the execution's trace, when traced.
	TraceID string
	// StartedAt (Finished) is when the executor was called, after the start
	// was recorded; zero if it never was.
	StartedAt time.Time
	At        time.Time
}
