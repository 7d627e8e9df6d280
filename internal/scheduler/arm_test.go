package scheduler

import (
	"context"
	"maps"
	"slices"
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

// The releaser opens each gate at its instant, the earliest first, whatever
// the order the gates were asked for in, and wakes every run waiting there;
// it counts the runs that still wait in its starting count until they leave.
func TestReleaserOpensGatesAtTheirInstants(t *testing.T) {
	clock := clock.NewManual(t0)
	r := newGates(clock)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	late := r.wait(t0.Add(2*time.Second), false)
	early, early2 := r.wait(t0.Add(time.Second), false), r.wait(t0.Add(time.Second), false)
	gone := r.wait(t0.Add(time.Second), false)
	r.leave(gone) // left before its gate opened: not counted when it opens
	clock.Advance(time.Second - time.Nanosecond)
	select {
	case <-early.woken:
		t.Fatal("opened before its instant")
	case <-time.After(3 * spinWindow): // longer than a spin: the releaser waits on its timer by then
	}
	clock.Advance(time.Nanosecond)
	kiratest.Receive(t, early.woken, 10*time.Second, "early.woken")
	kiratest.Receive(t, early2.woken, 10*time.Second, "early2.woken")
	if n := r.starting.Load(); n != 2 {
		t.Fatalf("%d fires starting after the gate opened; want the 2 that waited", n)
	}
	r.leave(early)
	r.leave(early2)
	r.leave(late) // left before its gate opened
	if n := r.starting.Load(); n != 0 {
		t.Fatalf("%d fires starting after all left; want 0", n)
	}
	select {
	case <-late.woken:
		t.Fatal("the later gate opened with the earlier one")
	default:
	}
	clock.Advance(time.Second)
	kiratest.Receive(t, late.woken, 10*time.Second, "late.woken")
	if n := r.starting.Load(); n != 0 {
		t.Fatalf("%d fires starting after a gate nobody waits at opened; want 0", n)
	}
}

// The places of slow starts (commands) are woken before the others of
// their instant, and before those of an earlier instant opened with them;
// otherwise in the order the runs armed.
func TestSlowStartsAreWokenFirst(t *testing.T) {
	r := newGates(clock.NewManual(t0))
	a := r.wait(t0.Add(time.Second), false)
	b := r.wait(t0.Add(2*time.Second), true)
	c := r.wait(t0.Add(2*time.Second), false)
	d := r.wait(t0.Add(time.Second), true)
	e := r.wait(t0.Add(2*time.Second), true)
	r.firstHold = time.Hour
	first, rest := r.due(t0.Add(2 * time.Second))
	if len(rest) != 0 || first[0].first == nil || first[0].first.n.Load() != 3 {
		t.Fatal("the others are woken now, not by the slow starts once started")
	}
	got := append(first, first[0].first.rest...)
	want := []*place{d, b, e, a, c}
	if !slices.Equal(got, want) {
		name := map[*place]string{a: "a", b: "b", c: "c", d: "d", e: "e"}
		var order []string
		for _, p := range got {
			order = append(order, name[p])
		}
		t.Fatalf("woken in the order %v; want d b e a c", order)
	}
	for _, p := range got {
		r.leave(p)
	}
	if n := r.starting.Load(); n != 0 {
		t.Fatalf("%d fires starting after all left; want 0", n)
	}
}

// The other runs of an instant are woken once its slow starts have started
// (left their places), not before, or once the hold is over; a slow start
// that left before its gate opened holds nobody up.
func TestOthersWaitForTheSlowStarts(t *testing.T) {
	clock := clock.NewManual(t0)
	r := newGates(clock)
	r.firstHold = time.Hour
	at := t0.Add(time.Second)
	slow, slow2, fast := r.wait(at, true), r.wait(at, true), r.wait(at, false)
	r.open(at)
	kiratest.Receive(t, slow.woken, 10*time.Second, "slow.woken")
	kiratest.Receive(t, slow2.woken, 10*time.Second, "slow2.woken")
	r.leave(slow)
	select {
	case <-fast.woken:
		t.Fatal("the other run was woken before the slow starts started")
	default:
	}
	r.leave(slow2)
	kiratest.Receive(t, fast.woken, 10*time.Second, "fast.woken")
	r.leave(fast)

	// The hold ends the wait for a slow start that never starts.
	r.firstHold = time.Millisecond
	at = at.Add(time.Second)
	slow, fast = r.wait(at, true), r.wait(at, false)
	r.open(at)
	kiratest.Receive(t, fast.woken, 10*time.Second, "fast.woken")
	r.leave(fast)
	r.leave(slow)
	r.firstHold = time.Hour

	at = at.Add(time.Second)
	slow, fast = r.wait(at, true), r.wait(at, false)
	r.leave(slow) // its context ended, say
	r.open(at)    // would wait an hour for it
	kiratest.Receive(t, fast.woken, 10*time.Second, "fast.woken")
	r.leave(fast)
	if n := r.starting.Load(); n != 0 {
		t.Fatalf("%d fires starting after all left; want 0", n)
	}
}

// A start count's settled channel closes when the last starting fire left,
// or once fires have been starting for the hold: a start that waits on etcd
// must not hold back every result.
func TestStartCountSettlesWhenEmptyOrAfterItsHold(t *testing.T) {
	c := newStartCount(time.Hour)
	if !isClosed(c.settled()) {
		t.Fatal("settled with nothing started: want closed")
	}
	c.Add(2)
	s := c.settled()
	c.Add(-1)
	if isClosed(s) {
		t.Fatal("settled with a fire still starting")
	}
	c.Add(-1)
	if !isClosed(s) {
		t.Fatal("not settled after the last fire left")
	}

	c = newStartCount(10 * time.Millisecond)
	c.Add(1)
	kiratest.Receive(t, c.settled(), 10*time.Second, "settled") // the hold ends it; the fire never leaves
	if n := c.Load(); n != 1 {
		t.Fatalf("count %d after the hold; want 1 (the hold settles, it does not forget)", n)
	}
	c.Add(1) // the next release holds again
	s = c.settled()
	if isClosed(s) {
		t.Fatal("a new release after a hold ran out is not held")
	}
	c.Add(-2)
	if !isClosed(s) {
		t.Fatal("not settled after every fire left")
	}
}
