package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/history/upstream"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/notify"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
)

// scripted is an upstream's handler: the runs named in fail fail (their
// first attempt only), and the runs named in hold wait until their channel
// is closed. A run is named
// "partition@hh:mm:ss" (its scheduled time).
type scripted struct {
	mu   sync.Mutex
	fail map[string]bool
	hold map[string]chan struct{}
}

func (h *scripted) handler(ctx context.Context) error {
	e, _ := jobs.FromContext(ctx)
	name := fmt.Sprintf("%d@%s", e.Partition, e.ScheduledTime.Format(time.TimeOnly))
	h.mu.Lock()
	fail, hold := h.fail[name], h.hold[name]
	delete(h.fail, name)
	h.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return errors.New("extract failed")
	}
	return nil
}

func isJob(kind EventKind, job string) func(Event) bool {
	return func(e Event) bool { return e.Kind == kind && e.Slot.Job == job }
}

// runsOf are the scheduled times of job's events of kind, partition p, in
// the order they came.
func runsOf(evs []Event, kind EventKind, job string, p int) []time.Time {
	var out []time.Time
	for _, e := range evs {
		if e.Kind == kind && e.Slot.Job == job && e.Slot.Partition == p {
			out = append(out, e.Execution.ScheduledTime)
		}
	}
	return out
}

// startLed starts n manual-clock members on cat and waits until each slot
// is held, fences raised, by the member the assignment prefers.
func startLed(t *testing.T, n int, cat *config.Catalog, rec *recorder, clock *clock.Manual, h jobs.Handlers) []*node {
	t.Helper()
	cli := etcdtest.Start(t).Client(t)
	var nodes []*node
	for range n {
		nodes = append(nodes, startNode(t, cli, cat, rec, h, nodeOpts{manual: clock}))
	}
	waitUntil(t, "every slot led by its owner, fences raised", 30*time.Second, func() bool {
		owners := ringOwners(t, cat, nodes...)
		if !leadersMatch(owners, nodes...) {
			return false
		}
		raised := map[shard.Slot]bool{}
		for _, e := range rec.all() {
			if e.Kind == Raised && owners[e.Slot] == e.Member {
				raised[e.Slot] = true
			}
		}
		return len(raised) == len(owners)
	})
	return nodes
}

func afterJobs(names ...string) []config.Upstream {
	var out []config.Upstream
	for _, n := range names {
		out = append(out, config.Upstream{Job: n})
	}
	return out
}

// A dependent of a job of 3 partitions, on 3 members: it fires once for
// each fire of its upstream, only once all 3 partitions have ended, with
// the upstream's scheduled time and the id a fire at that time has.
func TestDependentFiresOncePerUpstreamFire(t *testing.T) {
	clock := clock.NewManual(t0)
	cat := catalog("after", withDefaults(config.Job{Name: "a", Schedule: "@every 10s", Partitions: 3, Handler: "a"}),
		withDefaults(config.Job{Name: "b", After: afterJobs("a"), Handler: "ok"}))
	rec := newRecorder()
	held := make(chan struct{})
	h := &scripted{hold: map[string]chan struct{}{"2@12:00:10": held}}
	startLed(t, 3, cat, rec, clock, jobs.Handlers{"a": h.handler, "ok": noop})

	clock.Advance(10 * time.Second) // 12:00:10.5: a's 3 partitions fire; partition 2 holds
	waitKind(t, rec, "a's partitions 0 and 1 finished", 2, isJob(Finished, "a"))
	if kiratest.Poll(time.Second, func() bool { return count(rec.all(), isJob(Started, "b")) > 0 }) {
		t.Fatal("b started while a's partition 2 still ran")
	}
	close(held)
	waitKind(t, rec, "b's run after a's 12:00:10", 1, isJob(Finished, "b"))
	clock.Advance(10 * time.Second) // 12:00:20.5
	evs := waitKind(t, rec, "b's run after a's 12:00:20", 2, isJob(Finished, "b"))

	if got := runsOf(evs, Started, "b", 0); !slices.EqualFunc(got, []time.Time{sec(10), sec(20)}, time.Time.Equal) {
		t.Fatalf("b started %v; want once at 12:00:10 and once at 12:00:20", got)
	}
	firstB, aEnded := -1, 0
	for i, e := range evs {
		switch {
		case e.Kind == Finished && e.Slot.Job == "a" && e.Execution.ScheduledTime.Equal(sec(10)):
			aEnded++
		case e.Kind == Started && e.Slot.Job == "b":
			if want := jobs.ExecutionID("b", 0, e.Execution.ScheduledTime); e.Execution.ID != want || e.Cause != history.CauseSchedule {
				t.Fatalf("b's run %s (%s); want id %s, cause schedule", e.Execution.ID, e.Cause, want)
			}
			if firstB < 0 {
				firstB = i
				if aEnded != 3 {
					t.Fatalf("b started after %d of a's 3 partitions of 12:00:10 finished", aEnded)
				}
			}
		}
	}
	// More time: nothing fires b again.
	if kiratest.Poll(500*time.Millisecond, func() bool { return count(rec.all(), isJob(Started, "b")) > 2 }) {
		t.Fatalf("b ran again: %v", runsOf(rec.all(), Started, "b", 0))
	}
}

// A partition of the upstream fails: the dependent's fire at that time is
// recorded skipped with the cause, and notified as its notify: says; the
// next upstream fire runs it.
func TestDependentSkipsWithTheCause(t *testing.T) {
	clock := clock.NewManual(t0)
	hook := make(chan notify.Message, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m notify.Message
		if json.NewDecoder(r.Body).Decode(&m) == nil {
			hook <- m
		}
	}))
	defer srv.Close()
	cat := catalog("afterskip", withDefaults(config.Job{Name: "extract", Schedule: "@every 10s", Partitions: 2, Handler: "a"}),
		withDefaults(config.Job{Name: "load", After: afterJobs("extract"), Handler: "ok",
			Notify: []config.NotifyRule{{On: []string{"skipped"}, Webhook: srv.URL}}}))
	rec := newRecorder()
	h := &scripted{fail: map[string]bool{"1@12:00:10": true}}
	nodes := startLed(t, 2, cat, rec, clock, jobs.Handlers{"a": h.handler, "ok": noop})

	clock.Advance(10 * time.Second)
	evs := waitKind(t, rec, "load skipped", 1, isJob(Skipped, "load"))
	const cause = "upstream extract failed at 2026-11-29T12:00:10Z (partition 1)"
	for _, e := range evs {
		if e.Kind == Skipped && e.Slot.Job == "load" && (e.Reason != cause || !e.Execution.ScheduledTime.Equal(sec(10))) {
			t.Fatalf("load skipped at %v for %q; want 12:00:10 for %q", e.Execution.ScheduledTime, e.Reason, cause)
		}
	}
	if m := kiratest.Receive(t, hook, 15*time.Second, "the skip's notification"); m.Job != "load" || m.Outcome != history.OutcomeSkipped || m.Error != cause {
		t.Fatalf("notified %s %s %q; want load skipped with the cause", m.Job, m.Outcome, m.Error)
	}
	waitUntil(t, "the skip in load's history", 10*time.Second, func() bool {
		hist, err := ops.ReadHistory(context.Background(), nodes[0].sched.cli, "afterskip", "load", -1, -1)
		if err != nil {
			t.Fatal(err)
		}
		return len(hist) == 1 && hist[0].Outcome == history.OutcomeSkipped && hist[0].Error == cause &&
			hist[0].ExecutionID == jobs.ExecutionID("load", 0, sec(10))
	})
	clock.Advance(10 * time.Second)
	evs = waitKind(t, rec, "load runs after extract's 12:00:20", 1, isJob(Finished, "load"))
	if got := runsOf(evs, Started, "load", 0); !slices.EqualFunc(got, []time.Time{sec(20)}, time.Time.Equal) {
		t.Fatalf("load started %v; want only 12:00:20", got)
	}
}

// A chain a → b (2 partitions) → c, and d after b and c: each job runs
// once per logical time, each partition of b, and each only after every
// run it depends on ended.
func TestDependentChainAndFanIn(t *testing.T) {
	clock := clock.NewManual(t0)
	cat := catalog("afterchain", withDefaults(config.Job{Name: "a", Schedule: "@every 10s", Partitions: 2, Handler: "ok"}),
		withDefaults(config.Job{Name: "b", After: afterJobs("a"), Partitions: 2, Handler: "ok"}),
		withDefaults(config.Job{Name: "c", After: afterJobs("b"), Handler: "ok"}),
		withDefaults(config.Job{Name: "d", After: afterJobs("b", "c"), Handler: "ok"}))
	rec := newRecorder()
	startLed(t, 3, cat, rec, clock, jobs.Handlers{"ok": noop})
	clock.Advance(10 * time.Second)
	waitKind(t, rec, "d after 12:00:10", 1, isJob(Finished, "d"))
	clock.Advance(10 * time.Second)
	evs := waitKind(t, rec, "d after 12:00:20", 2, isJob(Finished, "d"))

	want := []time.Time{sec(10), sec(20)}
	for _, s := range []shard.Slot{{Job: "a"}, {Job: "a", Partition: 1}, {Job: "b"}, {Job: "b", Partition: 1}, {Job: "c"}, {Job: "d"}} {
		if got := runsOf(evs, Started, s.Job, s.Partition); !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Fatalf("%s started %v; want %v", s, got, want)
		}
	}
	upstreamsOf := map[string][]string{"b": {"a"}, "c": {"b"}, "d": {"b", "c"}}
	finished := map[string]int{} // job@time → index of its last partition's Finished
	for i, e := range evs {
		key := e.Slot.Job + "@" + e.Execution.ScheduledTime.Format(time.TimeOnly)
		switch e.Kind {
		case Finished:
			finished[key] = i
		case Started:
			for _, up := range upstreamsOf[e.Slot.Job] {
				upKey := up + "@" + e.Execution.ScheduledTime.Format(time.TimeOnly)
				if _, ok := finished[upKey]; !ok {
					t.Fatalf("%s started %s before %s finished", e.Slot, key, upKey)
				}
			}
		}
	}
}

// The dependent's holder is killed (its lease revoked) while its upstream
// runs; the upstream ends while nobody holds the dependent; the member
// that takes it over runs that fire once (misfire fire-once: a catch-up,
// under the fire's own id), and the next fires as usual.
func TestDependentTakenOverRunsOnce(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	up, down := map[string]string{"role": "up"}, map[string]string{"role": "down"}
	cat := catalog("aftertakeover", withDefaults(config.Job{Name: "a", Schedule: "@every 10s", Handler: "a", Placement: &config.Placement{Labels: up}}),
		withDefaults(config.Job{Name: "b", After: afterJobs("a"), Handler: "ok", Placement: &config.Placement{Labels: down}}))
	rec := newRecorder()
	held := make(chan struct{})
	h := &scripted{hold: map[string]chan struct{}{"0@12:00:20": held}}
	handlers := jobs.Handlers{"a": h.handler, "ok": noop}
	manual := func(labels map[string]string) *node {
		return startNode(t, cli, cat, rec, handlers, nodeOpts{manual: clock, labels: labels})
	}
	manual(up)
	first := manual(down)
	waitKind(t, rec, "a and b held", 2, func(e Event) bool { return e.Kind == Raised })
	clock.Advance(10 * time.Second) // 12:00:10.5
	waitKind(t, rec, "b after a's 12:00:10", 1, isJob(Finished, "b"))
	// Its result committed: a crash now leaves no fire of b in doubt.
	waitUntil(t, "b's result recorded", 10*time.Second, func() bool {
		hist, err := ops.ReadHistory(context.Background(), cli, "aftertakeover", "b", -1, -1)
		if err != nil {
			t.Fatal(err)
		}
		return len(hist) == 1 && hist[0].Outcome == string(jobs.Succeeded)
	})
	clock.Advance(10 * time.Second) // 12:00:20.5: a's run holds
	waitKind(t, rec, "a's 12:00:20 started", 2, isJob(Started, "a"))
	if _, err := cli.Revoke(context.Background(), first.member.Lease()); err != nil {
		t.Fatal(err)
	}
	first.done <- kiratest.Receive(t, first.done, 15*time.Second, "b's holder to give up") // left for its cleanup
	close(held)
	waitKind(t, rec, "a's 12:00:20 finished", 2, isJob(Finished, "a"))
	clock.Advance(time.Second) // 12:00:21.5: the next holder comes
	second := manual(down)
	evs := waitKind(t, rec, "b's catch-up of 12:00:20", 2, isJob(Finished, "b"))
	clock.Advance(9 * time.Second) // 12:00:30.5
	evs = waitKind(t, rec, "b after a's 12:00:30", 3, isJob(Finished, "b"))
	if got := runsOf(evs, Started, "b", 0); !slices.EqualFunc(got, []time.Time{sec(10), sec(20), sec(30)}, time.Time.Equal) {
		t.Fatalf("b started %v; want 12:00:10, 12:00:20, 12:00:30 once each", got)
	}
	for _, e := range evs {
		if e.Kind == Started && e.Slot.Job == "b" && e.Execution.ScheduledTime.Equal(sec(20)) &&
			(e.Member != second.id || e.Cause != history.CauseCatchup || e.Execution.ID != jobs.ExecutionID("b", 0, sec(20))) {
			t.Fatalf("b's 12:00:20 ran on %s as %s (%s); want the new holder, catchup, the fire's id", e.Member, e.Cause, e.Execution.ID)
		}
	}
}

// An upstream partition fails with a retry left: the dependent waits for
// the retry, and runs once after it succeeded.
func TestDependentWaitsForAnUpstreamRetry(t *testing.T) {
	clock := clock.NewManual(t0)
	cat := catalog("afterretry", withDefaults(config.Job{Name: "a", Schedule: "@every 10s", Partitions: 2, Handler: "a",
		Retries: config.Retries{Max: 1, Backoff: time.Second, MaxBackoff: time.Second}}),
		withDefaults(config.Job{Name: "b", After: afterJobs("a"), Handler: "ok"}))
	rec := newRecorder()
	h := &scripted{fail: map[string]bool{"1@12:00:10": true}}
	startLed(t, 2, cat, rec, clock, jobs.Handlers{"a": h.handler, "ok": noop})
	clock.Advance(10 * time.Second)
	waitKind(t, rec, "a's 2 partitions ended, one failed", 2, isJob(Finished, "a"))
	if kiratest.Poll(time.Second, func() bool {
		return count(rec.all(), func(e Event) bool { return e.Slot.Job == "b" && (e.Kind == Started || e.Kind == Skipped) }) > 0
	}) {
		t.Fatal("b started or skipped before a's retry")
	}
	clock.Advance(time.Second) // the retry's backoff
	evs := waitKind(t, rec, "b after a's retry", 1, isJob(Finished, "b"))
	if got := runsOf(evs, Started, "b", 0); !slices.EqualFunc(got, []time.Time{sec(10)}, time.Time.Equal) || count(evs, isJob(Skipped, "b")) > 0 {
		t.Fatalf("b started %v, skipped %d times; want one run at 12:00:10", got, count(evs, isJob(Skipped, "b")))
	}
	if count(evs, func(e Event) bool { return e.Kind == Started && e.Slot.Job == "a" && e.Attempt == 2 }) != 1 {
		t.Fatal("a's partition 1 was not retried before b ran")
	}
}

// The dependent's holder dies (its lease revoked) during its run: the next
// holder runs that fire again, once, under its id (the in-doubt fire), and
// nothing else of it.
func TestDependentInDoubtRunRerunsUnderItsID(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	up, down := map[string]string{"role": "up"}, map[string]string{"role": "down"}
	cat := catalog("afterdoubt", withDefaults(config.Job{Name: "a", Schedule: "@every 10s", Handler: "ok", Placement: &config.Placement{Labels: up}}),
		withDefaults(config.Job{Name: "b", After: afterJobs("a"), Handler: "b", Placement: &config.Placement{Labels: down}}))
	rec := newRecorder()
	held := make(chan struct{})
	h := &scripted{hold: map[string]chan struct{}{"0@12:00:10": held}}
	handlers := jobs.Handlers{"ok": noop, "b": h.handler}
	manual := func(labels map[string]string) *node {
		return startNode(t, cli, cat, rec, handlers, nodeOpts{manual: clock, labels: labels})
	}
	manual(up)
	first := manual(down)
	waitKind(t, rec, "a and b held", 2, func(e Event) bool { return e.Kind == Raised })
	clock.Advance(10 * time.Second)
	evs := waitKind(t, rec, "b's run started", 1, isJob(Started, "b"))
	original := evs[slices.IndexFunc(evs, isJob(Started, "b"))]
	if _, err := cli.Revoke(context.Background(), first.member.Lease()); err != nil {
		t.Fatal(err)
	}
	first.done <- kiratest.Receive(t, first.done, 15*time.Second, "b's holder to give up") // left for its cleanup
	close(held)
	second := manual(down)
	evs = waitKind(t, rec, "b's re-run", 1, func(e Event) bool { return e.Kind == Finished && e.Member == second.id })
	if got := runsOf(evs, Started, "b", 0); !slices.EqualFunc(got, []time.Time{sec(10), sec(10)}, time.Time.Equal) {
		t.Fatalf("b started %v; want 12:00:10 twice (the in-doubt re-run)", got)
	}
	rerun := evs[slices.IndexFunc(evs, func(e Event) bool { return e.Kind == Started && e.Member == second.id })]
	if rerun.Execution.ID != original.Execution.ID || rerun.Cause != history.CauseRetry || rerun.Attempt != 2 {
		t.Fatalf("re-run %s %s attempt %d; want %s, retry, attempt 2", rerun.Execution.ID, rerun.Cause, rerun.Attempt, original.Execution.ID)
	}
	if kiratest.Poll(500*time.Millisecond, func() bool { return count(rec.all(), isJob(Started, "b")) > 2 }) {
		t.Fatalf("b ran again: %v", runsOf(rec.all(), Started, "b", 0))
	}
}

// kira trigger --cascade: the dependents run after the manual run, at its
// requested time, down the chain; a plain manual run fires none of them.
func TestCascadeRunsTheDependentsOfAManualRun(t *testing.T) {
	clock := clock.NewManual(t0)
	cat := catalog("aftercascade", withDefaults(config.Job{Name: "a", Schedule: "@hourly", Partitions: 2, Handler: "ok"}),
		withDefaults(config.Job{Name: "b", After: afterJobs("a"), Handler: "ok"}),
		withDefaults(config.Job{Name: "c", After: afterJobs("b"), Handler: "ok"}))
	rec := newRecorder()
	nodes := startLed(t, 2, cat, rec, clock, jobs.Handlers{"ok": noop})
	cli := nodes[0].sched.cli
	slots := []shard.Slot{{Job: "a"}, {Job: "a", Partition: 1}}
	if _, err := ops.RequestRun(context.Background(), cli, "aftercascade", slots); err != nil {
		t.Fatal(err)
	}
	waitKind(t, rec, "a's manual runs", 2, isJob(Finished, "a"))
	ids, err := ops.RequestCascade(context.Background(), cli, "aftercascade", slots)
	if err != nil {
		t.Fatal(err)
	}
	evs := waitKind(t, rec, "c after the cascade", 1, isJob(Finished, "c"))
	var requested time.Time
	for _, e := range evs {
		if e.Kind == Started && e.Execution.ID == ids[0] {
			requested = e.Execution.ScheduledTime
		}
	}
	for _, job := range []string{"b", "c"} {
		if got := runsOf(evs, Started, job, 0); len(got) != 1 || !got[0].Equal(requested) {
			t.Fatalf("%s started %v; want once, at the cascade's requested time %v", job, got, requested)
		}
	}
	if i := slices.IndexFunc(evs, isJob(Started, "b")); evs[i].Execution.ID != jobs.ExecutionID("b", 0, requested) {
		t.Fatalf("b's run has id %s; want the fire's at %v", evs[i].Execution.ID, requested)
	}
	if kiratest.Poll(500*time.Millisecond, func() bool { return count(rec.all(), isJob(Started, "b")) > 1 }) {
		t.Fatalf("b ran again: %v", runsOf(rec.all(), Started, "b", 0))
	}
}

// A scheduled job that becomes a dependent (kira apply) stops its schedule
// at once, and fires after its upstream from then on: once per logical
// time, never also by its old schedule.
func TestJobBecomingADependentStopsItsSchedule(t *testing.T) {
	clock := clock.NewManual(t0)
	a := withDefaults(config.Job{Name: "a", Schedule: "@every 10s", Handler: "ok"})
	cat := catalog("afterchange", a, withDefaults(config.Job{Name: "b", Schedule: "@every 10s", Handler: "ok"}))
	rec := newRecorder()
	nodes := startLed(t, 2, cat, rec, clock, jobs.Handlers{"ok": noop})
	clock.Advance(10 * time.Second)
	waitKind(t, rec, "b's scheduled run", 1, isJob(Finished, "b"))
	waitKind(t, rec, "a's run", 1, isJob(Finished, "a"))
	dependent := catalog("afterchange", a, withDefaults(config.Job{Name: "b", After: afterJobs("a"), Handler: "ok"}))
	for _, n := range nodes {
		if err := n.sched.SetCatalog(dependent, 2); err != nil {
			t.Fatal(err)
		}
	}
	waitKind(t, rec, "the new catalog applied", 2, func(e Event) bool { return e.Kind == CatalogApplied })
	clock.Advance(10 * time.Second)
	evs := waitKind(t, rec, "b after a's 12:00:20", 2, isJob(Finished, "b"))
	if kiratest.Poll(500*time.Millisecond, func() bool { return count(rec.all(), isJob(Started, "b")) > 2 }) {
		evs = rec.all()
	}
	if got := runsOf(evs, Started, "b", 0); !slices.EqualFunc(got, []time.Time{sec(10), sec(20)}, time.Time.Equal) {
		t.Fatalf("b started %v; want 12:00:10 by its schedule, 12:00:20 after a, once each", got)
	}
	bAt := slices.IndexFunc(evs, func(e Event) bool {
		return e.Kind == Started && e.Slot.Job == "b" && e.Execution.ScheduledTime.Equal(sec(20))
	})
	aDone := count(evs[:bAt], func(e Event) bool {
		return e.Kind == Finished && e.Slot.Job == "a" && e.Execution.ScheduledTime.Equal(sec(20))
	})
	if aDone != 1 {
		t.Fatal("b's 12:00:20 started before a's had finished: by its old schedule")
	}
}

// What a new holder of a dependent owes for its upstream's fires, by when
// they ended: one that ended less than misfireThreshold before the takeover
// is late, not missed (as a scheduled fire is, catchUp): it runs under every
// policy, as a normal run. Older ones are misfires.
func TestDependentTakeoverOwesAFireThatEndedJustBefore(t *testing.T) {
	takeover := sec(30)
	a := config.Job{Name: "a", Partitions: 1}
	fires := upstream.NewFires(a)
	ended := map[int]time.Duration{10: 20 * time.Second, 20: 400 * time.Millisecond, 25: 100 * time.Millisecond} // logical time → ended this long before the takeover
	for s, ago := range ended {
		fires.Add(history.Record{Job: "a", ExecutionID: jobs.ExecutionID("a", 0, sec(s)), ScheduledTime: sec(s),
			StartedAt: sec(s), FinishedAt: takeover.Add(-ago), Outcome: string(jobs.Succeeded), Attempt: 1})
	}
	fires.Sort()
	for _, tc := range []struct {
		misfire config.Misfire
		want    []afterKind // for 12:00:10, 12:00:20, 12:00:25
	}{
		{config.MisfireSkip, []afterKind{afterMissed, afterRun, afterRun}},
		{config.MisfireFireOnce, []afterKind{afterMissed, afterRun, afterRun}},
		{config.MisfireFireAll, []afterKind{afterRun, afterRun, afterRun}},
	} {
		t.Run(string(tc.misfire), func(t *testing.T) {
			s := &Scheduler{upstreams: &upstreamRead{jobs: map[string]*upstream.Fires{"a": fires}}}
			b := withDefaults(config.Job{Name: "b", After: afterJobs("a"), Misfire: tc.misfire, CatchupWindow: time.Hour})
			// wanted false: afterNext leaves what it decided pending.
			sl := &slot{id: shard.Slot{Job: "b"}, job: &job{spec: b}, phase: leading,
				recorded: history.SlotState{Token: fencing.Token(1), Finished: sec(0)}}
			sl.after = afterState{acquiredAt: takeover}
			s.afterEvaluate(sl, takeover)
			if len(sl.after.pending) != 3 {
				t.Fatalf("pending %+v; want 12:00:10, 12:00:20 and 12:00:25", sl.after.pending)
			}
			for i, it := range sl.after.pending {
				if it.kind != tc.want[i] {
					t.Errorf("%s: kind %d (%s); want %d", it.t.Format(time.TimeOnly), it.kind, it.reason, tc.want[i])
				}
			}
			if !sl.after.pending[0].misfire {
				t.Error("12:00:10, ended 20s before the takeover, is not a misfire")
			}
			for _, late := range sl.after.pending[1:] {
				if late.misfire {
					t.Errorf("%s, ended under 500ms before the takeover, is a misfire; want a normal run", late.t.Format(time.TimeOnly))
				}
			}
		})
	}
}

// A routine rebalance (b's placement moves) while b's run of 12:00:10
// goes on, a's fire of 12:00:20 ended meanwhile: the old holder drains its
// run and hands b over without starting 12:00:20, which it had no chance to
// run. The new holder owes it as a normal run, even under misfire: skip.
func TestDependentDrainedInARebalanceRunsWhatItQueued(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	up, x, y := map[string]string{"role": "up"}, map[string]string{"role": "x"}, map[string]string{"role": "y"}
	a := withDefaults(config.Job{Name: "a", Schedule: "@every 10s", Handler: "ok", Placement: &config.Placement{Labels: up}})
	b := withDefaults(config.Job{Name: "b", After: afterJobs("a"), Handler: "b", Misfire: config.MisfireSkip, Placement: &config.Placement{Labels: x}})
	cat := catalog("afterdrain", a, b)
	rec := newRecorder()
	held := make(chan struct{})
	h := &scripted{hold: map[string]chan struct{}{"0@12:00:10": held}}
	handlers := jobs.Handlers{"ok": noop, "b": h.handler}
	var nodes []*node
	for _, l := range []map[string]string{up, x, y} {
		nodes = append(nodes, startNode(t, cli, cat, rec, handlers, nodeOpts{manual: clock, labels: l}))
	}
	waitKind(t, rec, "a and b held", 2, func(e Event) bool { return e.Kind == Raised })
	clock.Advance(10 * time.Second) // 12:00:10.5: b's 12:00:10 starts and holds
	waitKind(t, rec, "b's 12:00:10 started", 1, isJob(Started, "b"))
	clock.Advance(10 * time.Second) // 12:00:20.5: a's 12:00:20 ends; b's waits for its 12:00:10
	waitKind(t, rec, "a's 12:00:20 finished", 2, isJob(Finished, "a"))
	clock.Advance(3 * time.Second) // 12:00:23.5: b's run goes on
	b.Placement = &config.Placement{Labels: y}
	moved := catalog("afterdrain", a, b)
	for _, n := range nodes {
		if err := n.sched.SetCatalog(moved, 2); err != nil {
			t.Fatal(err)
		}
	}
	waitKind(t, rec, "the new catalog applied", 3, func(e Event) bool { return e.Kind == CatalogApplied })
	close(held) // the old holder's run ends; it hands b over
	evs := rec.waitFor(t, "b's 12:00:20 run or skip", 15*time.Second, func(evs []Event) bool {
		return slices.ContainsFunc(evs, func(e Event) bool {
			return e.Slot.Job == "b" && (e.Kind == Started || e.Kind == Skipped) && e.Execution.ScheduledTime.Equal(sec(20))
		})
	})
	for _, e := range evs {
		if e.Slot.Job != "b" || !e.Execution.ScheduledTime.Equal(sec(20)) {
			continue
		}
		switch {
		case e.Kind == Skipped:
			t.Fatalf("b's 12:00:20 skipped on the new holder: %s (policy %s); want it run", e.Reason, e.Policy)
		case e.Kind == Started && (e.Member != nodes[2].id || e.Cause != history.CauseSchedule):
			t.Fatalf("b's 12:00:20 started on %s as %s; want the new holder %s, schedule", e.Member, e.Cause, nodes[2].id)
		}
	}
}
