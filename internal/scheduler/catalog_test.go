package scheduler

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/kiratest"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
)

func TestCatalogConvergesWithoutRestart(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
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
	before := s.prepared
	next := *cat
	next.Jobs = slices.Clone(cat.Jobs)
	next.Jobs[1].Schedule = "@hourly"
	next.Pools = map[string]int{"p": 2}
	if err := s.SetCatalog(&next, 2); err != nil {
		t.Fatal(err)
	}
	after := s.prepared
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
	three := member.View{Revision: 1, Members: []string{"m-a", "m-b", "m-c"}} // not this member: nothing campaigns
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
	two := member.View{Revision: 2, Members: []string{"m-a", "m-b"}}
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

// An Update that names the jobs it replaces is taken at its word: only
// the jobs it names are prepared and installed, so a change elsewhere in
// its catalog (which config.WatchStored never delivers) is not seen; the
// job named fires on its new schedule from its next fire, the others as
// they did. An Update whose Since is not the revision last given is
// prepared whole, and one that changes a job's partitions releases the
// slot it removed. After an Update refused, the next is prepared whole.
func TestUpdatesPrepareOnlyTheJobsReplaced(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	clock := clock.NewManual(t0)
	a := withDefaults(config.Job{Name: "a", Schedule: "@every 10s", Handler: "noop"})
	b := withDefaults(config.Job{Name: "b", Schedule: "@every 10s", Handler: "noop"})
	c := withDefaults(config.Job{Name: "c", Schedule: "@hourly", Partitions: 2, Handler: "noop"})
	rec := newRecorder()
	n := startNode(t, cli, catalog("replaced", a, b, c), rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock, cfg: Config{CatalogRevision: 10}})
	waitKind(t, rec, "every slot raised", 4, func(e Event) bool { return e.Kind == Raised })
	update := func(rev, since int64, replaced []string, jobs ...config.Job) error {
		return n.sched.SetCatalogUpdate(namedUpdate(catalog("replaced", jobs...), rev, since, replaced, nil, nil))
	}
	firesOf := func(job string) []time.Time {
		var out []time.Time
		for _, e := range started(rec.all(), "") {
			if e.Slot.Job == job {
				out = append(out, e.Execution.ScheduledTime)
			}
		}
		return out
	}
	applied := func(rev int64) {
		t.Helper()
		waitKind(t, rec, fmt.Sprintf("catalog %d applied", rev), 1, func(e Event) bool { return e.Kind == CatalogApplied && e.Count == int(rev) })
	}

	// Revision 11 names b (every 30s); its catalog edits a as well.
	a20, b30 := a, b
	a20.Schedule, b30.Schedule = "@every 20s", "@every 30s"
	if err := update(11, 10, []string{"b"}, a20, b30, c); err != nil {
		t.Fatal(err)
	}
	applied(11)
	// Each of a's fires finishes before the clock moves on, so the overlap
	// policy never skips the next one.
	finished := func(job string, n int) {
		t.Helper()
		waitKind(t, rec, fmt.Sprintf("%d of %s's fires finished", n, job), n, func(e Event) bool { return e.Kind == Finished && e.Slot.Job == job })
	}
	for i := range 3 {
		advance(t, rec, clock, 10*time.Second) // to 12:00:30
		if i < 2 {
			finished("a", i+1)
		}
	}
	waitKind(t, rec, "b's fire at 12:00:30", 1, func(e Event) bool { return e.Kind == Started && e.Slot.Job == "b" })
	waitKind(t, rec, "a's fire at 12:00:30", 3, func(e Event) bool { return e.Kind == Started && e.Slot.Job == "a" })
	if got := firesOf("b"); !slices.EqualFunc(got, []time.Time{sec(30)}, time.Time.Equal) {
		t.Fatalf("b, every 30s from the update at 12:00:00, ran %v; want 12:00:30", got)
	}
	if got := firesOf("a"); !slices.EqualFunc(got, []time.Time{sec(10), sec(20), sec(30)}, time.Time.Equal) {
		t.Fatalf("a, not named by the update, ran %v; want every 10s", got)
	}

	// Revision 12 says it replaces jobs of revision 5, which the scheduler
	// was never given: prepared whole, a takes every 20s from its fire
	// already armed for 12:00:40.
	if err := update(12, 5, []string{"b"}, a20, b30, c); err != nil {
		t.Fatal(err)
	}
	applied(12)
	advance(t, rec, clock, 10*time.Second) // 12:00:40
	waitKind(t, rec, "a's fire at 12:00:40", 4, func(e Event) bool { return e.Kind == Started && e.Slot.Job == "a" })
	finished("a", 4)
	clock.Advance(20 * time.Second) // 12:01:00
	waitKind(t, rec, "a's fire at 12:01:00", 5, func(e Event) bool { return e.Kind == Started && e.Slot.Job == "a" })
	var handled []time.Time
	for _, e := range rec.all() {
		if (e.Kind == Started || e.Kind == Skipped || e.Kind == Queued) && e.Slot.Job == "a" && e.Execution.ScheduledTime.After(sec(30)) {
			handled = append(handled, e.Execution.ScheduledTime)
		}
	}
	if !slices.EqualFunc(handled, []time.Time{sec(40), sec(60)}, time.Time.Equal) {
		t.Fatalf("a, every 20s from revision 12 (prepared whole), had fires %v after 12:00:30; want 12:00:40 (armed before), 12:01:00", handled)
	}

	// Revision 13 replaces c with one partition: c/1 goes.
	c1 := c
	c1.Partitions = 1
	if err := update(13, 12, []string{"c"}, a20, b30, c1); err != nil {
		t.Fatal(err)
	}
	applied(13)
	waitKind(t, rec, "c/1 released", 1, func(e Event) bool {
		return e.Kind == Released && e.Slot == shard.Slot{Job: "c", Partition: 1}
	})

	// Revision 14 is refused (an unregistered handler); 15, which says it
	// replaces jobs of 14, is prepared whole.
	broken := b30
	broken.Handler = "unregistered"
	if err := update(14, 13, []string{"b"}, a20, broken, c1); err == nil {
		t.Fatal("an update naming an unregistered handler was accepted")
	}
	c1.Schedule = "@daily"
	if err := update(15, 14, nil, a20, b30, c1); err != nil {
		t.Fatal(err)
	}
	applied(15)
	for _, j := range n.sched.Jobs() {
		if j.Name == "c" && j.Schedule != "@daily" {
			t.Fatalf("after revision 14 was refused, revision 15 (said to replace nothing of 14) left c on %q; want it prepared whole, @daily", j.Schedule)
		}
	}
}

// namedUpdate is the Update of cat at rev that names its changes since
// (the jobs of cat named replaced and added, and the jobs removed), as
// config.WatchStored delivers it; its Catalog is cat, for a scheduler that
// did not run since.
func namedUpdate(cat *config.Catalog, rev, since int64, replaced, added, removed []string) config.Update {
	settings := *cat
	settings.Jobs = nil
	u := config.Update{Catalog: cat, Revision: rev, Since: since, Settings: &settings, Removed: removed}
	for _, j := range cat.Jobs {
		switch {
		case slices.Contains(replaced, j.Name):
			u.Replaced = append(u.Replaced, j)
		case slices.Contains(added, j.Name):
			u.Added = append(u.Added, j)
		}
	}
	return u
}
