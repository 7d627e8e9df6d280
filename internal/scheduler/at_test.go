package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
)

// A job with an @at schedule fires once, at its time, with the execution
// id of that time; then it has no next fire: the member neither fires it
// again nor spins (a manual run still goes through its loop), and a new
// holder does not run it again.
func TestAtJobFiresOnceAndNeverAgain(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	at := t0.Add(20 * time.Second).Truncate(time.Second)
	cat := catalog("at", withDefaults(config.Job{Name: "tick", Schedule: "@at " + at.Format(time.RFC3339), Handler: "noop"}))
	rec := newRecorder()
	first := startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	clock.Advance(10 * time.Second)
	seenControl(t, cli, rec, "at")
	if n := len(started(rec.all(), "")); n != 0 {
		t.Fatalf("%d runs before the @at time", n)
	}
	clock.Advance(10 * time.Second)
	evs := waitKind(t, rec, "the @at fire", 1, func(e Event) bool { return e.Kind == Finished })
	if s := started(evs, ""); len(s) != 1 || s[0].Cause != history.CauseSchedule || !s[0].Execution.ScheduledTime.Equal(at) ||
		s[0].Execution.ID != jobs.ExecutionID("tick", 0, at) {
		t.Fatalf("starts %+v; want the one fire at %s", s, at)
	}
	clock.Advance(5 * time.Minute) // within the manual lease's trust window
	ids, err := ops.RequestRun(context.Background(), cli, "at", []shard.Slot{{Job: "tick"}})
	if err != nil {
		t.Fatal(err)
	}
	waitKind(t, rec, "a manual run after the @at fire", 1, func(e Event) bool { return e.Kind == Finished && e.Execution.ID == ids[0] })
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock})
	waitKind(t, rec, "the second holder ready", 2, func(e Event) bool { return e.Kind == Raised })
	clock.Advance(5 * time.Minute)
	seenControl(t, cli, rec, "at")
	var scheduled int
	for _, e := range started(rec.all(), "") {
		if e.Cause != history.CauseManual {
			scheduled++
		}
	}
	if scheduled != 1 {
		t.Fatalf("the @at job fired %d times; want once", scheduled)
	}
}

// An @at fire whose time passed while no member held its slot runs once
// when a member takes the slot, late, under misfire fire-once; under skip
// it is recorded as missed.
func TestAtMissedWhileNobodyHeldTheSlot(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0.Add(30 * time.Second))
	at := t0.Add(10 * time.Second)
	spec := "@at " + at.Format(time.RFC3339Nano)
	cat := catalog("atmissed", withDefaults(config.Job{Name: "late", Schedule: spec, Handler: "noop", Misfire: config.MisfireFireOnce}),
		withDefaults(config.Job{Name: "gone", Schedule: spec, Handler: "noop", Misfire: config.MisfireSkip}))
	rec := newRecorder()
	startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock})
	evs := waitKind(t, rec, "the late @at fire", 1, func(e Event) bool { return e.Kind == Finished && e.Slot.Job == "late" })
	if s := started(evs, ""); len(s) != 1 || s[0].Slot.Job != "late" || s[0].Cause != history.CauseCatchup ||
		!s[0].Execution.ScheduledTime.Equal(at) || s[0].Execution.ID != jobs.ExecutionID("late", 0, at) {
		t.Fatalf("starts %+v; want late's @at fire once, as a catch-up", s)
	}
	waitUntil(t, "gone's missed record", 10*time.Second, func() bool {
		hist, err := ops.ReadHistory(context.Background(), cli, "atmissed", "gone", 0, 10)
		return err == nil && len(hist) == 1 && hist[0].Outcome == history.OutcomeMissed && hist[0].ScheduledTime.Equal(at)
	})
	clock.Advance(5 * time.Minute)
	seenControl(t, cli, rec, "atmissed")
	if s := started(rec.all(), ""); len(s) != 1 {
		t.Fatalf("%d starts; want late's one", len(s))
	}
}
