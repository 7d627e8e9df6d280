// Package clock is the scheduling clock: the source of time the scheduler
// reads and arms its timers on. Real is the wall clock; Manual moves only
// when a test tells it to; Offset is another clock read ahead or behind,
// for fault injection (kira run --clock-offset).
package clock

import (
	"sync"
	"time"
)

// Clock is the scheduler's source of time. Timing logic is tested with a
// Manual clock; the lease itself is never faked (tests use short real TTLs).
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the scheduler uses. It is re-armed for an
// absolute time: a duration computed from an earlier reading of the clock
// would drift by however long the caller took in between.
type Timer interface {
	C() <-chan time.Time
	ResetAt(when time.Time)
	Stop()
}

// Real is the wall clock with Go's monotonic readings.
type Real struct{}

func (Real) Now() time.Time { return time.Now() }

func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }

func (r realTimer) ResetAt(when time.Time) { r.t.Reset(time.Until(when)) }

func (r realTimer) Stop() { r.t.Stop() }

// Manual is a Clock that moves only when told to, for tests.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

// NewManual returns a clock reading now.
func NewManual(now time.Time) *Manual { return &Manual{now: now} }

// Now returns the clock's reading.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward and fires every timer that falls due.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for _, t := range c.timers {
		t.fireIfDue(c.now)
	}
}

func (c *Manual) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{clock: c, ch: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	t.arm(c.now, c.now.Add(d))
	return t
}

type manualTimer struct {
	clock  *Manual
	ch     chan time.Time
	when   time.Time
	active bool
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

// arm and fireIfDue run with the clock's lock held.
func (t *manualTimer) arm(now, when time.Time) {
	t.when, t.active = when, true
	t.fireIfDue(now)
}

func (t *manualTimer) fireIfDue(now time.Time) {
	if t.active && !now.Before(t.when) {
		t.active = false
		select {
		case t.ch <- now:
		default:
		}
	}
}

func (t *manualTimer) ResetAt(when time.Time) {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	select { // drop a stale tick, as time.Timer.Reset does since Go 1.23
	case <-t.ch:
	default:
	}
	t.arm(t.clock.now, when)
}

func (t *manualTimer) Stop() {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	t.active = false
}

// Offset is a clock that reads Base Offset ahead (or behind, if negative):
// a member whose wall clock is wrong. It exists for fault injection (kira run
// --clock-offset): Kira's safety must not depend on members' clocks agreeing,
// and the chaos suite proves it with a member 30 s off.
type Offset struct {
	Base   Clock
	Offset time.Duration
}

// Now returns Base's reading plus Offset.
func (c Offset) Now() time.Time { return c.Base.Now().Add(c.Offset) }

// NewTimer returns a timer of Base whose ResetAt takes this clock's times.
func (c Offset) NewTimer(d time.Duration) Timer {
	return offsetTimer{Timer: c.Base.NewTimer(d), offset: c.Offset}
}

type offsetTimer struct {
	Timer
	offset time.Duration
}

func (t offsetTimer) ResetAt(when time.Time) { t.Timer.ResetAt(when.Add(-t.offset)) }
