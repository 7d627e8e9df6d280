package scheduler

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
)

// Updates that name the jobs they add and remove, as config.WatchStored
// delivers them: a job removed while it runs stays led until its run
// ends, then is released, and never fires again; jobs added (one a
// dependent, with after:) are taken and fire, the dependent after its
// upstream's fire; a job removed and added again runs its new definition.
func TestUpdatesAddAndRemoveJobsInPlace(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	clock := clock.NewManual(t0)
	g := newGate()
	old := withDefaults(config.Job{Name: "old", Schedule: "@every 10s", Handler: "block"})
	up := withDefaults(config.Job{Name: "up", Schedule: "@every 10s", Handler: "noop"})
	rec := newRecorder()
	n := startNode(t, cli, catalog("inplace", old, up), rec, jobs.Handlers{"block": g.handler, "noop": noop}, nodeOpts{manual: clock, cfg: Config{CatalogRevision: 10}})
	waitKind(t, rec, "every slot raised", 2, func(e Event) bool { return e.Kind == Raised })
	clock.Advance(10 * time.Second) // 12:00:10: old starts and blocks
	waitKind(t, rec, "old running", 1, isJob(Started, "old"))
	kiratest.Receive(t, g.entered, 10*time.Second, "g.entered")
	applied := func(rev int64) {
		t.Helper()
		waitKind(t, rec, fmt.Sprintf("catalog %d applied", rev), 1, func(e Event) bool { return e.Kind == CatalogApplied && e.Count == int(rev) })
	}

	// Revision 11 removes old and adds b and dep (after: up).
	b := withDefaults(config.Job{Name: "b", Schedule: "@every 10s", Handler: "noop"})
	dep := withDefaults(config.Job{Name: "dep", After: afterJobs("up"), Handler: "noop"})
	if err := n.sched.SetCatalogUpdate(namedUpdate(catalog("inplace", up, b, dep), 11, 10, nil, []string{"b", "dep"}, []string{"old"})); err != nil {
		t.Fatal(err)
	}
	applied(11)
	waitKind(t, rec, "b and dep raised", 1, func(e Event) bool { return e.Kind == Raised && e.Slot.Job == "dep" })
	waitKind(t, rec, "b raised", 1, func(e Event) bool { return e.Kind == Raised && e.Slot.Job == "b" })
	if _, still := n.sched.Leading()[shard.Slot{Job: "old"}]; !still {
		t.Fatal("the removed job was released before its in-flight run ended")
	}
	g.open()
	waitKind(t, rec, "old released after its run", 1, isJob(Released, "old"))
	clock.Advance(10 * time.Second) // 12:00:20: up and b fire, dep after up
	waitKind(t, rec, "b fires", 1, isJob(Started, "b"))
	waitKind(t, rec, "dep after up's 12:00:20", 1, isJob(Finished, "dep"))

	// Revisions 12 and 13 remove b and add it again, every 30s.
	b30 := b
	b30.Schedule = "@every 30s"
	if err := n.sched.SetCatalogUpdate(namedUpdate(catalog("inplace", up, dep), 12, 11, nil, nil, []string{"b"})); err != nil {
		t.Fatal(err)
	}
	if err := n.sched.SetCatalogUpdate(namedUpdate(catalog("inplace", up, dep, b30), 13, 12, nil, []string{"b"}, nil)); err != nil {
		t.Fatal(err)
	}
	applied(13)
	clock.Advance(10 * time.Second) // 12:00:30
	waitKind(t, rec, "b on its new schedule", 2, isJob(Started, "b"))
	clock.Advance(10 * time.Second) // 12:00:40: b (every 30s) does not fire
	waitKind(t, rec, "up's 12:00:40", 4, isJob(Started, "up"))
	evs := rec.all()
	if got := runsOf(evs, Started, "b", 0); !slices.EqualFunc(got, []time.Time{sec(20), sec(30)}, time.Time.Equal) {
		t.Fatalf("b started %v; want 12:00:20, then 12:00:30 every 30s", got)
	}
	if got := runsOf(evs, Started, "old", 0); len(got) != 1 {
		t.Fatalf("the removed job started %v; want only its 12:00:10", got)
	}
	if got := slices.Sorted(maps.Keys(n.sched.Eligible())); !slices.Equal(got, []string{"b", "dep", "up"}) {
		t.Fatalf("the scheduler reports the jobs %v eligible; want b, dep, up", got)
	}
}

// Random sequences of single-job changes (adds, removes, edits of a
// schedule or of partitions, a job removed and added again within one
// batch), taken in batches by the loop, some racing a view change, some
// skipping a revision (prepared whole): after each batch the scheduler
// runs exactly the catalog's jobs and slots, the slots it wants
// campaigning and the others idle; once the coalesced whole assignment
// ran, every slot is wanted exactly where a whole install of the catalog
// under that view wants it. Some whole assignments are taken after the
// next batch, stale if it placed a job, and dropped. The test plays the
// loop; every campaign waits in line, so nothing talks to etcd.
func TestIncrementalInstallsConvergeToTheWholeOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 17))
	cur := map[string]config.Job{}
	for i := range 30 {
		j := config.Job{Name: fmt.Sprintf("job-%02d", i), Schedule: "@hourly", Handler: "noop", Partitions: 1 + rng.IntN(4)}
		cur[j.Name] = j
	}
	cat := catalogOf(cur)
	s, _ := unrunScheduler(t, cat)
	for range maxCampaigning {
		s.campaigning <- struct{}{} // every place taken: campaigns wait in line
	}
	clock := clock.NewManual(t0)
	s.cfg.Clock = clock
	me := s.member.ID()
	views := []member.View{
		{Revision: 1, Members: slices.Sorted(slices.Values([]string{me, "m-a", "m-b"}))},
		{Revision: 2, Members: slices.Sorted(slices.Values([]string{me, "m-a"}))},
		{Revision: 3, Members: slices.Sorted(slices.Values([]string{me, "m-a", "m-b", "m-c"}))},
	}
	v := views[0]
	s.applyView(v)
	rev := int64(1)
	if err := s.SetCatalog(cat, rev); err != nil {
		t.Fatal(err)
	}
	s.catalogUpdated(v)
	exact := 0
	for step := range 300 {
		for range 1 + rng.IntN(3) {
			u := randomChange(rng, cur, rev)
			if err := s.SetCatalogUpdate(u); err != nil {
				t.Fatal(err)
			}
			rev = u.Revision
		}
		if rng.IntN(8) == 0 { // a view change before the loop takes the changes
			v = views[rng.IntN(len(views))]
			v.Revision = int64(step + 10)
			s.applyView(v)
		}
		s.catalogUpdated(v)
		if s.reassign.computing { // asked for before this batch: stale if it placed a job
			s.reassigned(kiratest.Receive(t, s.wholes, 10*time.Second, "the whole assignment"))
		}
		clock.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
		s.reassignIfDue(clock.Now())
		if s.reassign.computing && rng.IntN(2) == 0 {
			s.reassigned(kiratest.Receive(t, s.wholes, 10*time.Second, "the whole assignment"))
		}
		if err := runsExactly(s, cur, false, v); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if s.reassign.due.IsZero() && !s.reassign.computing {
			exact++
			if err := runsExactly(s, cur, true, v); err != nil {
				t.Fatalf("step %d, whole assignment computed: %v", step, err)
			}
		}
	}
	if exact < 50 || exact > 250 {
		t.Fatalf("the whole assignment was computed after %d of 300 batches; want both states checked", exact)
	}
	if s.reassign.computing {
		s.reassigned(kiratest.Receive(t, s.wholes, 10*time.Second, "the whole assignment"))
	}
	s.reassignIfDue(clock.Now().Add(reassignMax))
	if s.reassign.computing {
		s.reassigned(kiratest.Receive(t, s.wholes, 10*time.Second, "the whole assignment"))
	}
	if err := runsExactly(s, cur, true, v); err != nil {
		t.Fatalf("at the end: %v", err)
	}
}

// catalogOf is the catalog of jobs, in name order.
func catalogOf(jobs map[string]config.Job) *config.Catalog {
	var specs []config.Job
	for _, name := range slices.Sorted(maps.Keys(jobs)) {
		specs = append(specs, jobs[name])
	}
	return catalog("converge", specs...)
}

// randomChange changes one job of cur (two, for a job removed and added
// again), and returns the Update after revision rev that names it; one in
// fifteen says it follows a revision never given, and carries the whole
// catalog.
func randomChange(rng *rand.Rand, cur map[string]config.Job, rev int64) config.Update {
	names := slices.Sorted(maps.Keys(cur))
	name := names[rng.IntN(len(names))]
	var replaced, added, removed []string
	switch r := rng.IntN(10); {
	case r < 3:
		name = fmt.Sprintf("job-%02d", rng.IntN(60))
		if _, ok := cur[name]; ok {
			removed = []string{name} // removed and added again, in one update
		}
		added = []string{name}
		cur[name] = config.Job{Name: name, Schedule: "@every 1h", Handler: "noop", Partitions: 1 + rng.IntN(4)}
	case r < 6 && len(cur) > 1:
		removed = []string{name}
		delete(cur, name)
	case r < 8:
		j := cur[name]
		j.Schedule = fmt.Sprintf("@every %dm", 1+rng.IntN(50))
		cur[name], replaced = j, []string{name}
	default:
		j := cur[name]
		j.Partitions = 1 + rng.IntN(4)
		cur[name], replaced = j, []string{name}
	}
	since := rev
	if rng.IntN(15) == 0 {
		since = rev - 1
	}
	return namedUpdate(catalogOf(cur), rev+1, since, replaced, added, removed)
}

// runsExactly says how the scheduler differs from a whole install of cur
// under view v: its jobs, its slots (removed ones all dropped: nothing
// runs), each wanted slot campaigning and each other idle, and, when
// exact, each slot wanted where shard.Assign puts it.
func runsExactly(s *Scheduler, cur map[string]config.Job, exact bool, v member.View) error {
	if len(s.jobs) != len(cur) || len(s.installed) != len(cur) {
		return fmt.Errorf("%d jobs run, the catalog has %d", len(s.jobs), len(cur))
	}
	var in []shard.Job
	slots := 0
	for name, spec := range cur {
		j := s.jobs[name]
		if j == nil || j.spec.Schedule != spec.Schedule || j.spec.Partitions != spec.Partitions {
			return fmt.Errorf("job %s runs %+v, the catalog has %+v", name, j, spec)
		}
		in = append(in, shard.Job{Name: name, Partitions: spec.Partitions, Members: v.Members})
		slots += spec.Partitions
	}
	if len(s.slots) != slots {
		return fmt.Errorf("%d slots, the catalog has %d", len(s.slots), slots)
	}
	want, err := shard.Assign(in)
	if err != nil {
		return err
	}
	me := s.member.ID()
	for id, sl := range s.slots {
		if spec, ok := cur[id.Job]; !ok || id.Partition >= spec.Partitions || sl.removed || sl.job != s.jobs[id.Job] {
			return fmt.Errorf("slot %v is not the catalog's, or not its job's", id)
		}
		if (sl.wanted && sl.phase != campaigning) || (!sl.wanted && sl.phase != idle) {
			return fmt.Errorf("slot %v: wanted %v, %v", id, sl.wanted, sl.phase)
		}
		if exact && sl.wanted != (want.Owner(id) == me) {
			return fmt.Errorf("slot %v: wanted %v; a whole install wants it at %s", id, sl.wanted, want.Owner(id))
		}
	}
	return nil
}
