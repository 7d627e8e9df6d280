package scheduler

import (
	"testing"
	"time"

	"github.com/kira-scheduler/kira/kiratest"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/etcdtest"
	"github.com/kira-scheduler/kira/jobs"
	"github.com/kira-scheduler/kira/shard"
)

func TestCatalogConvergesWithoutRestart(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := NewManualClock(t0)
	g := newGate()
	old := withDefaults(config.Job{Name: "old", Schedule: "@every 10s", Handler: "block"})
	kept := withDefaults(config.Job{Name: "kept", Schedule: "@every 10s", Handler: "noop"})
	cat := catalog("converge", old, kept)
	rec := newRecorder()
	h := jobs.Handlers{"block": g.handler, "noop": noop}
	n := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock})
	waitKind(t, rec, "both ready", 2, func(e Event) bool { return e.Kind == Raised })
	clock.Advance(10 * time.Second) // 12:00:10: old starts and blocks, kept runs
	waitKind(t, rec, "old running", 1, func(e Event) bool { return e.Kind == Started && e.Slot.Job == "old" })
	kiratest.Receive(t, g.entered, 10*time.Second, "g.entered")

	// v2: old removed, kept every 30s instead of 10s, added new.
	kept2 := kept
	kept2.Schedule = "@every 30s"
	added := withDefaults(config.Job{Name: "added", Schedule: "@every 10s", Handler: "noop"})
	if err := n.sched.SetCatalog(catalog("converge", kept2, added), 42); err != nil {
		t.Fatal(err)
	}
	waitKind(t, rec, "the new catalog applied", 1, func(e Event) bool { return e.Kind == CatalogApplied && e.Count == 42 })
	waitKind(t, rec, "added acquired", 1, func(e Event) bool { return e.Kind == Raised && e.Slot.Job == "added" })
	if _, still := n.sched.Leading()[shard.Slot{Job: "old"}]; !still {
		t.Fatal("the removed job was released before its in-flight run ended")
	}
	g.open()
	waitKind(t, rec, "old released after its run", 1, func(e Event) bool { return e.Kind == Released && e.Slot.Job == "old" })
	clock.Advance(10 * time.Second) // 12:00:20: added fires; kept (now every 30s) does not
	waitKind(t, rec, "added fires", 1, func(e Event) bool { return e.Kind == Started && e.Slot.Job == "added" })
	clock.Advance(10 * time.Second) // 12:00:30: both fire
	evs := waitKind(t, rec, "kept fires on its new schedule", 2, func(e Event) bool { return e.Kind == Started && e.Slot.Job == "kept" })
	var keptRuns []time.Time
	for _, e := range evs {
		if e.Kind == Started && e.Slot.Job == "kept" {
			keptRuns = append(keptRuns, e.Execution.ScheduledTime)
		}
		if e.Kind == Started && e.Slot.Job == "old" && e.Execution.ScheduledTime.After(sec(10)) {
			t.Fatalf("removed job fired at %v", e.Execution.ScheduledTime)
		}
	}
	if len(keptRuns) != 2 || !keptRuns[1].Equal(sec(30)) {
		t.Fatalf("kept ran at %v; want 12:00:10, then 12:00:30 on the new schedule", keptRuns)
	}
	if n.sched.CatalogRevision() != 42 {
		t.Fatalf("catalog revision %d", n.sched.CatalogRevision())
	}
	if err := n.sched.SetCatalog(catalog("converge", withDefaults(config.Job{Name: "x", Schedule: "@hourly", Handler: "unregistered"})), 43); err == nil {
		t.Fatal("a catalog naming an unregistered handler was accepted")
	}
}
