package gate

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is when the tests' manual clocks start.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 500_000_000, time.UTC)

// The releaser opens each gate at its instant, the earliest first, whatever
// the order the gates were asked for in, and wakes every run waiting there;
// it counts the runs that still wait in its starting count until they leave.
func TestReleaserOpensGatesAtTheirInstants(t *testing.T) {
	clock := clock.NewManual(t0)
	r := New(clock)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	late := r.Wait(t0.Add(2*time.Second), false)
	early, early2 := r.Wait(t0.Add(time.Second), false), r.Wait(t0.Add(time.Second), false)
	gone := r.Wait(t0.Add(time.Second), false)
	r.Leave(gone) // left before its gate opened: not counted when it opens
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
	r.Leave(early)
	r.Leave(early2)
	r.Leave(late) // left before its gate opened
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
	r := New(clock.NewManual(t0))
	a := r.Wait(t0.Add(time.Second), false)
	b := r.Wait(t0.Add(2*time.Second), true)
	c := r.Wait(t0.Add(2*time.Second), false)
	d := r.Wait(t0.Add(time.Second), true)
	e := r.Wait(t0.Add(2*time.Second), true)
	r.firstHold = time.Hour
	first, rest := r.due(t0.Add(2 * time.Second))
	if len(rest) != 0 || first[0].first == nil || first[0].first.n.Load() != 3 {
		t.Fatal("the others are woken now, not by the slow starts once started")
	}
	got := append(first, first[0].first.rest...)
	want := []*Place{d, b, e, a, c}
	if !slices.Equal(got, want) {
		name := map[*Place]string{a: "a", b: "b", c: "c", d: "d", e: "e"}
		var order []string
		for _, p := range got {
			order = append(order, name[p])
		}
		t.Fatalf("woken in the order %v; want d b e a c", order)
	}
	for _, p := range got {
		r.Leave(p)
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
	r := New(clock)
	r.firstHold = time.Hour
	at := t0.Add(time.Second)
	slow, slow2, fast := r.Wait(at, true), r.Wait(at, true), r.Wait(at, false)
	r.open(at)
	kiratest.Receive(t, slow.woken, 10*time.Second, "slow.woken")
	kiratest.Receive(t, slow2.woken, 10*time.Second, "slow2.woken")
	r.Leave(slow)
	select {
	case <-fast.woken:
		t.Fatal("the other run was woken before the slow starts started")
	default:
	}
	r.Leave(slow2)
	kiratest.Receive(t, fast.woken, 10*time.Second, "fast.woken")
	r.Leave(fast)

	// The hold ends the wait for a slow start that never starts.
	r.firstHold = time.Millisecond
	at = at.Add(time.Second)
	slow, fast = r.Wait(at, true), r.Wait(at, false)
	r.open(at)
	kiratest.Receive(t, fast.woken, 10*time.Second, "fast.woken")
	r.Leave(fast)
	r.Leave(slow)
	r.firstHold = time.Hour

	at = at.Add(time.Second)
	slow, fast = r.Wait(at, true), r.Wait(at, false)
	r.Leave(slow) // its context ended, say
	r.open(at)    // would wait an hour for it
	kiratest.Receive(t, fast.woken, 10*time.Second, "fast.woken")
	r.Leave(fast)
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

// BenchmarkReleaseFires is the fire path at the instant: n armed runs wait
// at one gate; the releaser opens it; each run reads the clock and reports
// how late it started. It reports the p50 and max of that lateness (no etcd,
// no executor: what the process itself adds).
func BenchmarkReleaseFires(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			r := New(clock.Real{})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { r.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			var p50, worst time.Duration
			for i := 0; i < b.N; i++ {
				at := time.Now().Add(20 * time.Millisecond)
				late := make([]time.Duration, n)
				var wg sync.WaitGroup
				for j := 0; j < n; j++ {
					p := r.Wait(at, false)
					wg.Add(1)
					go func() {
						defer wg.Done()
						select {
						case <-p.woken:
						case <-time.After(10 * time.Second):
							b.Error("a gate never opened")
						}
						late[j] = time.Since(at)
						r.Leave(p)
					}()
				}
				wg.Wait()
				sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
				p50 += late[n/2]
				worst = max(worst, late[n-1])
			}
			b.ReportMetric(float64(p50.Microseconds())/float64(b.N), "p50-µs")
			b.ReportMetric(float64(worst.Microseconds()), "max-µs")
		})
	}
}
