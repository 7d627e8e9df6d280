package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/jobs"
)

// A fire its holder queued behind a run (overlap: queue) and had not
// started when it handed the slot over runs on the next holder, under
// fire-once and skip too: a handover changes nothing of what runs, however
// late the queue made the fire, and however many fires fell due before the
// next holder took over (SlotState.Owed). Before, the next holder took it
// for a missed fire, and fire-once ran only the latest; the chaos suite
// saw it when a backlog after a fault outlived the fault's window.
func TestAFireQueuedAtAHandoverRunsOnTheNextHolder(t *testing.T) {
	for _, policy := range []config.Misfire{config.MisfireFireOnce, config.MisfireSkip} {
		t.Run(string(policy), func(t *testing.T) {
			cli := etcdtest.Start(t).Client(t)
			clk := clock.NewManual(t0)
			cat := catalog("owed", config.Job{Name: "q", Schedule: "@every 10s", Handler: "work", MaxRunning: 1,
				Overlap: config.OverlapQueue, Misfire: policy, CatchupWindow: time.Minute})
			release := make(chan struct{})
			work := func(ctx context.Context) error {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil
			}
			rec := newRecorder()
			h := jobs.Handlers{"work": work}
			a := startNode(t, cli, cat, rec, h, nodeOpts{manual: clk})
			waitKind(t, rec, "a ready", 1, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
			running := advance(t, rec, clk, 10*time.Second)
			queued := advance(t, rec, clk, 10*time.Second)
			later := advance(t, rec, clk, 10*time.Second)
			if running.Kind != Started || queued.Kind != Queued || later.Kind != Skipped {
				t.Fatalf("a's fires: %s, %s, %s; want started, queued, skipped", running.Kind, queued.Kind, later.Kind)
			}
			b := startNode(t, cli, cat, rec, h, nodeOpts{manual: clk})
			stopped := make(chan error, 1)
			go func() { stopped <- a.stop() }()
			close(release)
			if err := kiratest.Receive(t, stopped, 30*time.Second, "a's stop"); err != nil {
				t.Fatal(err)
			}
			at := queued.Execution.ScheduledTime
			evs := waitKind(t, rec, "the queued fire to run on b", 1, func(e Event) bool {
				return e.Kind == Finished && e.Member == b.id && e.Execution.ScheduledTime.Equal(at)
			})
			ran := filter(evs, func(e Event) bool { return e.Kind == Started && e.Execution.ScheduledTime.Equal(at) })
			if len(ran) != 1 || ran[0].Execution.ID != jobs.ExecutionID("q", 0, at) {
				t.Fatalf("the queued fire started %d times (%+v); want once, under its id", len(ran), ran)
			}
			if n := count(evs, func(e Event) bool {
				return e.Kind == Started && e.Execution.ScheduledTime.Equal(running.Execution.ScheduledTime)
			}); n != 1 {
				t.Fatalf("the fire that ran on a started %d times; want once", n)
			}
		})
	}
}
