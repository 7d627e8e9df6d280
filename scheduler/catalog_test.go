package scheduler

import (
	"slices"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/kiratest"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/etcdtest"
	"github.com/kira-scheduler/kira/jobs"
	"github.com/kira-scheduler/kira/membership"
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

// A new catalog keeps the preparation of every job whose definition and
// limit are unchanged, and prepares again the job whose schedule changed
// and the job whose pool's size changed. The loop then installs the new
// schedule. The test plays the loop.
func TestUnchangedJobsKeepTheirPreparation(t *testing.T) {
	cat := catalog("keep",
		config.Job{Name: "same", Schedule: "@daily", Handler: "noop"},
		config.Job{Name: "edited", Schedule: "@daily", Handler: "noop"},
		config.Job{Name: "pooled", Schedule: "@daily", Handler: "noop", Pool: "p"})
	cat.Pools = map[string]int{"p": 1}
	s, _ := unrunScheduler(t, cat)
	before := s.lastPrepared()
	next := *cat
	next.Jobs = slices.Clone(cat.Jobs)
	next.Jobs[1].Schedule = "@hourly"
	next.Pools = map[string]int{"p": 2}
	if err := s.SetCatalog(&next, 2); err != nil {
		t.Fatal(err)
	}
	after := s.lastPrepared()
	if after["same"] != before["same"] {
		t.Fatal("the unchanged job was prepared again")
	}
	if after["edited"] == before["edited"] || after["edited"].spec.Schedule != "@hourly" {
		t.Fatalf("the edited job kept its preparation: schedule %q", after["edited"].spec.Schedule)
	}
	if after["pooled"] == before["pooled"] || after["pooled"].limit.N != 2 {
		t.Fatalf("the job whose pool grew kept its preparation: limit %+v", after["pooled"].limit)
	}
	s.catalogUpdated(s.views.Latest())
	if got := s.slots[shard.Slot{Job: "edited"}].job.spec.Schedule; got != "@hourly" {
		t.Fatalf("the slot of the edited job runs schedule %q; want @hourly", got)
	}
}

// The loop keeps its last assignment while every job's partitions and
// admitted members are unchanged (a schedule edited, the same view again),
// and computes a new one when a job's partitions or the view's members
// change; each answer is shard.Assign's for the input. The test plays the
// loop.
func TestAssignmentKeptWhenItsInputIsUnchanged(t *testing.T) {
	cat := catalog("assigned",
		config.Job{Name: "a", Schedule: "@daily", Handler: "noop", Partitions: 6},
		config.Job{Name: "b", Schedule: "@daily", Handler: "noop"})
	s, _ := unrunScheduler(t, cat)
	three := membership.View{Revision: 1, Members: []string{"m-a", "m-b", "m-c"}} // not this member: nothing campaigns
	first, err := s.assign(three)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := s.assign(three); again != first {
		t.Fatal("the same view and catalog computed a new assignment")
	}
	edited := *cat
	edited.Jobs = slices.Clone(cat.Jobs)
	edited.Jobs[1].Schedule = "@hourly"
	if err := s.SetCatalog(&edited, 2); err != nil {
		t.Fatal(err)
	}
	s.catalogUpdated(three)
	if s.assigned.out != first {
		t.Fatal("a schedule edited computed a new assignment")
	}
	grown := edited
	grown.Jobs = slices.Clone(edited.Jobs)
	grown.Jobs[0].Partitions = 9
	if err := s.SetCatalog(&grown, 3); err != nil {
		t.Fatal(err)
	}
	s.catalogUpdated(three)
	if s.assigned.out == first || s.assigned.out.Owner(shard.Slot{Job: "a", Partition: 8}) == "" {
		t.Fatal("a job grown to 9 partitions kept the assignment of 6")
	}
	two := membership.View{Revision: 2, Members: []string{"m-a", "m-b"}}
	grownOut := s.assigned.out
	got, _ := s.assign(two)
	if got == grownOut {
		t.Fatal("a view of other members kept the last assignment")
	}
	want, err := shard.Assign([]shard.Job{{Name: "a", Partitions: 9, Members: two.Members}, {Name: "b", Partitions: 1, Members: two.Members}})
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range []shard.Slot{{Job: "a", Partition: 0}, {Job: "a", Partition: 8}, {Job: "b"}} {
		if got.Owner(sl) != want.Owner(sl) {
			t.Fatalf("slot %v: owner %s; shard.Assign says %s", sl, got.Owner(sl), want.Owner(sl))
		}
	}
}
