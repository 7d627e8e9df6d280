// Package gate holds the gates a scheduler's armed fires wait at, and their
// opener, which opens each at its instant: one goroutine and one timer per
// scheduler, however many fires share an instant. A fire armed ahead of its
// instant (the scheduler's Config.ArmAhead) waits at its instant's gate
// (Gates.Wait) and leaves it once it started or gave up (Gates.Leave); the
// fires of an opened gate that have not started yet hold back the
// scheduler's other work until they have (Gates.Settled).
package gate

import (
	"container/heap"
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kira-scheduler/kira/internal/clock"
)

// Gates are the gates that armed fires wait at, and their opener, which
// opens each at its instant (see the scheduler's Config.ArmAhead): one
// goroutine and one timer per scheduler, however many fires share an
// instant.
//
// Go's timers wake a parked process up to a millisecond late (the runtime
// sleeps in epoll_wait, whose timeout is in milliseconds), and a timer kept
// by a busy processor later still. So the opener wakes spinWindow early
// and yields in a loop until the instant, then opens the gate: the fires'
// goroutines become runnable together, at the instant. Spinning is rationed
// (at most once per spinEvery), so slots whose jitter spreads their fires
// over every millisecond cost one timer wake each, not a busy core.
type Gates struct {
	clock clock.Clock
	added chan struct{} // rung (capacity one) when a gate is added
	// firstHold is firstHold, but for tests.
	firstHold time.Duration
	// starting counts the fires whose gate opened at their instant that
	// have not started yet. While there are any, the scheduler's loop puts
	// off recording results and started runs put off their bookkeeping
	// (Settled): a second's worth of fires is woken at once, and that work
	// would otherwise run between their starts.
	starting *startCount

	mu    sync.Mutex
	gates map[int64]*gate // by instant, Unix ns; removed when opened
	order instants
}

type gate struct {
	first   []*Place // woken before places: see Wait
	places  []*Place
	waiters int // armed runs waiting here
}

// A Place is one armed run's wait at its instant's gate. Each has a channel
// of its own, so the run waits with a plain receive: a select on a channel
// shared by every run of the instant would have each of them lock it again
// on waking, at the instant.
type Place struct {
	at     int64 // the instant, Unix ns
	woken  chan struct{}
	once   sync.Once
	opened atomic.Bool // by the opener, which counted the run in starting
	// first is the group of slow starts this run belongs to, set (before
	// opened) when its gate opens; gone (under the gates' lock) says it
	// left before that.
	first *firstStarts
	gone  bool
}

// firstStarts counts the slow starts woken first at an instant that have not
// started yet; the last to start wakes rest, the instant's other runs, or a
// timer does after the gates' firstHold.
type firstStarts struct {
	n     atomic.Int64
	rest  []*Place
	timer *time.Timer
	once  sync.Once
}

func (f *firstStarts) started() {
	if f.n.Add(-1) == 0 {
		f.timer.Stop()
		f.wakeRest()
	}
}

// wakeRest wakes the others, once; called by the last slow start to start, or
// by the timer (which must not read itself: it may fire before due stores it).
func (f *firstStarts) wakeRest() {
	f.once.Do(func() {
		for _, p := range f.rest {
			p.Wake()
		}
	})
}

// firstHold bounds how long the other runs of an instant wait for its slow
// starts (see Gates.open): a fork and exec alone took 1.4 ms (p50, kira
// bench --sh-probe), and many commands at one instant must not hold up the
// others for longer.
const firstHold = 5 * time.Millisecond

// Wake ends the wait: the gate opened, or the run's context ended.
func (p *Place) Wake() { p.once.Do(func() { close(p.woken) }) }

// Woken is closed once the wait ended (Wake).
func (p *Place) Woken() <-chan struct{} { return p.woken }

// maxStartHold bounds how long the fires of one opened gate hold up other work
// (settled): a fire whose start waits on etcd must not hold up everything.
const maxStartHold = 50 * time.Millisecond

// startCount is a count of starting fires with a channel, settled(), closed
// once the count is zero or the count has been above zero for hold. A
// decrement that leaves the count above zero, and settled, take no lock: a
// second's worth of fires does both at once, on every core.
type startCount struct {
	hold  time.Duration
	n     atomic.Int64
	quiet atomic.Pointer[chan struct{}]

	mu sync.Mutex // serialises the changes of quiet
}

func newStartCount(hold time.Duration) *startCount {
	c := &startCount{hold: hold}
	q := closed()
	c.quiet.Store(&q)
	return c
}

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

func (c *startCount) Add(d int64) {
	if d < 0 && c.n.Add(d) > 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.n.Add(d)
		if q := *c.quiet.Load(); isClosed(q) {
			ch := make(chan struct{})
			c.quiet.Store(&ch)
			time.AfterFunc(c.hold, func() {
				c.mu.Lock()
				defer c.mu.Unlock()
				if *c.quiet.Load() == ch && !isClosed(ch) {
					close(ch)
				}
			})
		}
		return
	}
	if n := c.n.Load(); n <= 0 {
		if n < 0 {
			c.n.CompareAndSwap(n, 0) // never below: a miscount must not hold work back
		}
		if q := *c.quiet.Load(); !isClosed(q) {
			close(q)
		}
	}
}

func (c *startCount) Load() int64 { return c.n.Load() }

// settled returns a channel closed once no fire is starting, or once the
// fires starting have held up other work for the count's hold.
func (c *startCount) settled() <-chan struct{} { return *c.quiet.Load() }

// Settled returns a channel closed once no fire whose gate opened is still
// starting, or once the fires starting have held up other work for
// maxStartHold.
func (r *Gates) Settled() <-chan struct{} { return r.starting.settled() }

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

const (
	spinWindow = time.Millisecond
	spinEvery  = 50 * time.Millisecond
)

// New returns gates on clock, with no gate yet; Run opens them.
func New(clock clock.Clock) *Gates {
	return &Gates{clock: clock, added: make(chan struct{}, 1), gates: map[int64]*gate{}, firstHold: firstHold,
		starting: newStartCount(maxStartHold)}
}

// Wait registers an armed run for the instant at and returns its place,
// woken at (or soon after) at. The run calls Leave once it started, or gave
// up, whether or not the gate opened; whatever else ends its wait (its
// context) calls the place's Wake.
//
// The places of runs whose start is slow (first: a command's fork and exec)
// are woken before the others of their instant. Go runs the goroutines made
// runnable together roughly in the order they were woken, and a second's
// worth of fires takes milliseconds to go through: a process started last
// would come out late by that and by its own fork. Held by
// TestSlowStartsAreWokenFirst.
func (r *Gates) Wait(at time.Time, first bool) *Place {
	k := at.UnixNano()
	p := &Place{at: k, woken: make(chan struct{})}
	r.mu.Lock()
	g, ok := r.gates[k]
	if !ok {
		g = &gate{}
		r.gates[k] = g
		heap.Push(&r.order, k)
	}
	if first {
		g.first = append(g.first, p)
	} else {
		g.places = append(g.places, p)
	}
	g.waiters++
	r.mu.Unlock()
	if !ok {
		select { // a bell already rung and not yet answered says the same
		case r.added <- struct{}{}:
		default:
		}
	}
	return p
}

// Leave ends an armed run's wait at its place. Once the gate is open, the
// run was counted in starting (open counts before it wakes anyone): no
// lock then, since a second's worth of runs leave together.
func (r *Gates) Leave(p *Place) {
	if p.opened.Load() {
		r.started(p)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.opened.Load() {
		r.started(p)
		return
	}
	p.gone = true
	r.gates[p.at].waiters-- // left before its gate opened
}

func (r *Gates) started(p *Place) {
	if p.first != nil {
		p.first.started()
	}
	r.starting.Add(-1)
}

func (r *Gates) earliest() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.order) == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, r.order[0]), true
}

// open opens every gate whose instant is not after now and wakes the runs
// waiting there, outside the lock so that arming goes on meanwhile. The slow
// starts (commands) are woken first, and the others once those have started
// (their processes exec'd), up to firstHold later: the others' work would take
// the CPU a new process needs for its exec. The opener does not wait for
// them: the last slow start to start wakes the
// others (see firstStarts).
func (r *Gates) open(now time.Time) {
	first, rest := r.due(now)
	for _, p := range first {
		p.Wake()
	}
	for _, p := range rest {
		p.Wake()
	}
}

// due takes the gates whose instant is not after now, counts their runs in
// starting, and returns the places to wake now, in order: the first
// places of all those gates, then the others unless a slow start is among
// the first (they are then its firstStarts').
func (r *Gates) due(now time.Time) (first, rest []*Place) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var opened []*gate
	for len(r.order) > 0 && r.order[0] <= now.UnixNano() {
		k := heap.Pop(&r.order).(int64)
		g := r.gates[k]
		delete(r.gates, k)
		r.starting.Add(int64(g.waiters))
		opened = append(opened, g)
		first = append(first, g.first...)
		rest = append(rest, g.places...)
	}
	var group *firstStarts
	for _, p := range first {
		if !p.gone && len(rest) > 0 {
			if group == nil {
				group = &firstStarts{rest: rest}
			}
			group.n.Add(1)
			p.first = group
		}
	}
	if group != nil {
		// Before any place is marked opened: a run leaving then may be the
		// last slow start, and wakes rest at once.
		group.timer = time.AfterFunc(r.firstHold, group.wakeRest)
		rest = nil
	}
	for _, g := range opened {
		for _, p := range g.first {
			p.opened.Store(true)
		}
		for _, p := range g.places {
			p.opened.Store(true)
		}
	}
	return first, rest
}

// Run opens gates until ctx ends. Fires still waiting then are the
// scheduler's to cancel (their contexts end with their slots').
func (r *Gates) Run(ctx context.Context) {
	timer := r.clock.NewTimer(time.Hour)
	defer timer.Stop()
	var lastSpin time.Time
	for {
		next, ok := r.earliest()
		if !ok {
			select {
			case <-r.added:
				continue
			case <-ctx.Done():
				return
			}
		}
		spin := time.Since(lastSpin) >= spinEvery
		wake := next
		if spin {
			wake = next.Add(-spinWindow)
		}
		if r.clock.Now().Before(wake) {
			timer.ResetAt(wake)
			select {
			case <-timer.C():
			case <-r.added: // perhaps an earlier instant
				continue
			case <-ctx.Done():
				return
			}
		}
		if spin && r.clock.Now().Before(next) {
			// Bounded by the real clock too, so a test's manual clock that
			// stops just short of the instant is waited for by the timer.
			lastSpin = time.Now()
			for limit := lastSpin.Add(2 * spinWindow); r.clock.Now().Before(next) && time.Now().Before(limit); {
				runtime.Gosched()
			}
		}
		if now := r.clock.Now(); !now.Before(next) {
			r.open(now)
		}
	}
}

// instants is a min-heap of Unix ns.
type instants []int64

func (h instants) Len() int { return len(h) }

func (h instants) Less(i, j int) bool { return h[i] < h[j] }

func (h instants) Swap(i, j int) { h[i], h[j] = h[j], h[i] }

func (h *instants) Push(x any) { *h = append(*h, x.(int64)) }

func (h *instants) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Start returns new gates for a scheduler on clock, opening, and the
// function that stops them when the scheduler stops.
func Start(clock clock.Clock) (*Gates, func()) {
	r := New(clock)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	return r, func() { cancel(); <-done }
}
