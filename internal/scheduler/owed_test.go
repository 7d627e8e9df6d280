package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
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

// A fire a new holder took on (here: late, not missed, behind the retry of
// the fire its predecessor left unfinished) and had not started when it
// was lost runs on the holder after it, though by then it is missed by the
// policy's measure: the takeover's own write names it owed. Before, whether
// it ran depended on how fast the slot changed hands twice.
func TestAFireOwedByAHolderLostBeforeItStartedRunsOnTheNext(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	clk := clock.NewManual(t0)
	cat := catalog("lostowed", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "block", Misfire: config.MisfireSkip}))
	rec := newRecorder()
	g := newGate()
	h := jobs.Handlers{"block": g.handler}
	crash := func(n *node) {
		if _, err := cli.Revoke(context.Background(), n.member.Lease()); err != nil {
			t.Fatal(err)
		}
		n.done <- kiratest.Receive(t, n.done, 30*time.Second, "the crashed member's scheduler to give up") // leave it for its cleanup
	}
	a := startNode(t, cli, cat, rec, h, nodeOpts{manual: clk})
	waitKind(t, rec, "a ready", 1, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
	clk.Advance(10 * time.Second)
	waitKind(t, rec, "a started 12:00:10", 1, func(e Event) bool { return e.Kind == Started && e.Member == a.id })
	g.waitEntered(t, "a's run")
	crash(a)
	clk.Advance(19700 * time.Millisecond) // 12:00:30 is 200 ms late: b runs it after the retry
	b := startNode(t, cli, cat, rec, h, nodeOpts{manual: clk})
	waitKind(t, rec, "b retries 12:00:10", 1, func(e Event) bool { return e.Kind == Started && e.Member == b.id && e.Cause == history.CauseRetry })
	g.waitEntered(t, "b's retry")
	crash(b)
	clk.Advance(5 * time.Second) // by the skip policy's measure, 12:00:30 is missed now
	c := startNode(t, cli, cat, rec, h, nodeOpts{manual: clk})
	g.open()
	evs := waitKind(t, rec, "c runs 12:00:30", 1, func(e Event) bool {
		return e.Kind == Finished && e.Member == c.id && e.Execution.ScheduledTime.Equal(sec(30))
	})
	if n := count(evs, func(e Event) bool { return e.Kind == Started && e.Execution.ScheduledTime.Equal(sec(30)) }); n != 1 {
		t.Fatalf("12:00:30 started %d times; want once", n)
	}
	if n := count(evs, func(e Event) bool { return e.Kind == Started && e.Execution.ScheduledTime.Equal(sec(20)) }); n != 0 {
		t.Fatalf("12:00:20, missed while nobody held the slot, started %d times; want none under skip", n)
	}
}
