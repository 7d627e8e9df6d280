package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
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

	Notified     EventKind = "notified"      // a notification of an execution of Slot was delivered
	NotifyFailed EventKind = "notify-failed" // one was not (Reason says why)
	// CatalogApplied: the loop runs a new catalog, revision Count.
	CatalogApplied EventKind = "catalog-applied"
	// Forgotten: the catalog no longer has Slot.Job, and the last of its
	// slots here was dropped: no event of the job follows, but a
	// notification still being delivered (forget.go).
	Forgotten EventKind = "forgotten"
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

// slotSpan starts a span of the slot's life on this member (acquisition,
// fence raise, resign), named "kira.<what> <job>".
func (s *Scheduler) slotSpan(ctx context.Context, what string, id shard.Slot, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	attrs = append(attrs, attribute.String("kira.job", id.Job), attribute.Int("kira.partition", id.Partition), attribute.String("kira.member", s.member.ID()))
	return s.cfg.Tracer.Start(ctx, "kira."+what+" "+id.Job, trace.WithAttributes(attrs...))
}

// endSlotSpan ends a slot span, recording err if any.
func endSlotSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(attribute.String("error.type", fmt.Sprintf("%T", err)))
	}
	span.End()
}
