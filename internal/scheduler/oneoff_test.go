package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
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

// oneOffCatalog is a job that fires hourly, so only one-off runs run in
// the minutes a test moves its clock by.
func oneOffCatalog(cluster string) *config.Catalog {
	return catalog(cluster, withDefaults(config.Job{Name: "tick", Schedule: "@every 1h", Handler: "noop"}))
}

// seenControl waits until the member has seen every control key written
// before now: watch events come in order, so once it has seen the pause of
// a job paused now (a name of its own, in no catalog) it has seen the rest.
func seenControl(t *testing.T, cli *clientv3.Client, rec *recorder, cluster string) {
	t.Helper()
	marker := fmt.Sprintf("seen-%d", time.Now().UnixNano())
	if err := ops.Pause(context.Background(), cli, cluster, marker); err != nil {
		t.Fatal(err)
	}
	waitKind(t, rec, "the member to see the control keys", 1, func(e Event) bool { return e.Slot.Job == marker && e.Kind == Paused })
}

func manualStarts(evs []Event) []Event {
	var out []Event
	for _, e := range started(evs, "") {
		if e.Slot.Job == "tick" && e.Cause == history.CauseManual {
			out = append(out, e)
		}
	}
	return out
}

// triggerKeys counts the trigger keys of job tick, started or not.
func triggerKeys(t *testing.T, cli *clientv3.Client, cluster string) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), keyspace.Control(cluster)+"tick/trigger/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

func waiting(t *testing.T, cli *clientv3.Client, cluster string) []ops.WaitingRun {
	t.Helper()
	w, err := ops.WaitingRuns(context.Background(), cli, cluster, "tick")
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// A one-off run waits for its time (listed meanwhile), runs once then with
// its own id and its time as scheduled time, and never again.
func TestOneOffRunsOnceAtItsTime(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	rec := newRecorder()
	startNode(t, cli, oneOffCatalog("oneoff"), rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	at := t0.Add(25 * time.Second)
	ids, err := ops.RequestRunAt(context.Background(), cli, "oneoff", []shard.Slot{{Job: "tick"}}, at)
	if err != nil {
		t.Fatal(err)
	}
	seenControl(t, cli, rec, "oneoff")
	if w := waiting(t, cli, "oneoff"); len(w) != 1 || w[0].ID != ids[0] || !w[0].At.Equal(at) {
		t.Fatalf("waiting runs %+v; want %s at %s", w, ids[0], at)
	}
	clock.Advance(20 * time.Second)
	seenControl(t, cli, rec, "oneoff") // a round trip through the loop
	if m := manualStarts(rec.all()); len(m) != 0 {
		t.Fatalf("started %d runs before their time", len(m))
	}
	clock.Advance(5 * time.Second)
	evs := waitKind(t, rec, "the one-off run", 1, func(e Event) bool { return e.Kind == Finished && e.Execution.ID == ids[0] })
	m := manualStarts(evs)
	if len(m) != 1 || m[0].Execution.ID != ids[0] || !m[0].Execution.ScheduledTime.Equal(at) || m[0].At.Before(at) {
		t.Fatalf("one-off starts %+v; want one, %s, scheduled and started at %s", m, ids[0], at)
	}
	kiratest.WaitUntil(t, "the one-off's key deleted with its result", 10*time.Second, func() bool { return triggerKeys(t, cli, "oneoff") == 0 })
	clock.Advance(time.Minute)
	seenControl(t, cli, rec, "oneoff")
	if m := manualStarts(rec.all()); len(m) != 1 {
		t.Fatalf("the one-off started %d times; want once", len(m))
	}
	if _, err := ops.CancelRun(context.Background(), cli, "oneoff", ids[0]); !errors.Is(err, ops.ErrNotWaiting) {
		t.Fatalf("cancelling a run that ran: %v; want ErrNotWaiting", err)
	}
	kiratest.WaitUntil(t, "the one-off's record", 10*time.Second, func() bool {
		r, ok, err := ops.FindRun(context.Background(), cli, "oneoff", "tick", ids[0])
		return err == nil && ok && r.Outcome == "succeeded" && r.Cause == history.CauseManual
	})
}

// A one-off run outlives its holder: a member that takes the slot over
// runs a waiting one at its time, and one whose time passed while nobody
// held the slot at once, each once.
func TestOneOffSurvivesAChangeOfHolder(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	rec := newRecorder()
	first := startNode(t, cli, oneOffCatalog("handover"), rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	ctx := context.Background()
	late, err := ops.RequestRunAt(ctx, cli, "handover", []shard.Slot{{Job: "tick"}}, t0.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	later, err := ops.RequestRunAt(ctx, cli, "handover", []shard.Slot{{Job: "tick"}}, t0.Add(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	seenControl(t, cli, rec, "handover")
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30 * time.Second) // the first one's time passes while nobody holds the slot
	second := startNode(t, cli, oneOffCatalog("handover"), rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock})
	evs := waitKind(t, rec, "the late one-off", 1, func(e Event) bool { return e.Kind == Finished && e.Execution.ID == late[0] })
	if m := manualStarts(evs); len(m) != 1 || m[0].Member != second.id || !m[0].At.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("starts %+v; want the late one-off only, by the new holder at once", m)
	}
	seenControl(t, cli, rec, "handover")
	if n := count(rec.all(), func(e Event) bool { return e.Kind == Started && e.Execution.ID == later[0] }); n != 0 {
		t.Fatalf("the waiting one-off started before its time")
	}
	clock.Advance(30 * time.Second)
	evs = waitKind(t, rec, "the waiting one-off", 1, func(e Event) bool { return e.Kind == Finished && e.Execution.ID == later[0] })
	if s := started(evs, second.id); !slices.ContainsFunc(s, func(e Event) bool { return e.Execution.ID == later[0] && !e.At.Before(t0.Add(60*time.Second)) }) {
		t.Fatalf("starts %+v; want %s by the new holder at its time", s, later[0])
	}
	clock.Advance(time.Minute)
	seenControl(t, cli, rec, "handover")
	ran := map[string]int{}
	for _, e := range manualStarts(rec.all()) {
		ran[e.Execution.ID]++
	}
	if len(ran) != 2 || ran[late[0]] != 1 || ran[later[0]] != 1 {
		t.Fatalf("one-off runs %v; want %s and %s once each", ran, late[0], later[0])
	}
}

// A cancelled one-off run never runs, and a second cancel says it is not
// waiting.
func TestCancelledOneOffNeverRuns(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	rec := newRecorder()
	startNode(t, cli, oneOffCatalog("cancel"), rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	ctx := context.Background()
	ids, err := ops.RequestRunAt(ctx, cli, "cancel", []shard.Slot{{Job: "tick"}}, t0.Add(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	seenControl(t, cli, rec, "cancel")
	if w, err := ops.CancelRun(ctx, cli, "cancel", ids[0]); err != nil || w.ID != ids[0] {
		t.Fatalf("cancel: %+v, %v", w, err)
	}
	if _, err := ops.CancelRun(ctx, cli, "cancel", ids[0]); !errors.Is(err, ops.ErrNotWaiting) {
		t.Fatalf("second cancel: %v; want ErrNotWaiting", err)
	}
	seenControl(t, cli, rec, "cancel")
	clock.Advance(time.Minute)
	seenControl(t, cli, rec, "cancel")
	if m := manualStarts(rec.all()); len(m) != 0 {
		t.Fatalf("a cancelled one-off started: %+v", m)
	}
}

// A cancel that races the start has one answer: the holder has dispatched
// the run and its start write waits for etcd when the cancel deletes the
// key; the start then finds the key gone and the run never starts. A start
// that committed first makes the cancel fail instead.
func TestCancelRacingTheStartHasOneAnswer(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	rec := newRecorder()
	gk := newGatedKV()
	n := startNode(t, cli, oneOffCatalog("race"), rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock, gate: gk})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	ctx := context.Background()
	var ids []string
	for range 2 { // two requests: one request's runs of a slot would share an id
		id, err := ops.RequestRunAt(ctx, cli, "race", []shard.Slot{{Job: "tick"}}, t0.Add(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id[0])
	}
	ids2, err := ops.RequestRunAt(ctx, cli, "race", []shard.Slot{{Job: "tick"}}, t0.Add(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	seenControl(t, cli, rec, "race")
	// With the writer idle, the first commit at the closed gate is the start's.
	kiratest.WaitUntil(t, "the writer idle", 10*time.Second, func() bool { q, f := n.sched.writer.Queued(); return q == 0 && f == 0 })
	gk.close()
	clock.Advance(10 * time.Second)
	kiratest.Receive(t, gk.blocked, 10*time.Second, "the start write at the closed gate")
	if _, err := ops.CancelRun(ctx, cli, "race", ids[0]); err != nil {
		t.Fatalf("cancel while the start waits for etcd: %v", err)
	}
	gk.open()
	cancelled := waitKind(t, rec, "the cancelled run's end", 1, func(e Event) bool { return e.Kind == Finished && e.Execution.ID == ids[0] })
	for _, e := range cancelled {
		if e.Kind == Started && e.Execution.ID == ids[0] {
			t.Fatalf("the cancelled run started")
		}
		if e.Kind == Finished && e.Execution.ID == ids[0] && e.Result.Outcome != jobs.Cancelled {
			t.Fatalf("the cancelled run ended %s; want cancelled", e.Result.Outcome)
		}
	}
	clock.Advance(10 * time.Second)
	waitKind(t, rec, "the next one-off", 1, func(e Event) bool { return e.Kind == Finished && e.Execution.ID == ids2[0] })
	if _, err := ops.CancelRun(ctx, cli, "race", ids2[0]); !errors.Is(err, ops.ErrNotWaiting) {
		t.Fatalf("cancel after the start: %v; want ErrNotWaiting", err)
	}
	if m := manualStarts(rec.all()); len(m) != 2 || m[0].Execution.ID != ids[1] || m[1].Execution.ID != ids2[0] {
		t.Fatalf("starts %+v; want %s then %s", m, ids[1], ids2[0])
	}
}

// A manual run whose start etcd refused is retried (retries:), and the
// retry's start marks the trigger, its result deletes it: it runs once,
// and leaves no key for a later holder to run it again.
func TestManualRunRetriesAfterARefusedStartRunOnce(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	rec := newRecorder()
	cat := catalog("refusedtrigger", withDefaults(config.Job{Name: "tick", Schedule: "@every 1h", Handler: "noop",
		Retries: config.Retries{Max: 1, Backoff: time.Second, MaxBackoff: time.Second}}))
	gk := newGatedKV()
	startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock, gate: gk})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	ctx := context.Background()
	gk.refusing(errors.New("etcd refuses"))
	ids, err := ops.RequestRun(ctx, cli, "refusedtrigger", []shard.Slot{{Job: "tick"}})
	if err != nil {
		t.Fatal(err)
	}
	waitKind(t, rec, "the refused start", 1, func(e Event) bool {
		return e.Kind == Finished && e.Execution.ID == ids[0] && e.Result.Outcome == jobs.Failed
	})
	gk.refusing(nil)
	clock.Advance(2 * time.Second) // past the retry's backoff
	waitKind(t, rec, "the retry", 1, func(e Event) bool {
		return e.Kind == Finished && e.Execution.ID == ids[0] && e.Result.Outcome == jobs.Succeeded
	})
	if n := count(rec.all(), func(e Event) bool { return e.Kind == Started && e.Execution.ID == ids[0] }); n != 1 {
		t.Fatalf("the manual run started %d times; want once", n)
	}
	kiratest.WaitUntil(t, "the trigger deleted with the result", 10*time.Second, func() bool { return triggerKeys(t, cli, "refusedtrigger") == 0 })
}

// A manual run whose holder crashes mid-run is in doubt: its trigger is
// still marked started, and the next holder runs it again, once, as a
// retry with the same id; its result deletes the trigger. A cancel meanwhile
// says it has started.
func TestManualRunInDoubtRerunsWithSameID(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	cat := catalog("indoubt", withDefaults(config.Job{Name: "tick", Schedule: "@every 1h", Handler: "block"}))
	rec := newRecorder()
	g := newGate()
	a := startNode(t, cli, cat, rec, jobs.Handlers{"block": g.handler}, nodeOpts{manual: clock})
	waitKind(t, rec, "a ready", 1, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
	ctx := context.Background()
	ids, err := ops.RequestRunAt(ctx, cli, "indoubt", []shard.Slot{{Job: "tick"}}, t0.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	seenControl(t, cli, rec, "indoubt")
	clock.Advance(10 * time.Second)
	waitKind(t, rec, "a started", 1, func(e Event) bool { return e.Kind == Started && e.Execution.ID == ids[0] })
	g.waitEntered(t, "the run recorded and really running")
	if _, err := ops.CancelRun(ctx, cli, "indoubt", ids[0]); !errors.Is(err, ops.ErrNotWaiting) || !strings.Contains(err.Error(), "has started") {
		t.Fatalf("cancel of a running run: %v; want ErrNotWaiting, started", err)
	}
	// a crashes mid-run: its lease is gone, its run never finishes as a's.
	if _, err := cli.Revoke(ctx, a.member.Lease()); err != nil {
		t.Fatal(err)
	}
	a.done <- kiratest.Receive(t, a.done, 30*time.Second, "a to give up") // and leave the result for its cleanup
	g.open()
	b := startNode(t, cli, cat, rec, jobs.Handlers{"block": g.handler}, nodeOpts{manual: clock})
	evs := waitKind(t, rec, "b re-runs the run in doubt", 1, func(e Event) bool { return e.Kind == Finished && e.Member == b.id })
	rerun := started(evs, b.id)
	if len(rerun) != 1 || rerun[0].Execution.ID != ids[0] || rerun[0].Cause != history.CauseRetry || rerun[0].Attempt != 2 ||
		!rerun[0].Execution.ScheduledTime.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("b's runs %+v; want %s once, retry, attempt 2, scheduled at its time", rerun, ids[0])
	}
	kiratest.WaitUntil(t, "the trigger deleted with the result", 10*time.Second, func() bool { return triggerKeys(t, cli, "indoubt") == 0 })
	clock.Advance(time.Minute)
	seenControl(t, cli, rec, "indoubt")
	if n := count(rec.all(), func(e Event) bool { return e.Kind == Started && e.Execution.ID == ids[0] }); n != 2 {
		t.Fatalf("the run started %d times; want twice (a's, and b's retry)", n)
	}
}

// A manual run whose result write etcd refused once still runs once: every
// later write of the slot deletes its trigger, the resign of a graceful stop
// too, so the next holder finds no trigger marked started to run again.
// Only the result's own write deleted it once, and a graceful handover
// later re-ran the finished run as a retry.
func TestManualRunWhoseResultWriteFailedRunsOnce(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	cat := catalog("failedresult", withDefaults(config.Job{Name: "tick", Schedule: "@every 1h", Handler: "block"}))
	rec := newRecorder()
	g := newGate()
	gate := newGatedKV()
	a := startNode(t, cli, cat, rec, jobs.Handlers{"block": g.handler}, nodeOpts{manual: clock, gate: gate})
	waitKind(t, rec, "a ready", 1, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
	ids, err := ops.RequestRun(context.Background(), cli, "failedresult", []shard.Slot{{Job: "tick"}})
	if err != nil {
		t.Fatal(err)
	}
	waitKind(t, rec, "a started the manual run", 1, func(e Event) bool { return e.Kind == Started && e.Execution.ID == ids[0] })
	g.waitEntered(t, "the run really running")
	gate.refusing(errInjected)
	g.open()
	waitKind(t, rec, "a finished it", 1, func(e Event) bool { return e.Kind == Finished && e.Execution.ID == ids[0] })
	kiratest.WaitUntil(t, "the result's write refused", 10*time.Second, func() bool {
		gate.mu.Lock()
		defer gate.mu.Unlock()
		return gate.hurt > 0
	})
	gate.refusing(nil)
	if n := triggerKeys(t, cli, "failedresult"); n != 1 {
		t.Fatalf("%d trigger keys after the refused result; want the started one", n)
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if n := triggerKeys(t, cli, "failedresult"); n != 0 {
		t.Fatalf("%d trigger keys after a's graceful stop; want none: its resign deletes the ended run's", n)
	}
	b := startNode(t, cli, cat, rec, jobs.Handlers{"block": g.handler}, nodeOpts{manual: clock})
	waitKind(t, rec, "b ready", 1, func(e Event) bool { return e.Kind == Raised && e.Member == b.id })
	seenControl(t, cli, rec, "failedresult")
	if n := count(rec.all(), func(e Event) bool { return e.Kind == Started && e.Execution.ID == ids[0] }); n != 1 {
		t.Fatalf("the manual run started %d times; want once", n)
	}
}
