package scheduler

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/kiratest"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
)

// A fire armed ahead of its time starts at its instant, not when it was
// armed; a graceful stop while it waits takes it back at once (the stop does
// not wait for the instant), and the next holder runs that fire, once, with
// the same execution id.
func TestArmedFireStartsAtItsInstantAndGoesWithTheSlot(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	cat := catalog("arm", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "count"}))
	rec := newRecorder()
	armed := make(chan shard.Slot, 10)
	entered := make(chan struct{}, 10)
	h := jobs.Handlers{"count": func(context.Context) error { entered <- struct{}{}; return nil }}
	a := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock,
		grace: 10 * time.Minute, // a stop that waited for the armed fire would hang the test
		armed: func(s shard.Slot) { armed <- s }})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })

	// 12:00:10 fires the ordinary way (the clock jumps past the arming
	// time); its result records 12:00:20 as started ahead.
	advance(t, rec, clock, sec(10).Sub(t0))
	waitKind(t, rec, "the first run recorded", 1, func(e Event) bool { return e.Kind == Finished })
	kiratest.Receive(t, entered, 10*time.Second, "entered")

	clock.Advance(sec(20).Sub(clock.Now()) - DefaultArmAhead/2)
	if s := kiratest.Receive(t, armed, 10*time.Second, "the fire armed"); s != (shard.Slot{Job: "tick"}) {
		t.Fatalf("armed %v", s)
	}
	select {
	case <-entered:
		t.Fatal("the armed fire ran before its time")
	case <-time.After(200 * time.Millisecond): // real time for a wrongly released run to show; the clock stays put
	}
	clock.Advance(DefaultArmAhead / 2)
	evs := waitKind(t, rec, "the armed fire started", 2, func(e Event) bool { return e.Kind == Started })
	if e := started(evs, "")[1]; !e.Execution.ScheduledTime.Equal(sec(20)) || !e.At.Equal(sec(20)) {
		t.Fatalf("started at %v for %v; want at its time, 12:00:20", e.At, e.Execution.ScheduledTime)
	}
	waitKind(t, rec, "the armed fire recorded", 2, func(e Event) bool { return e.Kind == Finished })
	kiratest.Receive(t, entered, 10*time.Second, "entered")

	// Armed for 12:00:30, then stopped.
	clock.Advance(sec(30).Sub(clock.Now()) - DefaultArmAhead/2)
	kiratest.Receive(t, armed, 10*time.Second, "armed")
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	b := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock})
	waitKind(t, rec, "b holds the slot", 1, func(e Event) bool { return e.Kind == Raised && e.Member == b.id })
	clock.Advance(DefaultArmAhead / 2)
	evs = waitKind(t, rec, "12:00:30 ran", 1, func(e Event) bool {
		return e.Kind == Finished && e.Execution.ScheduledTime.Equal(sec(30))
	})
	var at30 []Event
	for _, e := range started(evs, "") {
		if e.Execution.ScheduledTime.Equal(sec(30)) {
			at30 = append(at30, e)
		}
	}
	want := jobs.ExecutionID("tick", 0, sec(30))
	if len(at30) != 1 || at30[0].Member != b.id || at30[0].Execution.ID != want {
		t.Fatalf("12:00:30 started %d times (%v); want once, by the next holder, as %s", len(at30), at30, want)
	}
}

// A slot handed over before its next fire, whose start the old holder
// recorded ahead (endLeadership leaves that record), has that fire armed by
// the new holder like any other: recorded again under its token, the fire
// waits at its gate and starts at its instant, once, not after a round trip
// to etcd begun at its time (takeOverAhead).
func TestAFireHandedOverBeforeItsTimeIsArmed(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	cat := catalog("handarm", withDefaults(config.Job{Name: "split", Schedule: "@every 10s", Partitions: 6, Handler: "noop"}))
	rec := newRecorder()
	h := jobs.Handlers{"noop": func(context.Context) error { return nil }}
	armedB := make(chan shard.Slot, 10)
	a := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock})
	waitKind(t, rec, "a leads every slot", 6, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
	b := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock, armed: func(s shard.Slot) { armedB <- s }})
	// Every slot a gave up is raised by b.
	evs := rec.waitFor(t, "the slots a gave up raised by b", 15*time.Second, func(evs []Event) bool {
		released := count(evs, func(e Event) bool { return e.Kind == Released && e.Member == a.id })
		return released > 0 && count(evs, func(e Event) bool { return e.Kind == Raised && e.Member == b.id }) == released
	})
	handed := map[shard.Slot]bool{}
	for _, e := range evs {
		if e.Kind == Raised && e.Member == b.id {
			handed[e.Slot] = true
		}
	}

	clock.Advance(sec(10).Sub(clock.Now()) - DefaultArmAhead/2)
	armed := map[shard.Slot]bool{}
	for range handed {
		armed[kiratest.Receive(t, armedB, 10*time.Second, "b arming a slot handed over")] = true
	}
	if !maps.Equal(armed, handed) {
		t.Fatalf("b armed %v; want the slots handed over to it, %v", armed, handed)
	}
	clock.Advance(DefaultArmAhead / 2)
	evs = waitKind(t, rec, "every slot's 12:00:10 started", 6, func(e Event) bool { return e.Kind == Started && e.Execution.ScheduledTime.Equal(sec(10)) })
	bySlot := map[shard.Slot]int{}
	for _, e := range started(evs, "") {
		if !e.Execution.ScheduledTime.Equal(sec(10)) {
			continue
		}
		bySlot[e.Slot]++
		if want := map[bool]string{true: b.id, false: a.id}[handed[e.Slot]]; e.Member != want || !e.At.Equal(sec(10)) {
			t.Fatalf("%v's 12:00:10 started by %s at %v; want by %s at its instant", e.Slot, e.Member, e.At, want)
		}
	}
	for s, n := range bySlot {
		if n != 1 {
			t.Fatalf("%v's 12:00:10 started %d times; want once", s, n)
		}
	}
}
