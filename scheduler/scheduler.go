package scheduler

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/jobs"
	"github.com/kira-scheduler/kira/membership"
	"github.com/kira-scheduler/kira/shard"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// ElectionPrefix is where a cluster's slot elections live:
// election/<job>/<partition>/<lease id>, written by concurrency.Election.
func ElectionPrefix(cluster string) string { return membership.ClusterPrefix(cluster) + "election/" }

// ElectionKeyPrefix is the election of one slot.
func ElectionKeyPrefix(cluster string, s shard.Slot) string {
	return ElectionPrefix(cluster) + s.String()
}

// DefaultGrace bounds how long a graceful stop waits for in-flight executions.
const DefaultGrace = 30 * time.Second

// DefaultArmAhead is Config.ArmAhead's default: enough for a member to arm
// thousands of fires of the same second (kira bench: about 10 µs each) while
// sharing two cores with other members and etcd, even when its loop is still
// busy with the previous second's results. At 100 ms, 13 of 140 seconds of
// 10,000-slot bench runs had part of their fires armed after their instant
// (up to 211 ms late, and so started late); at 300 ms, none of 80.
const DefaultArmAhead = 300 * time.Millisecond

// resignTimeout bounds releasing one slot; lease expiry is the safety net.
const resignTimeout = 5 * time.Second

// ownedWait bounds how long Run waits for its campaign goroutines after it
// stopped. etcd's Election.Campaign resigns on cancel with the client's own
// context, so on an unreachable etcd it returns only when the client closes.
const ownedWait = resignTimeout + time.Second

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// campaignRetry is the pause before a failed campaign is tried again.
const campaignRetry = 500 * time.Millisecond

// Config holds the scheduler's optional settings.
type Config struct {
	// Handlers resolves catalog jobs that name an in-process Go handler.
	Handlers jobs.Handlers
	// Clock defaults to RealClock.
	Clock Clock
	// Grace bounds the wait for in-flight executions on a graceful stop; default DefaultGrace.
	Grace time.Duration
	// OnEvent, if set, is called for every event: from the scheduler's loop,
	// and for Started from the execution's own goroutine at the moment it
	// starts (so it must be safe for concurrent use). It must not block: hand
	// the event off.
	OnEvent func(Event)
	// ArmAhead is how long before a fire's time the loop prepares it, when the
	// slot is free and the fire's start is already recorded: the execution's
	// goroutine is made then and waits at a gate the releaser opens at the
	// instant, so at the instant nothing is left to do but start, however
	// many slots fire together. Default DefaultArmAhead; negative turns arming off. A
	// pause that arrives while a fire is armed applies from the next fire.
	ArmAhead time.Duration
	// OnAcquire, if set, is called (off the loop) each time this member wins a
	// slot, before the slot's first execution, after the job's fence_url or
	// fence_command. It
	// raises the fences of the slot's protected resources to the new token
	// (for example pgfence's Raise), so an ex-leader cannot slip a write in
	// before the first execution. If it fails, nothing runs: the slot is given
	// up and campaigned for again after a pause. Its ctx ends when the slot is lost.
	OnAcquire func(ctx context.Context, slot shard.Slot, claim fencing.Claim) error
	// Tracer defaults to the global OpenTelemetry tracer provider's.
	Tracer trace.Tracer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Scheduler runs, on one member, the slots the ring prefers it for.
type Scheduler struct {
	member *membership.Member
	views  *membership.Views
	cli    *clientv3.Client
	cfg    Config
	jobs   map[string]*job

	// Fed by goroutines the loop owns; read only by the loop.
	results chan campaignResult
	// campaigning bounds the campaigns talking to etcd at once (see
	// maxCampaigning); the others wait in line, in waiting (the loop's).
	campaigning  chan struct{}
	campaignsDue *campaignBell
	waiting      []queuedCampaign
	finished     *finishedRuns
	resigned     chan resignedSlot
	deleted      chan deletedKey
	created      chan createdKey
	raised       chan raisedFence
	retries      chan retryFire
	control      chan []controlEvent
	stopped      chan struct{} // closed when Run no longer reads the channels above

	writer  *stateWriter
	release *releaser
	// armedHook, if set (by tests, before Run), is called by the loop for
	// each fire it arms.
	armedHook func(shard.Slot)
	// seenSelf is set once a view contained this member.
	seenSelf bool
	// running counts executions in flight over all slots (the runs maps).
	running int
	// stopping is set when Run's loop has returned: nothing is campaigned for
	// any more, whatever the view says.
	stopping bool
	// cleanupCtx bounds the deletes of our own keys (resigns, withdrawn
	// candidacies); it is cancelled when the lease is lost, since the lease's
	// revoke or expiry deletes them all anyway, and an etcd that cannot
	// renew the lease would make each of them wait out its timeout.
	cleanupCtx    context.Context
	cancelCleanup context.CancelFunc

	catalogChanged chan struct{}
	// Guarded by mu: the catalog waiting for the loop, and the one it runs.
	nextCatalog    map[string]*job
	nextCatalogRev int64
	catalogRev     int64
	paused         map[string]bool // jobs paused with kira pause
	// triggering holds the manual triggers dispatched and not yet finished,
	// so a trigger seen twice (a watch restarted) starts once.
	triggering map[string]bool

	slots map[shard.Slot]*slot
	heap  slotHeap
	byKey map[string]*slot // leader key → slot, for deletions seen by the watch
	wg    sync.WaitGroup   // campaign, resign, execution and watch goroutines

	mu       sync.Mutex
	snapshot map[shard.Slot]fencing.Token
}

type campaignResult struct {
	slot     shard.Slot
	gen      uint64
	election *concurrency.Election
	err      error
}

// finishedRuns is where execution goroutines leave their results, for the
// loop to take in batches: put never blocks, and rings bell (capacity one) so
// the loop knows there is something to take. A lock-free stack: thousands of
// runs of one second end together, and a mutex here made them queue for
// each other (kira bench).
type finishedRuns struct {
	head atomic.Pointer[finishedNode]
	bell chan struct{}
}

type finishedNode struct {
	run  finishedRun
	next *finishedNode
}

func newFinishedRuns() *finishedRuns { return &finishedRuns{bell: make(chan struct{}, 1)} }

func (f *finishedRuns) put(r finishedRun) {
	n := &finishedNode{run: r}
	for {
		n.next = f.head.Load()
		if f.head.CompareAndSwap(n.next, n) {
			break
		}
	}
	ring(f.bell)
}

// ring sends on a bell, a channel of capacity one, without blocking: a bell
// already rung and not yet answered says the same.
func ring(bell chan<- struct{}) {
	select {
	case bell <- struct{}{}:
	default:
	}
}

// take returns what was put since the last take, in the order it was put.
// It reverses the list in place instead of copying it into a slice: at
// 10,000 slots firing together, growing that slice made 6 % of the bytes the
// process allocated, the embedded etcd's included (kira bench, heap profiles
// around the lateness window).
func (f *finishedRuns) take() iter.Seq[finishedRun] {
	var oldest *finishedNode
	for n := f.head.Swap(nil); n != nil; {
		next := n.next
		n.next = oldest
		oldest, n = n, next
	}
	return func(yield func(finishedRun) bool) {
		for n := oldest; n != nil; n = n.next {
			if !yield(n.run) {
				return
			}
		}
	}
}

type finishedRun struct {
	slot       shard.Slot
	run        uint64
	fire       fire
	exec       jobs.Execution
	res        jobs.Result
	started    time.Time
	finished   time.Time
	notStarted bool // its start could not be recorded, so it did not run
}

type raisedFence struct {
	slot     shard.Slot
	token    fencing.Token
	st       SlotState
	triggers []fire
	err      error
}

type retryFire struct {
	slot  shard.Slot
	token fencing.Token
	fire  fire
	// backlog puts the fire at the head of the slot's backlog instead of
	// dispatching it: a fire that never started, kept in order.
	backlog bool
}

type deletedKey struct {
	key string
	rev int64 // the revision of the delete
}

// createdKey is one of our candidacy keys being created.
type createdKey struct {
	slot shard.Slot
	key  string
	rev  int64 // its create revision
}

type resignedSlot struct {
	slot shard.Slot
	gen  uint64
}

// New prepares a scheduler for cat on member; views must be running.
func New(member *membership.Member, views *membership.Views, cat *config.Catalog, cfg Config) (*Scheduler, error) {
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	switch {
	case cfg.ArmAhead == 0:
		cfg.ArmAhead = DefaultArmAhead
	case cfg.ArmAhead < 0:
		cfg.ArmAhead = 0
	}
	if cfg.Tracer == nil {
		cfg.Tracer = otel.Tracer("github.com/kira-scheduler/kira/scheduler")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Scheduler{
		member: member, views: views, cli: member.Session().Client(), cfg: cfg,
		jobs:           map[string]*job{},
		results:        make(chan campaignResult),
		campaigning:    make(chan struct{}, maxCampaigning),
		campaignsDue:   &campaignBell{bell: make(chan struct{}, 1)},
		finished:       newFinishedRuns(),
		resigned:       make(chan resignedSlot),
		deleted:        make(chan deletedKey, 64),
		created:        make(chan createdKey, 64),
		raised:         make(chan raisedFence),
		retries:        make(chan retryFire),
		control:        make(chan []controlEvent, 16),
		writer:         newStateWriter(member.Session().Client()),
		paused:         map[string]bool{},
		triggering:     map[string]bool{},
		stopped:        make(chan struct{}),
		slots:          map[shard.Slot]*slot{},
		catalogChanged: make(chan struct{}, 1),
		byKey:          map[string]*slot{},
		snapshot:       map[shard.Slot]fencing.Token{},
	}
	s.cleanupCtx, s.cancelCleanup = context.WithCancel(context.Background())
	prepared, err := prepareJobs(cat, cfg.Handlers)
	if err != nil {
		return nil, err
	}
	s.install(prepared, time.Time{})
	return s, nil
}

// prepareJobs parses a catalog's jobs into dispatchable form.
func prepareJobs(cat *config.Catalog, handlers jobs.Handlers) (map[string]*job, error) {
	out := map[string]*job{}
	for _, spec := range cat.Jobs {
		if spec.Partitions < 1 {
			return nil, fmt.Errorf("scheduler: job %s has %d partitions; a catalog from config.Parse has at least 1", spec.Name, spec.Partitions)
		}
		sched, err := spec.ParsedSchedule()
		if err != nil {
			return nil, fmt.Errorf("scheduler: job %s: %w", spec.Name, err)
		}
		if spec.HistoryLimit <= 0 { // a catalog built in code, not parsed
			spec.HistoryLimit = config.DefaultHistoryLimit
		}
		ex, err := jobs.ForJob(spec, handlers)
		if err != nil {
			return nil, fmt.Errorf("scheduler: %w", err)
		}
		out[spec.Name] = &job{spec: spec, schedule: sched, executor: ex, fence: jobs.FenceForJob(spec)}
	}
	return out, nil
}

// install makes prepared the set of jobs: new slots are created, slots of
// removed jobs (or partitions) are marked removed (released after their
// in-flight runs, then dropped), and slots of changed jobs take the new
// definition, a new schedule taking effect from its next fire after now.
func (s *Scheduler) install(prepared map[string]*job, now time.Time) {
	s.jobs = prepared
	for id, sl := range s.slots {
		j, ok := prepared[id.Job]
		if !ok || id.Partition >= j.spec.Partitions {
			sl.removed = true
			continue
		}
		changed := !reflect.DeepEqual(sl.job.spec, j.spec)
		sl.job, sl.removed = j, false
		if changed && sl.heapIndex >= 0 && !now.IsZero() {
			// A fire armed under the old schedule is taken back; one that
			// already started is not fired again under the new one.
			s.withdrawArmed(sl)
			from := now
			if sl.armed != nil {
				from = latest(now, sl.armed.ahead.scheduled)
			}
			s.scheduleNext(sl, from)
		}
	}
	for name, j := range prepared {
		for p := 0; p < j.spec.Partitions; p++ {
			id := shard.Slot{Job: name, Partition: p}
			if _, ok := s.slots[id]; !ok {
				s.slots[id] = &slot{id: id, job: j, heapIndex: -1}
			}
		}
	}
}

// SetCatalog makes the scheduler converge to cat, stored at revision rev,
// without a restart: added jobs start, removed jobs stop after their
// in-flight runs, changed jobs take effect at their next fire. A catalog
// whose jobs cannot be prepared (an unregistered handler) is refused whole.
func (s *Scheduler) SetCatalog(cat *config.Catalog, rev int64) error {
	prepared, err := prepareJobs(cat, s.cfg.Handlers)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.nextCatalog, s.nextCatalogRev = prepared, rev
	s.mu.Unlock()
	ring(s.catalogChanged)
	return nil
}

// CatalogRevision is the revision of the catalog the loop runs (0 for the
// one given to New).
func (s *Scheduler) CatalogRevision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.catalogRev
}

func (s *Scheduler) catalogUpdated() {
	s.mu.Lock()
	prepared, rev := s.nextCatalog, s.nextCatalogRev
	s.nextCatalog = nil
	s.mu.Unlock()
	if prepared == nil {
		return
	}
	s.install(prepared, s.cfg.Clock.Now())
	s.mu.Lock()
	s.catalogRev = rev
	s.mu.Unlock()
	s.emit(Event{Kind: CatalogApplied, Count: int(rev), At: s.cfg.Clock.Now()})
	s.applyView(s.views.Latest())
}

// dropIfRemoved forgets a slot of a removed job once nothing refers to it.
func (s *Scheduler) dropIfRemoved(sl *slot) {
	if sl.removed && sl.state == idle && len(sl.runs) == 0 {
		delete(s.slots, sl.id)
	}
}

// LeadingCount is how many slots this member leads now: Leading's length,
// without copying it.
func (s *Scheduler) LeadingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.snapshot)
}

// Leading returns the slots this member leads now, with their tokens.
func (s *Scheduler) Leading() map[shard.Slot]fencing.Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[shard.Slot]fencing.Token, len(s.snapshot))
	for k, v := range s.snapshot {
		out[k] = v
	}
	return out
}

// ErrUntrusted is returned when the member's trust window closed (no keepalive
// ack for TTL − margin) before the session was declared lost.
var ErrUntrusted = errors.New("scheduler: lease deadline passed")

// Run campaigns for the preferred slots and runs their fires until ctx ends
// (a graceful stop: returns nil after in-flight executions finished or the
// grace period ran out) or the member's lease is lost (returns
// membership.ErrSessionLost or ErrUntrusted after cancelling everything).
// After Run returns the member should Leave: revoking its lease deletes every
// election key it holds in one revision, so the next owners take over at once.
func (s *Scheduler) Run(ctx context.Context) error {
	defer s.cancelCleanup()
	watchCtx, stopWatch := context.WithCancel(context.Background())
	s.wg.Add(2)
	go s.watchElections(watchCtx)
	go s.watchControl(watchCtx)
	release, giveBack := useReleaser(s.cfg.Clock)
	s.release = release
	stopWriter := make(chan struct{})
	writerDone := make(chan struct{})
	writerCtx, abandonWrites := context.WithCancel(context.Background())
	defer abandonWrites()
	go func() { s.writer.run(writerCtx, stopWriter); close(writerDone) }()

	err := s.loop(ctx)
	if err != nil {
		abandonWrites() // the lease is gone: nothing fenced by it can be committed
	}

	// Stop: no more fires, no more campaigns.
	for _, sl := range s.slots {
		if sl.state == campaigning {
			s.abandonCampaign(sl)
		}
		if sl.heapIndex >= 0 {
			heap.Remove(&s.heap, sl.heapIndex)
		}
	}
	s.stopping = true
	for _, sl := range s.slots {
		s.withdrawArmed(sl) // not started: it goes with the slot
	}
	if err == nil {
		if s.inFlight() > 0 {
			// Slots with nothing running are handed over now, not after the
			// others' executions drain (up to Grace): their next fires belong
			// to the next holder, who takes over within milliseconds. The
			// member leaves the view first, so that the others want its slots
			// (and campaign for them) by the time they are resigned.
			wctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
			if err := s.member.Withdraw(wctx); err != nil {
				s.cfg.Logger.Warn("could not leave the view; idle slots are handed over when the lease is revoked", "err", err)
			}
			cancel()
			for _, sl := range s.slots {
				if sl.state == leading && len(sl.runs) == 0 {
					s.endLeadership(sl, Released, "stopping")
				}
			}
		}
		s.drain(s.cfg.Grace)
	}
	// The lease revoke that follows (Member.Leave) deletes every key this
	// member holds in one revision: one request, not one resign per slot.
	for _, sl := range s.slots {
		if sl.state == leading && err == nil {
			s.retractAhead(sl) // committed before the member leaves: the writer is flushed first
		}
		if sl.state == leading {
			sl.cancelLead()
			delete(s.byKey, sl.leaderKey)
			s.setSnapshot(sl.id, 0, false)
			s.emit(Event{Kind: Released, Slot: sl.id, Token: sl.token, Reason: "stopping", At: s.cfg.Clock.Now()})
			sl.state = idle
		}
	}
	s.drain(0)
	stopWatch()
	giveBack()
	s.waitOwned(ownedWait)
	close(s.stopped)
	// The last results are committed (under the fence) before the member leaves.
	close(stopWriter)
	<-writerDone
	return err
}

func (s *Scheduler) loop(ctx context.Context) error {
	clock := s.cfg.Clock
	timer := clock.NewTimer(time.Hour)
	defer timer.Stop()
	// Trust is judged by the member's clock (monotonic), never by the
	// scheduling clock: a member whose wall clock is off keeps a sound
	// lease, and its trust deadline is timed by a timer of its own.
	trustTimer := time.NewTimer(time.Hour)
	defer trustTimer.Stop()
	s.applyView(s.views.Latest())
	for {
		now := clock.Now()
		trust := s.member.TrustLeft()
		if trust <= 0 {
			select {
			case <-s.member.Done():
				return s.lose(membership.ErrSessionLost)
			default:
				return s.lose(ErrUntrusted)
			}
		}
		trustTimer.Reset(trust)
		wake := now.Add(time.Hour)
		if len(s.heap) > 0 && s.heap[0].wakeAt.Before(wake) {
			wake = s.heap[0].wakeAt
		}
		timer.ResetAt(wake)
		// Results wait while fires released at their instant are starting
		// (see startingFires).
		bell := s.finished.bell
		var settled <-chan struct{}
		if c := startingFires.settled(); !isClosed(c) {
			bell, settled = nil, c
		}
		select {
		case <-settled: // the starts are done: results next
		case <-ctx.Done():
			return nil
		case <-trustTimer.C:
			// The top of the loop finds out whether an ack came in time.
		case <-s.member.Done():
			return s.lose(membership.ErrSessionLost)
		case <-s.views.Changed():
			v := s.views.Latest()
			if s.seenSelf && !v.Contains(s.member.ID()) {
				// Our record lives under our lease: it vanished, so did the
				// lease, even if no keepalive has told the session yet.
				return s.lose(membership.ErrSessionLost)
			}
			s.seenSelf = s.seenSelf || v.Contains(s.member.ID())
			s.applyView(v)
		case <-timer.C():
			s.fireDue()
		case r := <-s.results:
			s.campaignEnded(r)
		case <-s.campaignsDue.bell:
			s.campaignsFreed()
		case <-bell:
			for f := range s.finished.take() {
				s.runEnded(f)
			}
		case r := <-s.resigned:
			s.resignEnded(r)
		case r := <-s.raised:
			s.raiseEnded(r)
		case r := <-s.retries:
			s.retryDue(r)
		case evs := <-s.control:
			s.controlChanged(evs)
		case <-s.catalogChanged:
			s.catalogUpdated()
		case c := <-s.created:
			s.ownKeyCreated(c)
		case d := <-s.deleted:
			// The same lease always campaigns with the same key, so only a
			// delete after our key's creation ends our current leadership.
			if sl, ok := s.byKey[d.key]; ok && sl.state == leading && d.rev > int64(sl.token) {
				s.endLeadership(sl, Lost, "election key deleted")
				s.reconcile(sl)
			}
		}
	}
}

// applyView recomputes which slots this member is preferred for.
func (s *Scheduler) applyView(v membership.View) {
	ring, err := shard.New(v.Members)
	if err != nil {
		s.cfg.Logger.Error("cannot build ring; keeping the previous assignment", "revision", v.Revision, "err", err)
		return
	}
	me := s.member.ID()
	for _, sl := range s.slots {
		sl.wanted = !sl.removed && v.Contains(me) && ring.Owner(sl.id) == me
		s.reconcile(sl)
		s.dropIfRemoved(sl)
	}
}

// reconcile moves a slot toward what the view wants, between executions.
func (s *Scheduler) reconcile(sl *slot) {
	if s.stopping {
		return
	}
	switch {
	case sl.wanted && sl.state == idle:
		s.startCampaign(sl, 0)
	case sl.wanted && sl.state == leading && sl.heapIndex < 0 && !sl.raising && sl.leadCtx.Err() == nil:
		// Wanted again while it was draining to resign: keep firing.
		s.scheduleNext(sl, s.cfg.Clock.Now())
	case !sl.wanted && sl.state == campaigning:
		s.abandonCampaign(sl)
	case !sl.wanted && sl.state == leading:
		if sl.heapIndex >= 0 {
			heap.Remove(&s.heap, sl.heapIndex)
		}
		s.withdrawArmed(sl)
		if len(sl.runs) == 0 {
			s.endLeadership(sl, Released, "not preferred in the current view")
		}
	}
}

// maxCampaigning bounds the campaigns of a member that talk to etcd at once.
// Members taking 10,000 slots at once (kira bench) sent every campaign
// together, with their fence reads and first writes; in that burst a
// member's scheduler stopped now and then (its lease no longer trusted) and
// left its slots unowned. With the bound it has not happened in the runs
// since. How the keepalive acks came late is not worked out. 256 rather than
// 128 (kira bench at 10,000 slots): with 128 the members were still working
// off the takeover (fires skipped, seconds late) when measuring began in 9 of
// 12 runs (1 of 3 with skip records carried), with 256 in none of 6; a 3→4
// rebalance settled in 2.3–3.0 s (4 runs) against 3.06 and 3.11 s.
const maxCampaigning = 256

// campaignHold is how long a campaign keeps its place among maxCampaigning.
const campaignHold = time.Second

// startCampaign puts a slot in line for a campaign, after delay. Only
// maxCampaigning campaigns have a goroutine at a time; the others wait in
// s.waiting, which costs nothing per slot. A goroutine apiece (blocked on
// the bound) made a member taking 10,000 slots start 10,000 goroutines at
// once, and Go keeps every goroutine descriptor it ever made (kira bench
// --heapprofile: 12.5 MB of the 37 MB live heap of three members).
func (s *Scheduler) startCampaign(sl *slot, delay time.Duration) {
	if sl.backoff {
		delay, sl.backoff = max(delay, campaignRetry), false
	}
	sl.gen++
	sl.state = campaigning
	q := queuedCampaign{sl: sl, gen: sl.gen}
	if delay > 0 {
		sl.campaignTimer = time.AfterFunc(delay, func() { s.campaignsDue.put(q) })
		return
	}
	s.waiting = append(s.waiting, q)
	s.startWaitingCampaigns()
}

// queuedCampaign is a slot in line for a campaign; gen tells whether the
// campaign was abandoned meanwhile.
type queuedCampaign struct {
	sl  *slot
	gen uint64
}

// campaignBell is where campaign goroutines and retry timers tell the loop
// that a place among maxCampaigning came free or a delayed campaign is due.
type campaignBell struct {
	mu   sync.Mutex
	due  []queuedCampaign
	bell chan struct{} // capacity one
}

func (b *campaignBell) put(q queuedCampaign) {
	b.mu.Lock()
	b.due = append(b.due, q)
	b.mu.Unlock()
	ring(b.bell)
}

func (b *campaignBell) take() []queuedCampaign {
	b.mu.Lock()
	defer b.mu.Unlock()
	due := b.due
	b.due = nil
	return due
}

// campaignsFreed answers the campaign bell: delayed campaigns join the line,
// and the line moves up into the places that came free.
func (s *Scheduler) campaignsFreed() {
	s.waiting = append(s.waiting, s.campaignsDue.take()...)
	s.startWaitingCampaigns()
}

// startWaitingCampaigns starts the campaigns in line, in order, while there
// are places among maxCampaigning.
func (s *Scheduler) startWaitingCampaigns() {
	for len(s.waiting) > 0 {
		q := s.waiting[0]
		if sl := q.sl; sl.gen != q.gen || sl.state != campaigning || s.slots[sl.id] != sl {
			s.waiting = s.waiting[1:] // abandoned while in line
			continue
		}
		select {
		case s.campaigning <- struct{}{}:
		default:
			return // every place taken: a campaign that leaves rings the bell
		}
		s.waiting = s.waiting[1:]
		s.runCampaign(q.sl)
	}
	s.waiting = nil // let the array go once the line is empty
}

// runCampaign campaigns for a slot in a goroutine of its own, holding one of
// the maxCampaigning places.
func (s *Scheduler) runCampaign(sl *slot) {
	sl.campaignTimer = nil
	ctx, cancel := context.WithCancel(context.Background())
	sl.cancelCampaign = cancel
	prefix := ElectionKeyPrefix(s.member.Cluster(), sl.id)
	e := concurrency.NewElection(s.member.Session(), prefix)
	id, gen, session := sl.id, sl.gen, s.member.Session()
	key := fmt.Sprintf("%s/%x", prefix, session.Lease())
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		// A campaign waiting for another member's key to go (until its
		// lease expires, say) gives its place up after a while, so it holds
		// up nobody for long.
		leave := sync.OnceFunc(func() {
			<-s.campaigning
			ring(s.campaignsDue.bell)
		})
		t := time.AfterFunc(campaignHold, leave)
		err := e.Campaign(ctx, s.member.ID())
		if err == nil {
			err = confirmLeadership(ctx, session, e)
		}
		t.Stop()
		leave()
		if err == nil && ctx.Err() != nil {
			err = ctx.Err() // won, but the campaign was abandoned meanwhile
		}
		if err != nil {
			withdraw(s.cleanupCtx, session, key)
		}
		// Always report, so the loop knows this slot has no goroutine left.
		select {
		case s.results <- campaignResult{slot: id, gen: gen, election: e, err: err}:
		case <-s.stopped:
			if err == nil {
				withdraw(s.cleanupCtx, session, key)
			}
		}
	}()
}

// abandonCampaign cancels a campaign. One still in line (or waiting out its
// delay) has talked to nobody: the slot is idle at once. Otherwise the slot
// waits in resigning until the campaign goroutine has reported (and
// resigned, had it won), because a new campaign on the same lease would
// reuse the very same key.
func (s *Scheduler) abandonCampaign(sl *slot) {
	if sl.cancelCampaign == nil {
		if sl.campaignTimer != nil {
			sl.campaignTimer.Stop()
			sl.campaignTimer = nil
		}
		sl.gen++ // its place in line, if it has one, is void
		sl.state = idle
		return
	}
	sl.cancelCampaign()
	sl.state = resigning
}

// confirmLeadership guards against phantom leadership: Campaign can return
// after the session's lease already expired, so check the session and that
// our key still exists with the revision we were elected at.
func confirmLeadership(ctx context.Context, session *concurrency.Session, e *concurrency.Election) error {
	select {
	case <-session.Done():
		return membership.ErrSessionLost
	default:
	}
	resp, err := session.Client().Get(ctx, e.Key())
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != e.Rev() || clientv3.LeaseID(resp.Kvs[0].Lease) != session.Lease() {
		return concurrency.ErrElectionNotLeader
	}
	return nil
}

// withdraw deletes this member's candidacy for a slot. A campaign cancelled
// during its first transaction may have created the key without learning it
// (and then Resign does nothing), which would block the preferred member
// until our lease ends; deleting our own key is always safe once we gave up.
func withdraw(ctx context.Context, session *concurrency.Session, key string) {
	ctx, cancel := context.WithTimeout(ctx, resignTimeout)
	defer cancel()
	_, _ = session.Client().Delete(ctx, key)
}

func resign(ctx context.Context, e *concurrency.Election) {
	ctx, cancel := context.WithTimeout(ctx, resignTimeout)
	defer cancel()
	_ = e.Resign(ctx)
}

func (s *Scheduler) campaignEnded(r campaignResult) {
	sl := s.slots[r.slot]
	if sl.gen != r.gen {
		return // cannot happen: a slot has one goroutine at a time
	}
	sl.cancelCampaign = nil    // the campaign's context is done: do not keep it
	if sl.state == resigning { // abandoned while the result was on its way
		if r.err == nil {
			s.resignAsync(sl, r.election)
			return
		}
		sl.state = idle
		s.reconcile(sl)
		return
	}
	if r.err != nil {
		sl.state = idle
		s.cfg.Logger.Warn("campaign failed; retrying", "slot", sl.id.String(), "err", r.err)
		if sl.wanted {
			s.startCampaign(sl, campaignRetry)
		}
		return
	}
	now := s.cfg.Clock.Now()
	sl.state = leading
	sl.election = r.election
	sl.token = fencing.Token(r.election.Rev())
	sl.leaderKey = r.election.Key()
	sl.leadCtx, sl.cancelLead = context.WithCancel(context.Background())
	s.byKey[sl.leaderKey] = sl
	s.setSnapshot(sl.id, sl.token, true)
	s.emit(Event{Kind: Acquired, Slot: sl.id, Token: sl.token, At: now})
	if !sl.wanted {
		s.endLeadership(sl, Released, "not preferred in the current view")
		return
	}
	s.raiseFences(sl)
}

// raiseTimeout bounds raising the fences of a newly won slot.
const raiseTimeout = 30 * time.Second

// raiseFences prepares a newly won slot off the loop: it loads the slot's
// recorded state and waiting manual triggers, then runs the job's fence_url or
// fence_command and the OnAcquire hook. The slot fires only when all that
// succeeded (raiseEnded).
func (s *Scheduler) raiseFences(sl *slot) {
	sl.raising = true
	ctx, cancel := context.WithTimeout(sl.leadCtx, raiseTimeout)
	id, fence, claim, hook := sl.id, sl.job.fence, fencing.Claim{LeaderKey: sl.leaderKey, Token: sl.token}, s.cfg.OnAcquire
	cluster, kv := s.member.Cluster(), s.cli
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		st, triggers, err := readAcquired(ctx, kv, cluster, id)
		if err == nil && fence != nil {
			err = fence.Raise(ctx, id.Job, id.Partition, claim)
		}
		if err == nil && hook != nil {
			err = hook(fencing.WithClaim(ctx, claim), id, claim)
		}
		select {
		case s.raised <- raisedFence{slot: id, token: claim.Token, st: st, triggers: triggers, err: err}:
		case <-s.stopped:
		}
	}()
}

func (s *Scheduler) raiseEnded(r raisedFence) {
	sl := s.slots[r.slot]
	if sl.state != leading || sl.token != r.token || !sl.raising {
		return // the slot was given up meanwhile
	}
	sl.raising = false
	triggers := r.triggers
	for _, f := range sl.lateTriggers {
		if !slices.ContainsFunc(triggers, func(g fire) bool { return g.triggerKey == f.triggerKey }) {
			triggers = append(triggers, f)
		}
	}
	sl.lateTriggers = nil
	for _, f := range triggers {
		// Their watch events, if they come now, are not dispatched again.
		s.triggering[f.triggerKey] = true
	}
	if r.err != nil {
		s.forgetTriggers(triggers)
		s.cfg.Logger.Warn("could not raise the fence; giving the slot up", "slot", sl.id.String(), "token", sl.token.String(), "err", r.err)
		sl.backoff = true
		s.endLeadership(sl, Released, "fence not raised: "+r.err.Error())
		return
	}
	now := s.cfg.Clock.Now()
	s.emit(Event{Kind: Raised, Slot: sl.id, Token: sl.token, At: now})
	if !sl.wanted {
		s.forgetTriggers(triggers)
		s.endLeadership(sl, Released, "not preferred in the current view")
		return
	}
	s.acquired(sl, r.st, triggers, now)
}

// forgetTriggers unmarks triggers this member will not run (the slot is
// given up): the next holder reads them at acquisition.
func (s *Scheduler) forgetTriggers(fs []fire) {
	for _, f := range fs {
		if f.triggerKey != "" {
			delete(s.triggering, f.triggerKey)
		}
	}
}

// endLeadership cancels the slot's executions and releases its key.
func (s *Scheduler) endLeadership(sl *slot, kind EventKind, reason string) {
	if sl.heapIndex >= 0 {
		heap.Remove(&s.heap, sl.heapIndex)
	}
	sl.raising = false
	s.forgetTriggers(sl.lateTriggers)
	s.forgetTriggers(sl.pending)
	if sl.queued != nil {
		s.forgetTriggers([]fire{*sl.queued})
	}
	sl.lateTriggers, sl.queued, sl.pending = nil, nil, nil
	sl.cancelLead()
	delete(s.byKey, sl.leaderKey)
	s.setSnapshot(sl.id, 0, false)
	s.emit(Event{Kind: kind, Slot: sl.id, Token: sl.token, Reason: reason, At: s.cfg.Clock.Now()})
	if kind == Lost {
		sl.state, sl.ahead, sl.carried = idle, nil, nil // fenced out anyway
		return
	}
	if c := sl.takeCarried(); len(c) > 0 {
		// Ahead of the resign, which the writer keeps in this order.
		s.writer.enqueue(fencedWrite{claim: sl.claim(), ops: s.recordOps(sl, c)})
	}
	// A start recorded ahead is left as it is: the fire is in the future, and
	// the next holder, taking over within milliseconds of the resign, runs it
	// on schedule (catchUp does not take a future start for an unfinished one).
	sl.ahead = nil
	s.resignAsync(sl, sl.election)
}

// resignAsync deletes the slot's key off the loop; the slot stays in
// resigning until that is done so a new campaign (same lease, same key)
// cannot race with the delete. The delete is a fenced write of the state
// writer, so it commits after this slot's writes still queued (the result of
// a run that just ended, a start recorded ahead): resigning before them would
// fence them out, and the next owner would run that fire again. Found by the
// chaos suite: a replay after a graceful handover.
func (s *Scheduler) resignAsync(sl *slot, e *concurrency.Election) {
	sl.gen++
	sl.state = resigning
	id, gen := sl.id, sl.gen
	done := make(chan error, 1)
	claim := fencing.Claim{LeaderKey: e.Key(), Token: fencing.Token(e.Rev())} // the election's own: the slot's may be an older one
	s.writer.enqueue(fencedWrite{claim: claim, ops: []clientv3.Op{clientv3.OpDelete(claim.LeaderKey)}, done: done})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := <-done; err != nil && !errors.Is(err, fencing.ErrFenced) {
			resign(s.cleanupCtx, e) // the writer could not: delete it directly
		}
		select {
		case s.resigned <- resignedSlot{slot: id, gen: gen}:
		case <-s.stopped:
		}
	}()
}

func (s *Scheduler) resignEnded(r resignedSlot) {
	sl := s.slots[r.slot]
	if sl.state == resigning && sl.gen == r.gen {
		sl.state = idle
		s.reconcile(sl)
		s.dropIfRemoved(sl)
	}
}

// lose ends everything at once: the lease can no longer be trusted.
func (s *Scheduler) lose(cause error) error {
	s.cancelCleanup()
	for _, sl := range s.slots {
		switch sl.state {
		case leading:
			if sl.heapIndex >= 0 {
				heap.Remove(&s.heap, sl.heapIndex)
			}
			sl.cancelLead()
			delete(s.byKey, sl.leaderKey)
			s.setSnapshot(sl.id, 0, false)
			s.emit(Event{Kind: Lost, Slot: sl.id, Token: sl.token, Reason: cause.Error(), At: s.cfg.Clock.Now()})
			sl.state = idle
		case campaigning:
			s.abandonCampaign(sl)
		}
	}
	s.cfg.Logger.Error("lost the lease: cancelled every execution", "member", s.member.ID(), "err", cause)
	return cause
}

// drain waits for in-flight executions, up to grace, then cancels the rest
// and waits for them to return.
func (s *Scheduler) drain(grace time.Duration) {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	for s.inFlight() > 0 {
		select {
		case <-s.finished.bell:
			for f := range s.finished.take() {
				s.runEnded(f)
				if sl, ok := s.slots[f.slot]; ok && grace > 0 && sl.state == leading && len(sl.runs) == 0 && s.inFlight() > 0 {
					s.endLeadership(sl, Released, "stopping") // its run is over: hand it over without waiting for the others
				}
			}
		case r := <-s.resigned:
			s.resignEnded(r)
		case r := <-s.results:
			s.campaignEnded(r)
		case r := <-s.raised:
			s.raiseEnded(r)
		case <-deadline.C:
			for _, sl := range s.slots {
				if sl.cancelLead != nil {
					sl.cancelLead()
				}
			}
		}
	}
}

func (s *Scheduler) inFlight() int { return s.running }

// waitOwned waits for campaign, resign and execution goroutines, answering
// them until they are gone or bound passes. Goroutines still inside an etcd
// call then return when the caller closes the etcd client; none of them can
// act any more (their contexts are cancelled and nobody reads their results).
func (s *Scheduler) waitOwned(bound time.Duration) {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	limit := time.NewTimer(bound)
	defer limit.Stop()
	for {
		select {
		case <-done:
			return
		case <-limit.C:
			s.cfg.Logger.Warn("stopped with etcd calls still pending; closing the client releases them")
			return
		case r := <-s.results:
			if r.err == nil {
				resign(s.cleanupCtx, r.election)
			}
		case <-s.resigned:
		case <-s.raised:
		case <-s.retries:
		case <-s.finished.bell:
			for f := range s.finished.take() {
				if sl, ok := s.slots[f.slot]; ok {
					if _, ok := sl.runs[f.run]; ok {
						delete(sl.runs, f.run)
						s.running--
					}
				}
			}
		}
	}
}

// watchElections reports deletions of election keys, so a member learns at
// once when its key vanishes behind its back.
func (s *Scheduler) watchElections(ctx context.Context) {
	defer s.wg.Done()
	prefix := ElectionPrefix(s.member.Cluster())
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		suffix := fmt.Sprintf("/%x", s.member.Lease())
		for wr := range s.cli.Watch(wctx, prefix, clientv3.WithPrefix()) {
			for _, ev := range wr.Events {
				key := string(ev.Kv.Key)
				if !strings.HasSuffix(key, suffix) {
					continue
				}
				switch {
				case ev.Type == mvccpb.DELETE:
					select {
					case s.deleted <- deletedKey{key: key, rev: ev.Kv.ModRevision}:
					case <-ctx.Done():
					}
				case ev.Kv.CreateRevision == ev.Kv.ModRevision:
					id, ok := parseSlot(strings.TrimSuffix(strings.TrimPrefix(key, prefix), suffix))
					if !ok {
						continue
					}
					select {
					case s.created <- createdKey{slot: id, key: key, rev: ev.Kv.CreateRevision}:
					case <-ctx.Done():
					}
				}
			}
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *Scheduler) setSnapshot(id shard.Slot, t fencing.Token, leading bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if leading {
		s.snapshot[id] = t
	} else {
		delete(s.snapshot, id)
	}
}

func (s *Scheduler) emit(e Event) {
	e.Member = s.member.ID()
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(e)
	}
}

// parseSlot reads "job/partition".
func parseSlot(s string) (shard.Slot, bool) {
	i := strings.LastIndex(s, "/")
	if i < 0 {
		return shard.Slot{}, false
	}
	p, err := strconv.Atoi(s[i+1:])
	return shard.Slot{Job: s[:i], Partition: p}, err == nil
}

// ownKeyCreated deletes a candidacy key of ours that no campaign of ours
// owns. A cancelled campaign's create can reach etcd after the delete that
// withdrew it (the two requests race once the first is cancelled); the
// orphan would be the oldest key of the slot's election, so the preferred
// member would wait behind it for as long as this member lives. Found by the
// chaos suite (a slot never acquired). The delete is conditional on the
// key's create revision, so it cannot remove a key a newer campaign made.
func (s *Scheduler) ownKeyCreated(c createdKey) {
	sl, ok := s.slots[c.slot]
	if ok && (sl.state == campaigning || sl.state == leading) {
		return
	}
	s.cfg.Logger.Warn("deleting a candidacy key no campaign of ours owns", "slot", c.slot.String(), "revision", c.rev)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.cleanupCtx, resignTimeout)
		defer cancel()
		_, _ = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.rev)).Then(clientv3.OpDelete(c.key)).Commit()
	}()
}
