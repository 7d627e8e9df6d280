package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// t0 is where manual clocks start: half a second before a 10s boundary.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 500_000_000, time.UTC)

func sec(s int) time.Time { return time.Date(2026, 11, 29, 12, 0, s, 0, time.UTC) }

// withDefaults fills a test job's policies as config.Parse would.
func withDefaults(j config.Job) config.Job {
	if j.Partitions == 0 {
		j.Partitions = 1
	}
	if j.Misfire == "" {
		j.Misfire = config.DefaultMisfire
	}
	if j.CatchupWindow == 0 {
		j.CatchupWindow = config.DefaultCatchupWindow
	}
	if j.Overlap == "" {
		j.Overlap = config.DefaultOverlap
	}
	if j.Retries.Backoff == 0 {
		j.Retries.Backoff, j.Retries.MaxBackoff = config.DefaultRetryBackoff, config.DefaultMaxBackoff
	}
	return j
}

// advance moves the clock by d and waits for what the member did about the
// fire that fell due (started, skipped or queued).
func advance(t *testing.T, rec *recorder, clock *clock.Manual, d time.Duration) Event {
	t.Helper()
	clock.Advance(d)
	now := clock.Now()
	evs := rec.waitFor(t, "the fire at "+now.Format(time.TimeOnly)+" handled", 15*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool {
			return (e.Kind == Started || e.Kind == Skipped || e.Kind == Queued) && e.At.Equal(now)
		}) > 0
	})
	for _, e := range evs {
		if (e.Kind == Started || e.Kind == Skipped || e.Kind == Queued) && e.At.Equal(now) {
			return e
		}
	}
	panic("unreachable")
}

func waitKind(t *testing.T, rec *recorder, what string, n int, keep func(Event) bool) []Event {
	t.Helper()
	return rec.waitFor(t, what, 15*time.Second, func(evs []Event) bool { return count(evs, keep) >= n })
}

func started(evs []Event, member string) []Event {
	var out []Event
	for _, e := range evs {
		if e.Kind == Started && (member == "" || e.Member == member) {
			out = append(out, e)
		}
	}
	return out
}

// wantRan fails t unless member started exactly the fires scheduled at want, in order.
func wantRan(t *testing.T, rec *recorder, member string, want ...time.Time) {
	t.Helper()
	var got []time.Time
	for _, e := range started(rec.all(), member) {
		got = append(got, e.Execution.ScheduledTime)
	}
	if !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Fatalf("%s ran %v; want %v", member, got, want)
	}
}

// heldHandler is a handler that blocks each run until released.
type heldHandler struct {
	mu      sync.Mutex
	release chan struct{}
	one     chan struct{} // releases one held run (releaseOne)
	entered chan struct{} // receives once per run that reached the handler
	fail    int           // the first fail runs fail
}

func newGate() *heldHandler {
	return &heldHandler{release: make(chan struct{}), one: make(chan struct{}), entered: make(chan struct{}, 100)}
}

func (g *heldHandler) handler(ctx context.Context) error {
	g.entered <- struct{}{}
	g.mu.Lock()
	release, fail := g.release, g.fail > 0
	if fail {
		g.fail--
	}
	g.mu.Unlock()
	if fail {
		return errors.New("downstream failed")
	}
	select {
	case <-release:
		return nil
	case <-g.one:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *heldHandler) open() { g.mu.Lock(); close(g.release); g.mu.Unlock() }

// releaseOne lets one held run end (waiting at most 15 s for one).
func (g *heldHandler) releaseOne(t *testing.T, what string) {
	t.Helper()
	select {
	case g.one <- struct{}{}:
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: no run held to release", what)
	}
}

// waitEntered waits (at most 15 s) for a run to reach the handler.
func (g *heldHandler) waitEntered(t *testing.T, what string) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: no run reached the handler", what)
	}
}

// A member stops; fires pass while nobody holds the slot; the next member
// applies the misfire policy. fire-all runs every missed fire oldest first,
// fire-once only the latest and records the others as missed, skip none;
// catch-up runs carry the fires' own execution ids.
func TestFailoverCatchUp(t *testing.T) {
	for _, policy := range []config.Misfire{config.MisfireFireAll, config.MisfireFireOnce, config.MisfireSkip} {
		t.Run(string(policy), func(t *testing.T) {
			etcd := etcdtest.Start(t)
			cli := etcd.Client(t)
			clock := clock.NewManual(t0)
			cat := catalog("catchup", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop", Misfire: policy}))
			rec := newRecorder()
			h := jobs.Handlers{"noop": noop}
			a := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock})
			waitKind(t, rec, "a ready", 1, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
			clock.Advance(10 * time.Second) // 12:00:10.5
			waitKind(t, rec, "a's first run", 1, func(e Event) bool { return e.Kind == Finished && e.Member == a.id })
			clock.Advance(10 * time.Second) // 12:00:20.5
			waitKind(t, rec, "a's second run", 2, func(e Event) bool { return e.Kind == Finished && e.Member == a.id })
			if err := a.stop(); err != nil {
				t.Fatal(err)
			}
			clock.Advance(35 * time.Second) // 12:00:55.5: 30, 40 and 50 pass with nobody
			b := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock})
			want := map[config.Misfire][]time.Time{
				config.MisfireFireAll:  {sec(30), sec(40), sec(50)},
				config.MisfireFireOnce: {sec(50)},
			}[policy]
			if len(want) > 0 {
				waitKind(t, rec, "catch-up runs", len(want), func(e Event) bool { return e.Kind == Finished && e.Member == b.id })
			} else {
				waitKind(t, rec, "b ready", 1, func(e Event) bool { return e.Kind == Raised && e.Member == b.id })
			}
			got := started(rec.all(), b.id)
			if len(got) != len(want) {
				for _, e := range got {
					t.Logf("b started %v %s attempt %d", e.Execution.ScheduledTime, e.Cause, e.Attempt)
				}
				t.Fatalf("b started %d runs; want %v", len(got), want)
			}
			for i, e := range got {
				if !e.Execution.ScheduledTime.Equal(want[i]) || e.Cause != history.CauseCatchup || e.Execution.ID != jobs.ExecutionID("tick", 0, want[i]) {
					t.Fatalf("catch-up run %d: %v %s %s; want %v catchup with the fire's id", i, e.Execution.ScheduledTime, e.Cause, e.Execution.ID, want[i])
				}
			}
			// History is written behind the runs; poll it.
			wantMissed := 3 - len(want)
			waitUntil(t, "missed fires in the history", 10*time.Second, func() bool {
				hist, err := ops.ReadHistory(context.Background(), cli, "catchup", "tick", -1, -1)
				if err != nil {
					t.Fatal(err)
				}
				missed, ran := 0, 0
				for _, r := range hist {
					switch {
					case r.Outcome == history.OutcomeMissed:
						missed++
					case r.Member == b.id:
						ran++
					}
				}
				return missed == wantMissed && ran == len(want)
			})
		})
	}
}

// A scheduled fire that falls due while the new owner is still working off
// its catch-up backlog joins the backlog: under fire-all it runs after the
// missed fires, whatever the overlap policy (skip here), instead of being
// skipped as an overlap with the catch-up.
func TestFireDuringCatchUpJoinsTheBacklog(t *testing.T) {
	rec, clock, g, b := catchingUp(t)
	if e := advance(t, rec, clock, 10*time.Second); e.Kind != Queued { // 12:00:45.5: 40 falls due
		t.Fatalf("the fire at 40 during the catch-up was %s (%s); want queued behind the backlog", e.Kind, e.Reason)
	}
	g.open()
	waitKind(t, rec, "b's runs", 3, func(e Event) bool { return e.Kind == Finished && e.Member == b.id })
	wantRan(t, rec, b.id, sec(20), sec(30), sec(40))
}

// catchingUp starts a member that takes over slot tick/0 (every 10 s,
// fire-all) at 12:00:35.5 from a holder stopped after 12:00:10 ran, and
// returns once the catch-up of 20 is running at the gate (30 waits).
func catchingUp(t *testing.T) (*recorder, *clock.Manual, *heldHandler, *node) {
	t.Helper()
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	cat := catalog("catchup", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "h", Misfire: config.MisfireFireAll}))
	rec := newRecorder()
	a := startNode(t, cli, cat, rec, jobs.Handlers{"h": noop}, nodeOpts{manual: clock})
	waitKind(t, rec, "a ready", 1, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
	clock.Advance(10 * time.Second) // 12:00:10.5
	waitKind(t, rec, "a's run", 1, func(e Event) bool { return e.Kind == Finished && e.Member == a.id })
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(25 * time.Second) // 12:00:35.5: 20 and 30 pass with nobody
	g := newGate()
	b := startNode(t, cli, cat, rec, jobs.Handlers{"h": g.handler}, nodeOpts{manual: clock})
	g.waitEntered(t, "the catch-up of 20 running (30 waits)")
	return rec, clock, g, b
}

// Once the misfires have all started, a fire that falls due while the
// fires that joined the backlog run is an overlap again (skipped here):
// otherwise a slot whose runs outlast its period would let every fire join,
// run them all back to back and fall behind for as long as the load lasts.
// The case: the new owner owes 20 and 30; 40 comes while 20 runs and 50
// while 30 runs (both join); 60 comes while 40 runs.
func TestFireAfterTheMisfiresIsAnOverlap(t *testing.T) {
	rec, clock, g, b := catchingUp(t)
	for _, due := range []string{"40 while 20 runs", "50 while 30 runs"} {
		if e := advance(t, rec, clock, 10*time.Second); e.Kind != Queued {
			t.Fatalf("the fire at %s was %s (%s); want queued behind the misfires", due, e.Kind, e.Reason)
		}
		g.releaseOne(t, "the misfire before "+due)
		g.waitEntered(t, "the next fire after "+due)
	}
	if e := advance(t, rec, clock, 10*time.Second); e.Kind != Skipped { // 12:01:05.5: 60 falls due
		t.Fatalf("the fire at 60, due while 40 (which joined) runs, was %s (%s); want skipped as an overlap", e.Kind, e.Reason)
	}
	g.open()
	waitKind(t, rec, "b's runs", 4, func(e Event) bool { return e.Kind == Finished && e.Member == b.id })
	wantRan(t, rec, b.id, sec(20), sec(30), sec(40), sec(50))
}

// Fires that fall due while etcd cannot record the slot's previous start
// are misfires under fire-all, as a takeover's catch-ups are: they join the
// backlog, and so do the fires that fall due while they run; a fire due
// while those that joined run is an overlap. The case: a manual run's start
// hangs at etcd (the writer stalled) while 10 and 20 fall due; 30 falls due
// while 10 runs and 40 while 20 runs; 50 while 30 runs.
func TestFiresDueWhileEtcdStallsAreMisfires(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	cat := catalog("stall", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "h", Misfire: config.MisfireFireAll}))
	rec := newRecorder()
	g := newGate()
	gk := newGatedKV()
	n := startNode(t, cli, cat, rec, jobs.Handlers{"h": g.handler}, nodeOpts{manual: clock, gate: gk})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	waitUntil(t, "the takeover's writes committed", 10*time.Second, func() bool {
		queued, inFlight := n.sched.writer.Queued()
		return queued == 0 && inFlight == 0
	})
	gk.close()
	if _, err := ops.RequestRun(context.Background(), cli, "stall", []shard.Slot{{Job: "tick"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gk.blocked: // the manual run's start waits at the gate
	case <-time.After(10 * time.Second):
		t.Fatal("the manual run's start was never written")
	}
	waitUntil(t, "the writer stalled", 10*time.Second, n.sched.writer.Stalled)
	for _, due := range []string{"10", "20"} {
		if e := advance(t, rec, clock, 10*time.Second); e.Kind != Queued {
			t.Fatalf("the fire at %s, due while etcd stalled, was %s (%s); want queued as a misfire", due, e.Kind, e.Reason)
		}
	}
	gk.open()
	g.waitEntered(t, "the manual run")
	g.releaseOne(t, "the manual run")
	for _, due := range []string{"30 while 10 runs", "40 while 20 runs"} {
		g.waitEntered(t, "the misfire before "+due)
		if e := advance(t, rec, clock, 10*time.Second); e.Kind != Queued {
			t.Fatalf("the fire at %s was %s (%s); want queued behind the misfires", due, e.Kind, e.Reason)
		}
		g.releaseOne(t, "the misfire before "+due)
	}
	g.waitEntered(t, "30 running")
	if e := advance(t, rec, clock, 10*time.Second); e.Kind != Skipped { // 12:00:50.5
		t.Fatalf("the fire at 50, due while 30 (which joined) runs, was %s (%s); want skipped as an overlap", e.Kind, e.Reason)
	}
	g.open()
	waitKind(t, rec, "the runs", 5, func(e Event) bool { return e.Kind == Finished })
	var ran []time.Time
	for _, e := range started(rec.all(), n.id) {
		if e.Cause != history.CauseManual {
			ran = append(ran, e.Execution.ScheduledTime)
		}
	}
	if want := []time.Time{sec(10), sec(20), sec(30), sec(40)}; !slices.EqualFunc(ran, want, time.Time.Equal) {
		t.Fatalf("ran %v; want %v", ran, want)
	}
}

// A fire due after etcd refused the slot's previous start, before the loop
// has taken that run's result, is due while etcd fails: under fire-all it
// joins the backlog as a misfire, rather than being skipped as an overlap
// with a run that never started. The test plays the loop: the scheduler is
// built but not run.
func TestFireDueAfterARefusedStartIsAMisfire(t *testing.T) {
	cat := catalog("refused", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop", Misfire: config.MisfireFireAll}))
	s, _ := unrunScheduler(t, cat)
	sl := s.slots[shard.Slot{Job: "tick"}]
	if sl == nil || sl.job.spec.Overlap != config.OverlapSkip {
		t.Fatalf("slot %+v; want tick/0 with overlap skip", sl)
	}
	sl.phase = leading
	sl.runs = map[uint64]context.CancelFunc{1: func() {}} // the run whose start etcd refused
	sl.refused.Store(1)
	f := fire{scheduled: sec(20), cause: history.CauseSchedule, attempt: 1, id: jobs.ExecutionID("tick", 0, sec(20))}
	s.dispatch(sl, f, sec(20))
	if len(sl.owed.backlog) != 1 || !sl.owed.backlog[0].misfire {
		t.Fatalf("backlog %+v; want the fire of 12:00:20, a misfire", sl.owed.backlog)
	}
	sl.refused.Store(0) // the loop took the result: a later fire is an overlap again
	sl.owed.backlog = nil
	s.dispatch(sl, fire{scheduled: sec(30), cause: history.CauseSchedule, attempt: 1, id: jobs.ExecutionID("tick", 0, sec(30))}, sec(30))
	if len(sl.owed.backlog) != 0 {
		t.Fatalf("backlog %+v; want the fire of 12:00:30 skipped as an overlap", sl.owed.backlog)
	}
}

// The same for the retry of a fire the previous holder started and never
// finished: a fire that falls due while it runs joins the backlog under
// fire-all. The case: the killed holder recorded the next fire's start
// ahead, and the new holder takes over a few ms before the fire after it,
// which must not be skipped as an overlap.
func TestFireDuringTakeoverRetryJoinsTheBacklog(t *testing.T) {
	// 12:00:25.5, then 30 falls due at 12:00:30.5.
	fireDuringRetry(t, config.MisfireFireAll, 25*time.Second, 5*time.Second, Queued)
}

// Under the other misfire policies a fire that falls due while the new
// holder works off what it owes is an overlap, not a misfire: overlap skip
// skips it. Joining the backlog instead would keep the slot running every
// fire back to back, later and later, whenever a run (or, past capacity,
// recording its start and result) takes longer than the period. The case:
// fire-once owes the retry of 20 (started, never finished) and the latest
// missed fire, 30; the fire at 40 comes while the retry runs.
func TestFireDuringTakeoverBacklogIsAnOverlapUnlessFireAll(t *testing.T) {
	// 12:00:35.5 (30 waits behind the retry), then 40 falls due at 12:00:45.5.
	fireDuringRetry(t, config.MisfireFireOnce, 35*time.Second, 10*time.Second, Skipped)
}

// fireDuringRetry takes over an unfinished 20 at t0+at (takeOverUnfinished),
// advances the clock by step while its retry runs, and wants the fire then
// due handled as want; the slot runs 20 and 30, and nothing else.
func fireDuringRetry(t *testing.T, misfire config.Misfire, at, step time.Duration, want EventKind) {
	t.Helper()
	rec, clock, g, b := takeOverUnfinished(t, misfire, at)
	g.waitEntered(t, "the retry of 20 running")
	if e := advance(t, rec, clock, step); e.Kind != want {
		t.Fatalf("the fire due at %v while the retry of 20 ran was %s (%s); want %s", clock.Now().Format(time.TimeOnly), e.Kind, e.Reason, want)
	}
	g.open()
	waitKind(t, rec, "b's runs", 2, func(e Event) bool { return e.Kind == Finished && e.Member == b.id })
	wantRan(t, rec, b.id, sec(20), sec(30))
}

// takeOverUnfinished starts a member, its clock at t0+at, taking over slot
// tick/0 (every 10 s, misfire) from a holder killed after 12:00:10 finished
// and 12:00:20's start was recorded ahead; its runs wait at the gate.
func takeOverUnfinished(t *testing.T, misfire config.Misfire, at time.Duration) (*recorder, *clock.Manual, *heldHandler, *node) {
	t.Helper()
	cli := etcdtest.Start(t).Client(t)
	st := history.SlotState{Token: 7, Member: "gone", Finished: sec(10), Started: sec(20), StartedID: jobs.ExecutionID("tick", 0, sec(20)), StartedAttempt: 1}
	data, _ := json.Marshal(st)
	if _, err := cli.Put(context.Background(), keyspace.State("unfinished", shard.Slot{Job: "tick"}), string(data)); err != nil {
		t.Fatal(err)
	}
	clock := clock.NewManual(t0.Add(at))
	cat := catalog("unfinished", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "h", Misfire: misfire}))
	rec := newRecorder()
	g := newGate()
	return rec, clock, g, startNode(t, cli, cat, rec, jobs.Handlers{"h": g.handler}, nodeOpts{manual: clock})
}

// A member whose clock runs 30 s ahead runs the fire at 40 while the others'
// clocks read 10. When a member with the right clock takes the slot over, it
// must not run 10, 20, 30 or 40 again: the slot's state says 40 finished.
// The chaos suite's TestClockSkew holds the same across processes.
func TestNewOwnerDoesNotRerunFiresOfAnAheadClock(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ahead, right := clock.NewManual(t0.Add(30*time.Second)), clock.NewManual(t0)
	cat := catalog("skew", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop", Misfire: config.MisfireFireAll}))
	rec := newRecorder()
	h := jobs.Handlers{"noop": noop}
	a := startNode(t, cli, cat, rec, h, nodeOpts{manual: ahead})
	waitKind(t, rec, "a ready", 1, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
	ahead.Advance(10 * time.Second) // 12:00:40.5 by a's clock
	waitKind(t, rec, "a's run of 40", 1, func(e Event) bool { return e.Kind == Finished && e.Member == a.id })
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	b := startNode(t, cli, cat, rec, h, nodeOpts{manual: right}) // 12:00:00.5
	waitKind(t, rec, "b ready", 1, func(e Event) bool { return e.Kind == Raised && e.Member == b.id })
	for i := 0; i < 5; i++ {
		right.Advance(10 * time.Second) // 10.5, 20.5, …, 50.5
	}
	waitKind(t, rec, "b's first run", 1, func(e Event) bool { return e.Kind == Started && e.Member == b.id })
	for _, e := range started(rec.all(), b.id) {
		if !e.Execution.ScheduledTime.After(sec(40)) {
			t.Fatalf("b ran the fire at %v, which a had run (%s)", e.Execution.ScheduledTime, e.Cause)
		}
	}
}

// A graceful stop with an execution in flight leaves the view and hands its
// idle slots over at once; only the busy slot waits for its run (Grace is a
// minute here, so nothing but the early handover can pass this test).
func TestStopWithRunInFlightHandsIdleSlotsOverAtOnce(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	cat := catalog("drain",
		withDefaults(config.Job{Name: "long", Schedule: "@every 10s", Handler: "gate"}),
		withDefaults(config.Job{Name: "idle", Schedule: "@hourly", Handler: "noop", Partitions: 16}))
	rec := newRecorder()
	g := newGate()
	h := jobs.Handlers{"gate": g.handler, "noop": noop}
	a := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock, grace: time.Minute})
	waitKind(t, rec, "a holds all 17 slots", 17, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
	clock.Advance(10 * time.Second)
	g.waitEntered(t, "long running on a")
	b := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock})
	rec.waitFor(t, "b takes its share", 15*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool { return e.Kind == Raised && e.Member == b.id }) > 0 &&
			len(a.sched.Leading()) < 17
	})
	var kept []shard.Slot
	for id := range a.sched.Leading() {
		if id.Job == "idle" {
			kept = append(kept, id)
		}
	}
	if len(kept) == 0 {
		t.Skip("the ring gave a no idle slot (2^-16)")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- a.stop() }()
	for _, id := range kept {
		rec.waitFor(t, "b takes "+id.String()+" while a's run goes on", 15*time.Second, func(evs []Event) bool {
			return count(evs, func(e Event) bool { return e.Kind == Raised && e.Member == b.id && e.Slot == id }) > 0
		})
	}
	g.open()
	if err := kiratest.Receive(t, stopped, 30*time.Second, "a's stop"); err != nil {
		t.Fatal(err)
	}
}

// The last slot to drain on a graceful stop is not resigned (the lease
// revoke that follows ends it, with every other key of the member): its
// state as the member leaves it, the run just finished, is written to its
// state key before the member leaves, so a next holder that reads it sees
// the fire finished whatever the member's journal holds.
func TestGracefulStopWritesTheLastDrainedSlotsState(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	cat := catalog("lastdrain", withDefaults(config.Job{Name: "long", Schedule: "@every 10s", Handler: "gate"}))
	rec := newRecorder()
	g := newGate()
	a := startNode(t, cli, cat, rec, jobs.Handlers{"gate": g.handler}, nodeOpts{manual: clock, grace: time.Minute})
	aRaised := func(e Event) bool { return e.Kind == Raised && e.Member == a.id }
	raised := filter(waitKind(t, rec, "a ready", 1, aRaised), aRaised)
	clock.Advance(10 * time.Second)
	g.waitEntered(t, "long running on a")
	stopped := make(chan error, 1)
	go func() { stopped <- a.stop() }()
	g.open()
	if err := kiratest.Receive(t, stopped, 30*time.Second, "a's graceful stop"); err != nil {
		t.Fatal(err)
	}
	st, _ := stateKey(t, cli, "lastdrain", shard.Slot{Job: "long"})
	if st.Token != raised[0].Token || !st.Finished.Equal(sec(10)) || st.Unfinished() {
		t.Fatalf("the state key after a's stop: %+v; want a's, with the fire of 12:00:10 finished", st)
	}
}

// A fire the ex-owner started but did not finish runs again on the new owner,
// with the same execution id, marked as a retry.
func TestUnfinishedFireRerunsWithSameID(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	cat := catalog("rerun", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "block", Misfire: config.MisfireSkip}))
	rec := newRecorder()
	g := newGate()
	a := startNode(t, cli, cat, rec, jobs.Handlers{"block": g.handler}, nodeOpts{manual: clock})
	waitKind(t, rec, "a ready", 1, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
	clock.Advance(10 * time.Second)
	first := waitKind(t, rec, "a started", 1, func(e Event) bool { return e.Kind == Started && e.Member == a.id })
	g.waitEntered(t, "the run recorded and really running")
	var original Event
	for _, e := range first {
		if e.Kind == Started {
			original = e
		}
	}
	// a crashes mid-run: its lease is gone, its run never finishes as a's.
	if _, err := cli.Revoke(context.Background(), a.member.Lease()); err != nil {
		t.Fatal(err)
	}
	a.done <- <-a.done // wait for a to give up; leave the result for its cleanup
	g.open()
	b := startNode(t, cli, cat, rec, jobs.Handlers{"block": g.handler}, nodeOpts{manual: clock})
	evs := waitKind(t, rec, "b re-runs the unfinished fire", 1, func(e Event) bool { return e.Kind == Finished && e.Member == b.id })
	rerun := started(evs, b.id)[0]
	if rerun.Execution.ID != original.Execution.ID || rerun.Cause != history.CauseRetry || rerun.Attempt != 2 || !rerun.Execution.ScheduledTime.Equal(sec(10)) {
		t.Fatalf("re-run %s %s attempt %d at %v; want id %s, retry, attempt 2, 12:00:10", rerun.Execution.ID, rerun.Cause, rerun.Attempt, rerun.Execution.ScheduledTime, original.Execution.ID)
	}
	if rerun.Token <= original.Token {
		t.Fatalf("re-run token %d not above %d", rerun.Token, original.Token)
	}
}

// overlapRun starts a node with a blocking job under policy, lets the 12:00:10
// run block, and fires 12:00:20 and 12:00:30 while it does.
func overlapRun(t *testing.T, policy config.Overlap) (*recorder, *heldHandler, *clock.Manual, *node) {
	t.Helper()
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	cat := catalog("overlap", withDefaults(config.Job{Name: "slow", Schedule: "@every 10s", Handler: "block", Overlap: policy}))
	rec := newRecorder()
	g := newGate()
	n := startNode(t, cli, cat, rec, jobs.Handlers{"block": g.handler}, nodeOpts{manual: clock})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	for range 3 { // 12:00:10 starts and blocks; 12:00:20 and 12:00:30 come while it runs
		advance(t, rec, clock, 10*time.Second)
	}
	return rec, g, clock, n
}

func scheduledTimes(evs []Event, kind EventKind) []time.Time {
	var out []time.Time
	for _, e := range evs {
		if e.Kind == kind && !e.Execution.ScheduledTime.IsZero() {
			out = append(out, e.Execution.ScheduledTime)
		}
	}
	return out
}

func TestOverlapPolicies(t *testing.T) {
	t.Run("skip", func(t *testing.T) {
		rec, g, _, _ := overlapRun(t, config.OverlapSkip)
		g.open()
		evs := waitKind(t, rec, "the first run to end", 1, func(e Event) bool { return e.Kind == Finished })
		if got := scheduledTimes(evs, Started); len(got) != 1 {
			t.Fatalf("started %v; skip runs only the first", got)
		}
		if got := scheduledTimes(evs, Skipped); !slices.EqualFunc(got, []time.Time{sec(20), sec(30)}, time.Time.Equal) {
			t.Fatalf("skipped %v; want 12:00:20 and 12:00:30", got)
		}
	})
	t.Run("queue", func(t *testing.T) {
		rec, g, _, _ := overlapRun(t, config.OverlapQueue)
		evs := rec.all()
		if got := scheduledTimes(evs, Skipped); !slices.EqualFunc(got, []time.Time{sec(30)}, time.Time.Equal) {
			t.Fatalf("skipped %v; want only 12:00:30 (one waits at most)", got)
		}
		g.open()
		evs = waitKind(t, rec, "the queued run", 2, func(e Event) bool { return e.Kind == Finished })
		if got := scheduledTimes(evs, Started); !slices.EqualFunc(got, []time.Time{sec(10), sec(20)}, time.Time.Equal) {
			t.Fatalf("started %v; want 12:00:10 then the queued 12:00:20", got)
		}
	})
	t.Run("replace", func(t *testing.T) {
		rec, g, _, _ := overlapRun(t, config.OverlapReplace)
		evs := waitKind(t, rec, "two replaced runs", 2, func(e Event) bool { return e.Kind == Finished })
		for _, e := range evs {
			if e.Kind == Finished && e.Result.Outcome != jobs.Cancelled {
				t.Fatalf("replaced run of %v ended %s; want cancelled", e.Execution.ScheduledTime, e.Result.Outcome)
			}
		}
		if got := scheduledTimes(evs, Started); len(got) != 3 {
			t.Fatalf("started %v; replace starts every fire", got)
		}
		g.open()
	})
	t.Run("allow", func(t *testing.T) {
		rec, g, _, _ := overlapRun(t, config.OverlapAllow)
		if got := scheduledTimes(rec.all(), Started); len(got) != 3 {
			t.Fatalf("started %v; allow runs all three at once", got)
		}
		g.open()
		waitKind(t, rec, "all three finish", 3, func(e Event) bool { return e.Kind == Finished && e.Result.Outcome == jobs.Succeeded })
	})
}

// A failing run is retried with backoff, with the same execution id, up to
// retries.max times.
func TestRetries(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	j := withDefaults(config.Job{Name: "flaky", Schedule: "@every 1m", Handler: "flaky"})
	j.Retries = config.Retries{Max: 2, Backoff: time.Second, MaxBackoff: 10 * time.Second}
	cat := catalog("retries", j)
	rec := newRecorder()
	g := newGate()
	g.fail = 5 // more failures than retries
	g.open()
	startNode(t, cli, cat, rec, jobs.Handlers{"flaky": g.handler}, nodeOpts{manual: clock})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	clock.Advance(60 * time.Second)
	for attempt := 1; attempt <= 3; attempt++ {
		waitKind(t, rec, "attempt to fail", attempt, func(e Event) bool { return e.Kind == Finished })
		clock.Advance(4 * time.Second) // beyond the longest backoff (2s) of attempt 2
	}
	clock.Advance(30 * time.Second) // before the next minute: no fourth attempt may come
	evs := rec.all()
	runs := started(evs, "")
	if len(runs) != 3 {
		t.Fatalf("%d attempts; want 3 (1 + retries.max 2)", len(runs))
	}
	for i, e := range runs {
		if e.Execution.ID != runs[0].Execution.ID || e.Attempt != i+1 {
			t.Fatalf("attempt %d: id %s attempt %d; want the first run's id and attempt %d", i, e.Execution.ID, e.Attempt, i+1)
		}
		if i > 0 && e.Cause != history.CauseRetry {
			t.Fatalf("attempt %d trigger %s; want retry", i+1, e.Cause)
		}
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	r := config.Retries{Max: 5, Backoff: time.Second, MaxBackoff: 5 * time.Second}
	for attempt, bounds := range map[int][2]time.Duration{1: {500 * time.Millisecond, time.Second}, 2: {time.Second, 2 * time.Second}, 3: {2 * time.Second, 4 * time.Second}, 5: {2500 * time.Millisecond, 5 * time.Second}} {
		for i := 0; i < 50; i++ {
			if d := backoff(r, attempt); d < bounds[0] || d >= bounds[1] {
				t.Fatalf("attempt %d: backoff %s outside [%s, %s)", attempt, d, bounds[0], bounds[1])
			}
		}
	}
}

// Jitter delays a slot's fires by a fixed offset derived from the slot.
func TestJitterIsDeterministicPerSlot(t *testing.T) {
	j := config.Job{Name: "spread", Jitter: 5 * time.Second}
	seen := map[time.Duration]bool{}
	for p := 0; p < 20; p++ {
		s := shard.Slot{Job: "spread", Partition: p}
		d := j.JitterOffset(s)
		if d < 0 || d >= j.Jitter || d != j.JitterOffset(s) {
			t.Fatalf("slot %v: offset %s not stable or outside [0, 5s)", s, d)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Fatalf("20 slots share %d offsets: jitter does not spread", len(seen))
	}
	if (config.Job{Name: "none"}).JitterOffset(shard.Slot{Job: "none"}) != 0 {
		t.Fatal("a job without jitter has an offset")
	}
}

func TestJitterDelaysTheStart(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	j := withDefaults(config.Job{Name: "spread", Schedule: "@every 1m", Handler: "noop", Jitter: 30 * time.Second})
	cat := catalog("jitter", j)
	offset := j.JitterOffset(shard.Slot{Job: "spread"})
	rec := newRecorder()
	startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	clock.Advance(sec(60).Sub(t0) + offset - time.Millisecond) // just before the jittered start
	clock.Advance(time.Millisecond)
	evs := waitKind(t, rec, "the jittered start", 1, func(e Event) bool { return e.Kind == Started })
	e := started(evs, "")[0]
	if !e.Execution.ScheduledTime.Equal(sec(60)) || !e.At.Equal(sec(60).Add(offset)) {
		t.Fatalf("started at %v for %v; want %v for 12:01:00", e.At, e.Execution.ScheduledTime, sec(60).Add(offset))
	}
}

// Pause stops fires on every member as soon as etcd tells them; resume
// starts them again; a manual trigger runs once, by the holder, with its own id.
func TestPauseResumeTrigger(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	cat := catalog("control", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop"}))
	rec := newRecorder()
	startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	ctx := context.Background()
	if err := ops.Pause(ctx, cli, "control", "tick"); err != nil {
		t.Fatal(err)
	}
	waitKind(t, rec, "the member to learn of the pause", 1, func(e Event) bool { return e.Kind == Paused && e.Slot.Job == "tick" })
	if e := advance(t, rec, clock, 10*time.Second); e.Kind != Skipped || e.Reason != "paused" {
		t.Fatalf("a fire while paused: %s %s", e.Kind, e.Reason)
	}
	before := len(started(rec.all(), ""))
	ids, err := ops.RequestRun(ctx, cli, "control", []shard.Slot{{Job: "tick"}})
	if err != nil {
		t.Fatal(err)
	}
	evs := waitKind(t, rec, "the manual run", 1, func(e Event) bool { return e.Kind == Finished && e.Cause == history.CauseManual })
	manual := started(evs, "")[before]
	if manual.Cause != history.CauseManual || manual.Execution.ID != ids[0] {
		t.Fatalf("manual run %s id %s; want manual with id %s", manual.Cause, manual.Execution.ID, ids[0])
	}
	waitUntil(t, "the trigger deleted with the run's result", 10*time.Second, func() bool {
		resp, err := cli.Get(ctx, keyspace.Control("control")+"tick/trigger/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 0
	})
	if err := ops.Resume(ctx, cli, "control", "tick"); err != nil {
		t.Fatal(err)
	}
	waitKind(t, rec, "the member to learn of the resume", 1, func(e Event) bool { return e.Kind == Resumed && e.Slot.Job == "tick" })
	resumed := advance(t, rec, clock, 10*time.Second)
	if resumed.Kind != Started || resumed.Cause != history.CauseSchedule {
		t.Fatalf("after resume: %s %s", resumed.Kind, resumed.Cause)
	}
	waitKind(t, rec, "the resumed run", 1, func(e Event) bool { return e.Kind == Finished && e.Execution.ID == resumed.Execution.ID })
	// History is written behind the runs; poll for the resumed run's record.
	var hist []history.Record
	waitUntil(t, "the resumed run in the history", 10*time.Second, func() bool {
		var err error
		hist, err = ops.ReadHistory(ctx, cli, "control", "tick", 0, 50)
		if err != nil {
			t.Fatal(err)
		}
		return len(hist) > 0 && hist[0].ExecutionID == resumed.Execution.ID
	})
	if hist[0].Cause != history.CauseSchedule || hist[0].Outcome != "succeeded" || hist[0].Token == 0 || hist[0].Member == "" {
		t.Fatalf("newest record %+v", hist[0])
	}
}

// A start recorded ahead of time is taken back when the slot is given up
// before that fire, so the next holder does not run it as an unfinished fire.
func TestReleasedSlotRetractsItsAheadRecord(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	cat := catalog("retract", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop", Misfire: config.MisfireSkip}))
	rec := newRecorder()
	a := startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	advance(t, rec, clock, 10*time.Second) // 12:00:10 runs; its result records 12:00:20 ahead
	waitKind(t, rec, "the run", 1, func(e Event) bool { return e.Kind == Finished })
	ctx := context.Background()
	slot := shard.Slot{Job: "tick"}
	waitUntil(t, "the ahead record", 10*time.Second, func() bool {
		st, _, _, err := readAcquired(ctx, cli, "retract", slot)
		return err == nil && st.Started.Equal(sec(20)) && st.Finished.Equal(sec(10))
	})
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	st, _, _, err := readAcquired(ctx, cli, "retract", slot)
	if err != nil || !st.Started.Equal(sec(10)) || st.Unfinished() {
		t.Fatalf("after a graceful stop the state says started %v, finished %v; want 12:00:10 both", st.Started, st.Finished)
	}
}

// Each slot keeps history_limit records, newest overwriting oldest, and the
// first holder to write under a lower limit deletes the records past it (a
// state written before history_limit existed kept 100), so they do not stay
// in etcd, and in kira history, for ever.
func TestHistoryKeepsItsLimitAndTrimsWhenLowered(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	slot := shard.Slot{Job: "tick"}
	prefix := keyspace.History("history", "tick") + "0/"
	// What an earlier version left: 40 records and a state without a limit.
	for i := range 40 {
		old := history.Record{Job: "tick", ExecutionID: fmt.Sprintf("old-%d", i), ScheduledTime: t0.Add(-time.Hour + time.Duration(i)*time.Second), Outcome: "succeeded"}
		data, _ := json.Marshal(old)
		if _, err := cli.Put(ctx, fmt.Sprintf("%s%03d", prefix, i), string(data)); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := json.Marshal(history.SlotState{HistorySeq: 40})
	if _, err := cli.Put(ctx, keyspace.State("history", slot), string(data)); err != nil {
		t.Fatal(err)
	}
	clock := clock.NewManual(t0)
	cat := catalog("history", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop", HistoryLimit: 3}))
	rec := newRecorder()
	a := startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock})
	waitKind(t, rec, "a ready", 1, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
	for i := 1; i <= 5; i++ {
		clock.Advance(10 * time.Second)
		waitKind(t, rec, "a's run", i, func(e Event) bool { return e.Kind == Finished && e.Member == a.id })
	}
	// Records are written behind the runs; poll.
	waitUntil(t, "three records, the latest runs'", 10*time.Second, func() bool {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		hist, err := ops.ReadHistory(ctx, cli, "history", "tick", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 3 || len(hist) != 3 {
			t.Logf("%d keys, %d records", len(resp.Kvs), len(hist))
			return false
		}
		for i, r := range hist {
			if want := sec(50 - 10*i); r.Member != a.id || !r.ScheduledTime.Equal(want) {
				t.Logf("record %d: %s %v; want %v by this member", i, r.Member, r.ScheduledTime, want)
				return false
			}
		}
		return true
	})
}

// A manual trigger requested while the new holder raises its fences (after
// it read the waiting triggers, before it fires) runs once it has raised
// them, once, as does the trigger that was waiting when it took the slot.
func TestTriggerWhileTheFenceIsRaisedRunsOnce(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	early, err := ops.RequestRun(ctx, cli, "raising", []shard.Slot{{Job: "tick"}}) // waiting before anyone holds the slot
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog("raising", withDefaults(config.Job{Name: "tick", Schedule: "@every 1h", Handler: "noop"}),
		withDefaults(config.Job{Name: "other", Schedule: "@every 1h", Handler: "noop"}))
	hooked, release := make(chan struct{}), make(chan struct{})
	rec := newRecorder()
	startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{cfg: Config{OnAcquire: func(ctx context.Context, s shard.Slot, _ fencing.Claim) error {
		if s.Job == "tick" {
			close(hooked)
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}}})
	kiratest.Receive(t, hooked, 10*time.Second, "the hook") // tick's state and triggers have been read
	late, err := ops.RequestRun(ctx, cli, "raising", []shard.Slot{{Job: "tick"}})
	if err != nil {
		t.Fatal(err)
	}
	// Watch events come in order: once the member has seen this pause, it
	// has seen the trigger too.
	if err := ops.Pause(ctx, cli, "raising", "other"); err != nil {
		t.Fatal(err)
	}
	waitKind(t, rec, "the member to learn of the pause", 1, func(e Event) bool { return e.Kind == Paused && e.Slot.Job == "other" })
	close(release)
	evs := waitKind(t, rec, "both manual runs", 2, func(e Event) bool { return e.Kind == Finished && e.Cause == history.CauseManual })
	// A duplicate would come right behind: give it the time of another run.
	if _, err := ops.RequestRun(ctx, cli, "raising", []shard.Slot{{Job: "other"}}); err != nil {
		t.Fatal(err)
	}
	evs = waitKind(t, rec, "the marker run", 1, func(e Event) bool { return e.Kind == Finished && e.Slot.Job == "other" })
	ran := map[string]int{}
	for _, e := range started(evs, "") {
		if e.Slot.Job == "tick" && e.Cause == history.CauseManual {
			ran[e.Execution.ID]++
		}
	}
	if len(ran) != 2 || ran[early[0]] != 1 || ran[late[0]] != 1 {
		t.Fatalf("manual runs %v; want %s (waiting at acquisition) and %s (requested while raising), once each", ran, early[0], late[0])
	}
}

// A loop that falls behind by more than a period (a stalled process, a
// jumped clock) runs the fire it was late for and skips the ones in
// between, recorded as one skip record standing for all of them.
func TestFiresFallenBehindAreRecorded(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	cat := catalog("behind", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop"}))
	rec := newRecorder()
	startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	clock.Advance(35 * time.Second) // past the fires at :10, :20 and :30 at once
	waitKind(t, rec, "the late fire", 1, func(e Event) bool { return e.Kind == Finished })
	skipped := jobs.ExecutionID("tick", 0, sec(20))
	waitUntil(t, "the skip record of :20 and :30", 10*time.Second, func() bool {
		hist, err := ops.ReadHistory(context.Background(), cli, "behind", "tick", 0, 50)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range hist {
			if r.ExecutionID != skipped {
				continue
			}
			if r.Outcome != history.OutcomeSkipped || r.Error != "fell behind schedule" || r.Repeats != 1 ||
				r.LastScheduledTime == nil || !r.LastScheduledTime.Equal(sec(30)) {
				t.Fatalf("record %+v; want skipped, fell behind schedule, standing for :20 and :30", r)
			}
			return true
		}
		return false
	})
}

// Under fire-all a loop that fell behind runs the fires it passed, in
// order, one at a time, as a takeover's catch-ups: within the job's
// catchup_window (here 26 s from 12:00:45.5, so :10 is recorded as skipped); a fire-all job
// promises every fire, and a process paused for a moment must not drop
// them.
func TestFiresFallenBehindRunUnderFireAll(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	cat := catalog("behindall", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop",
		Misfire: config.MisfireFireAll, CatchupWindow: 26 * time.Second}))
	rec := newRecorder()
	n := startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	clock.Advance(45 * time.Second) // past the fires at :10 to :40 at once
	waitKind(t, rec, "the fires within the window", 3, func(e Event) bool { return e.Kind == Finished })
	var ran []time.Time
	for _, e := range started(rec.all(), n.id) {
		ran = append(ran, e.Execution.ScheduledTime)
	}
	if want := []time.Time{sec(20), sec(30), sec(40)}; !slices.EqualFunc(ran, want, time.Time.Equal) {
		t.Fatalf("ran %v; want %v, in order", ran, want)
	}
	skips := count(rec.all(), func(e Event) bool {
		return e.Kind == Skipped && e.Reason == "fell behind schedule" && e.Execution.ScheduledTime.Equal(sec(10))
	})
	if skips != 1 {
		t.Fatalf("%d skips of :10; want it skipped once, before the catchup_window", skips)
	}
}

// Under fire-all, a fire whose start etcd did not record goes back at the
// head of the backlog, held a moment, and the next fire's start is not
// recorded ahead meanwhile: the slot's recorded start stays at the fire
// that never ran. Recording 12:00:30 ahead (as the result of 12:00:20's
// unrecorded start did) made a new holder retry 12:00:30 as the in-doubt
// fire and never run 12:00:20. The test plays the loop.
func TestRefusedStartIsNotOvertakenByTheNextFire(t *testing.T) {
	cat := catalog("overtaken", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop", Misfire: config.MisfireFireAll}))
	s, _ := unrunScheduler(t, cat)
	sl := s.slots[shard.Slot{Job: "tick"}]
	t20 := time.Now().Truncate(10 * time.Second) // the last fire due, as the loop's clock sees it
	t10, t30 := t20.Add(-10*time.Second), t20.Add(10*time.Second)
	id20 := jobs.ExecutionID("tick", 0, t20)
	sl.phase, sl.token, sl.wanted = leading, 7, true
	sl.leadCtx, sl.cancelLead = context.WithCancel(context.Background())
	t.Cleanup(sl.cancelLead)
	sl.recorded = history.SlotState{Token: 7, Finished: t10, Started: t20, StartedID: id20, StartedAttempt: 1}
	s.scheduleNext(sl, t20) // t30 next
	sl.runs = map[uint64]context.CancelFunc{1: func() {}}
	s.running = 1
	f20 := fire{scheduled: t20, cause: history.CauseSchedule, attempt: 1, id: id20}
	s.runEnded(finishedRun{slot: sl.id, run: 1, fire: f20, exec: jobs.Execution{Job: "tick", Token: 7, ID: id20, ScheduledTime: t20},
		res: jobs.Result{Outcome: jobs.Failed, Err: errors.New("etcd refused the start")}, finished: time.Now(), notStarted: true})
	if !sl.recorded.Started.Equal(t20) || sl.ahead != nil {
		t.Fatalf("recorded start %v (ahead %v) after the start of %v was refused; want it, nothing ahead", sl.recorded.Started.Format(time.TimeOnly), sl.ahead != nil, t20.Format(time.TimeOnly))
	}
	if len(sl.owed.backlog) != 1 || !sl.owed.backlog[0].scheduled.Equal(t20) || !sl.owed.backlog[0].misfire {
		t.Fatalf("backlog %+v; want the refused fire at its head, a misfire", sl.owed.backlog)
	}
	s.startWaiting(sl, sl.owed.holdUntil.Add(-time.Millisecond))
	if len(sl.runs) != 0 || len(sl.owed.backlog) != 1 {
		t.Fatalf("the refused fire was started again before its hold of %v ended", startAgainDelay)
	}
	if s.arm(sl, t30.Add(-100*time.Millisecond)) {
		t.Fatal("the next fire was armed while the refused one waited to start again")
	}
}

// A slot the view stops preferring while its run is in flight leaves the
// timer heap until the run ends; preferred again before that, it fires from
// the fire it was to fire next, so the fires that fell due meanwhile are
// run, queued or recorded as skipped, as for a loop that fell behind. It
// was scheduled from now, and those fires were neither run nor recorded,
// and no takeover saw them: the slot never changed hands.
func TestFiresDueWhileUnwantedAreHandledWhenWantedAgain(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	cat := catalog("wantedagain", withDefaults(config.Job{Name: "slow", Schedule: "@every 10s", Partitions: 2, Handler: "block", Overlap: config.OverlapAllow}))
	rec := newRecorder()
	release := make(chan struct{})
	h := jobs.Handlers{"block": blockUntil(release)}
	a := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock})
	waitKind(t, rec, "a leads both", 2, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
	advance(t, rec, clock, 9500*time.Millisecond) // 12:00:10: both partitions start, and block
	waitKind(t, rec, "both started", 2, func(e Event) bool { return e.Kind == Started && e.Execution.ScheduledTime.Equal(sec(10)) })
	b := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock})
	var moved shard.Slot
	for s, o := range ringOwners(t, cat, a, b) {
		if o == b.id {
			moved = s
		}
	}
	if moved.Job == "" {
		t.Fatal("no slot moved to b")
	}
	other := shard.Slot{Job: "slow", Partition: 1 - moved.Partition}
	handled := func(s shard.Slot, at time.Time) int {
		return count(rec.all(), func(e Event) bool {
			return e.Slot == s && (e.Kind == Started || e.Kind == Skipped || e.Kind == Queued) && e.Execution.ScheduledTime.Equal(at)
		})
	}
	// a's loop has the view with b: moved is unwanted, its run in flight.
	kiratest.WaitUntil(t, "a's loop to see b", 10*time.Second, func() bool { return a.sched.Eligible()["slow"] == 2 })
	for _, at := range []time.Time{sec(20), sec(30)} {
		advance(t, rec, clock, 10*time.Second)
		waitKind(t, rec, "the partition that stayed handled "+at.Format(time.TimeOnly), 1, func(e Event) bool {
			return e.Slot == other && e.Kind == Started && e.Execution.ScheduledTime.Equal(at)
		})
		if handled(moved, at) != 0 {
			t.Fatalf("%s handled its fire at %s while a was not preferred for it: a had not seen the view", moved, at.Format(time.TimeOnly))
		}
	}
	if err := b.stop(); err != nil { // b leaves: a is preferred again, its run still in flight
		t.Fatal(err)
	}
	for _, at := range []time.Time{sec(20), sec(30)} {
		kiratest.WaitUntil(t, fmt.Sprintf("%s's fire at %s handled", moved, at.Format(time.TimeOnly)), 10*time.Second, func() bool { return handled(moved, at) > 0 })
	}
	close(release)
}

// heldBeforeItsFirstFire starts a member leading job (of one slot, whose
// handler is "h") in cluster, waits until its first fire, at 12:00:10, has
// its start recorded ahead in etcd, and then closes the gate in front of
// its writer: etcd's leader dies, and its commits hang until commitTimeout.
func heldBeforeItsFirstFire(t *testing.T, cluster string, job config.Job) (*node, *recorder, *clock.Manual, *gatedKV) {
	t.Helper()
	cli := etcdtest.Start(t).Client(t)
	clock := clock.NewManual(t0)
	rec := newRecorder()
	gk := newGatedKV()
	n := startNode(t, cli, catalog(cluster, withDefaults(job)), rec, jobs.Handlers{"h": noop}, nodeOpts{manual: clock, gate: gk})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	waitUntil(t, "10's start recorded ahead", 10*time.Second, func() bool {
		st, _ := stateKey(t, cli, cluster, shard.Slot{Job: job.Name})
		return st.Started.Equal(sec(10))
	})
	gk.close()
	return n, rec, clock, gk
}

// Under fire-all, a fire that falls due while the previous fire's start
// write hangs at etcd is decided once that start is: an overlap if it ran,
// a misfire if it did not. It was skipped as an overlap when the writer did
// not count as stalled yet (wall time, 500 ms): then the hung start failed
// (context deadline exceeded), that fire and the later ones ran, and the
// one skipped "as an overlap" with a run that never ran, never. Here 20's
// start (recorded ahead with 10's result) hangs, 30 falls due at once, the
// write fails after commitTimeout, and 20, 30 and 40 run.
func TestFireDueWhileAStartHangsIsNotLostWhenTheStartFails(t *testing.T) {
	n, rec, clock, gk := heldBeforeItsFirstFire(t, "hung", config.Job{Name: "tick", Schedule: "@every 10s", Handler: "h", Misfire: config.MisfireFireAll})
	if e := advance(t, rec, clock, 9500*time.Millisecond); e.Kind != Started {
		t.Fatalf("10 was %s; want started (its start was recorded ahead)", e.Kind)
	}
	kiratest.Receive(t, gk.blocked, 10*time.Second, "10's result, with 20's start recorded ahead, hanging at etcd")
	clock.Advance(10 * time.Second) // 12:00:20.5: 20 waits for its start record
	sl := n.sched.slots[shard.Slot{Job: "tick"}]
	waitUntil(t, "20 waiting for its start record", 10*time.Second, func() bool { return sl.unrecorded.Load() == 1 })
	e := advance(t, rec, clock, 10*time.Second) // 12:00:30.5, well within 500 ms of the hung commit
	t.Logf("30, due while 20's start hangs: %s (%s)", e.Kind, e.Reason)
	waitKind(t, rec, "20's start failing", 1, func(e Event) bool {
		return e.Kind == Finished && e.Execution.ScheduledTime.Equal(sec(20))
	})
	gk.open()                  // a new etcd leader
	clock.Advance(time.Second) // 20's hold (startAgainDelay) ends
	waitKind(t, rec, "20 run again", 1, func(e Event) bool { return e.Kind == Started && e.Execution.ScheduledTime.Equal(sec(20)) })
	clock.Advance(9 * time.Second) // 12:00:40.5
	waitKind(t, rec, "40 run", 1, func(e Event) bool { return e.Kind == Started && e.Execution.ScheduledTime.Equal(sec(40)) })
	wantRan(t, rec, n.id, sec(10), sec(20), sec(30), sec(40))
}

// Under fire-all, a fire whose job's timeout passes before etcd records its
// start failed to start, as one etcd refused: it is started again. It ended
// cancelled, and was never run.
func TestStartNotRecordedWithinTheTimeoutIsAFailedStart(t *testing.T) {
	n, rec, clock, gk := heldBeforeItsFirstFire(t, "slowstart", config.Job{Name: "tick", Schedule: "@every 10s", Handler: "h", Misfire: config.MisfireFireAll, Timeout: time.Second})
	advance(t, rec, clock, 9500*time.Millisecond)
	kiratest.Receive(t, gk.blocked, 10*time.Second, "10's result, with 20's start recorded ahead, hanging at etcd")
	clock.Advance(10 * time.Second)
	ended := func(e Event) bool { return e.Kind == Finished && e.Execution.ScheduledTime.Equal(sec(20)) }
	evs := waitKind(t, rec, "20 ended", 1, ended)
	if e := evs[slices.IndexFunc(evs, ended)]; e.Result.Outcome != jobs.Failed {
		t.Fatalf("20, its start not recorded within its timeout, ended %s (%v); want failed", e.Result.Outcome, e.Result.Err)
	}
	gk.open()
	clock.Advance(10 * time.Second)
	waitKind(t, rec, "30 run", 1, func(e Event) bool { return e.Kind == Started && e.Execution.ScheduledTime.Equal(sec(30)) })
	wantRan(t, rec, n.id, sec(10), sec(20), sec(30))
}
