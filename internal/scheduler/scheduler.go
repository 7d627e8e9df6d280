package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/history/journal"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/notify"
	"github.com/kira-scheduler/kira/internal/permit"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/candidacy"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/fenced"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/gate"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/takeoverread"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// DefaultGrace bounds how long a graceful stop waits for in-flight executions.
const DefaultGrace = 30 * time.Second

// DefaultArmAhead is Config.ArmAhead's default: long enough for a busy
// member to arm a whole second's fires before their instant while sharing
// its cores with other members and etcd
// (docs/decisions/0001-arm-fires-300-ms-ahead.md). Held by TestArmedFireStartsAtItsInstantAndGoesWithTheSlot.
const DefaultArmAhead = 300 * time.Millisecond

// TracerName is the instrumentation scope of the scheduler's spans: the
// package's path before it moved under internal/, kept so that trace
// queries naming it still match.
const TracerName = "github.com/kira-scheduler/kira/scheduler"

// Config holds the scheduler's optional settings.
type Config struct {
	// Handlers resolves catalog jobs that name an in-process Go handler.
	Handlers jobs.Handlers
	// Clock defaults to clock.Real.
	Clock clock.Clock
	// Grace bounds the wait for in-flight executions on a graceful stop; default DefaultGrace.
	Grace time.Duration
	// OnEvent, if set, is called for every event: from the scheduler's loop,
	// and for Started from the execution's own goroutine at the moment it
	// starts (so it must be safe for concurrent use). It must not block: hand
	// the event off.
	OnEvent func(Event)
	// ArmAhead is how long before a fire's time the loop prepares it, when the
	// slot is free and the fire's start is already recorded: the execution's
	// goroutine is made then and waits at a gate that opens at the
	// instant, so at the instant nothing is left to do but start, however
	// many slots fire together. Zero means DefaultArmAhead. A pause that
	// arrives while a fire is armed applies from the next fire.
	ArmAhead time.Duration
	// OnAcquire, if set, is called (off the loop) each time this member wins a
	// slot, before the slot's first execution, after the job's fence_url or
	// fence_command. It
	// raises the fences of the slot's protected resources to the new token
	// (for example pgfence's Raise), so an ex-leader cannot slip a write in
	// before the first execution. If it fails, nothing runs: the slot is given
	// up and campaigned for again after a pause. Its ctx ends when the slot is lost.
	OnAcquire func(ctx context.Context, slot shard.Slot, claim fencing.Claim) error
	// Admit, if set, is asked first each time this member wins a slot
	// (package highwater's Mark.Admit): if it refuses the token, the slot
	// is not led at all (no event, nothing read or run): its key is deleted
	// and it is campaigned for again after a pause.
	Admit func(token int64) error
	// CatalogRevision is the etcd revision of the catalog given to New, if
	// it was stored (0 otherwise).
	CatalogRevision int64
	// Notify says how notifications of executions are delivered (the
	// catalog's notify: rules say which); its OnResult is the scheduler's.
	Notify notify.Config
	// APIURL is the base URL of this member's API (http://host:port), for
	// the links in notifications; empty: no link.
	APIURL string
	// Tracer defaults to the global OpenTelemetry tracer provider's.
	Tracer trace.Tracer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// JournalSweep is how often the member looks for journals of members
	// that left, to delete those no reader needs; default
	// DefaultJournalSweep.
	JournalSweep time.Duration
	// JobSweep is how often the member that sweeps the keys of deleted
	// jobs (jobsweep.go) looks through etcd for some it was not told of;
	// default DefaultJobSweep.
	JobSweep time.Duration
	// JournalEntries is how many keys the member's journal has; default
	// DefaultJournalEntries. Fewer make the writer reuse its entries, and
	// copy the records still needed to their rings, sooner: the chaos
	// suite's random schedules run with 16 so its journals wrap round.
	JournalEntries int
}

// DefaultJournalEntries is how many keys a member's journal has by default.
const DefaultJournalEntries = fenced.DefaultJournalEntries

// Scheduler runs, on one member, the slots the view assigns it (shard.Assign).
// Its fields are grouped by owner: set once by New, then three types of
// their own: the loop's inbox, the loop's own state, and what is shared
// with goroutines off the loop.
type Scheduler struct {
	// Set by New and never changed: what the scheduler works with.
	member   *member.Member
	views    *member.Views
	cli      *clientv3.Client
	cfg      Config
	writer   *fenced.Writer
	journals *journal.Cache  // the journals, read for the slots taken at once
	upstream *upstreamReader // what dependent slots learn of their upstreams (upstreams.go)
	// upstreams is the newest read of the upstream jobs the loop took.
	upstreams   *upstreamRead
	reads       *takeoverread.Queue // the reads of the slots taken over, batched
	candidacies *candidacy.Queue    // the campaigns' first transactions, batched
	gates       *gate.Gates
	notifier    *notify.Notifier
	sweeps      *jobSweeps // the jobs whose keys to sweep (jobsweep.go)
	// permits are the member's permits of the jobs' concurrency limits;
	// stopWaiting ends when the member stops firing, and with it every wait
	// for one (permits.go).
	permits     *permit.Pools
	stopWaiting context.Context
	stopWaits   context.CancelFunc
	// armedHook, if set (by tests, before Run), is called by the loop for
	// each fire it arms.
	armedHook func(shard.Slot)
	// assignHook, if set (by tests, before Run), is called off the loop
	// before each whole assignment computed there (reassignIfDue).
	assignHook func()
	// cleanupCtx bounds the deletes of our own keys (resigns, abandoned
	// candidacies); it is cancelled when the lease is lost, since the lease's
	// revoke or expiry deletes them all anyway, and an etcd that cannot
	// renew the lease would make each of them wait out its timeout.
	cleanupCtx    context.Context
	cancelCleanup context.CancelFunc
	wg            sync.WaitGroup // campaign, resign, execution and watch goroutines

	inbox
	loopState
	shared
}

// inbox is the loop's inbox: fed by the goroutines the loop owns (and by
// the catalog's and the control keys' watches), read only by the loop.
type inbox struct {
	results chan campaignResult
	// campaigning bounds the campaigns talking to etcd at once (see
	// maxCampaigning); the others wait in line, in waiting.
	campaigning    chan struct{}
	campaignsDue   *campaignBell
	finished       *finishedRuns
	resigned       chan resignedSlot
	deleted        chan deletedKey
	created        chan createdKey
	raised         chan raisedFence
	retries        chan retryFire
	control        chan []controlEvent
	catalogChanged chan struct{}
	wholes         chan wholeAssignment // room for the one computed at a time (reassignIfDue)
	stopped        chan struct{}        // closed when Run no longer reads the channels above
}

// loopState is owned by the loop: read and written only by its goroutine.
type loopState struct {
	// jobs is the jobs the loop runs, also shared as installed: the loop
	// changes it under mu, and reads it without.
	jobs    map[string]*job
	slots   map[shard.Slot]*slot
	heap    slotHeap
	oneOffs oneOffHeap       // the waiting one-off runs of the slots led (oneoff.go)
	byKey   map[string]*slot // leader key → slot, for deletions seen by the watch
	waiting []queuedCampaign // campaigns in line for a place (campaigning)
	paused  map[string]bool  // jobs paused with kira pause
	// triggering holds the manual triggers dispatched and not yet finished,
	// so a trigger seen twice (a watch restarted) starts once.
	triggering map[string]bool
	// unplaced holds the jobs whose placement matched no member at the
	// last view.
	unplaced map[string]bool
	// leaving counts the slots still here of each job the catalog removed
	// (forget.go).
	leaving map[string]int
	// assigned is the last assignment and its input, by job (assign), and
	// gen counts the changes to it (a job placed or removed, a view
	// applied): a whole assignment computed off the loop is installed only
	// at the gen it was asked at (reassigned).
	assigned struct {
		in  map[string]shard.Job
		out *shard.Assignment
		gen uint64
	}
	// reassign is when the whole assignment is due again, over view, after
	// jobs were placed one by one (reassignSoon); due is zero when it is
	// not. computing is set while one is computed off the loop.
	reassign struct {
		first, due time.Time
		view       member.View
		computing  bool
	}
	// seenSelf is set once a view contained this member.
	seenSelf bool
	// historyFormat is the format records are written in: the newest that
	// every member of the latest view reads (history.FormatCompact).
	historyFormat int
	// running counts executions in flight over all slots (the runs maps).
	running int
	// stopping is set when Run's loop has returned: nothing is campaigned for
	// any more, whatever the view says.
	stopping bool
}

// shared is what goroutines off the loop read or write, each group with
// its own guard.
type shared struct {
	takingOver atomic.Int64 // the slots raising their fence (TakingOver)

	// The SetCatalog side, serialised by setMu: the jobs it prepared last,
	// and the revision of their catalog.
	setMu       sync.Mutex
	prepared    map[string]*job
	preparedRev int64

	// Guarded by mu: the catalog waiting for the loop, whole (nextWhole)
	// or as changes to the one it runs (nextChanges, a job by name, nil for
	// one removed), and the one it runs, and what the loop publishes for
	// readers off it.
	mu             sync.Mutex
	nextWhole      map[string]*job
	nextChanges    map[string]*job
	nextCatalogRev int64
	catalogRev     int64
	installed      map[string]*job // the jobs of the catalog the loop runs (loopState.jobs); read under mu
	snapshot       map[shard.Slot]fencing.Token
	eligible       map[string]int // Eligible's
}

// Validate checks the durations and counts where they enter the system:
// none may be negative (zero means the default). Held by
// TestConfigRefusesNegativeSettings.
func (c *Config) Validate() error {
	for _, d := range []struct {
		name  string
		value time.Duration
	}{{"grace", c.Grace}, {"arm ahead", c.ArmAhead}, {"journal sweep", c.JournalSweep}, {"job sweep", c.JobSweep}} {
		if d.value < 0 {
			return fmt.Errorf("scheduler: %s %s must not be negative (zero means the default)", d.name, d.value)
		}
	}
	switch {
	case c.JournalEntries < 0:
		return fmt.Errorf("scheduler: journal entries %d must not be negative (zero means %d)", c.JournalEntries, DefaultJournalEntries)
	case c.CatalogRevision < 0:
		return fmt.Errorf("scheduler: catalog revision %d must not be negative", c.CatalogRevision)
	}
	return nil
}

// New prepares a scheduler for cat on member; views must be running.
func New(member *member.Member, views *member.Views, cat *config.Catalog, cfg Config) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.JournalSweep == 0 {
		cfg.JournalSweep = DefaultJournalSweep
	}
	if cfg.JobSweep == 0 {
		cfg.JobSweep = DefaultJobSweep
	}
	if cfg.ArmAhead == 0 {
		cfg.ArmAhead = DefaultArmAhead
	}
	if cfg.Tracer == nil {
		cfg.Tracer = otel.Tracer(TracerName)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Scheduler{
		member: member, views: views, cli: member.Session().Client(), cfg: cfg,
		writer: fenced.NewWriter(member.Session().Client()),
		inbox: inbox{
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
			catalogChanged: make(chan struct{}, 1),
			wholes:         make(chan wholeAssignment, 1),
			stopped:        make(chan struct{}),
		},
		loopState: loopState{
			jobs:       map[string]*job{},
			slots:      map[shard.Slot]*slot{},
			byKey:      map[string]*slot{},
			paused:     map[string]bool{},
			triggering: map[string]bool{},
			unplaced:   map[string]bool{},
			leaving:    map[string]int{},
		},
		shared: shared{snapshot: map[shard.Slot]fencing.Token{}},
	}
	s.writer.UseJournal(member.Cluster(), member.ID(), cfg.JournalEntries)
	s.journals = journal.NewCache(s.cli, member.Cluster())
	s.reads = takeoverread.New(s.cli, member.Cluster(), s.journals, raiseTimeout)
	s.candidacies = candidacy.New(s.cli, maxCampaigning)
	s.upstream = newUpstreamReader()
	s.sweeps = newJobSweeps()
	s.catalogRev = cfg.CatalogRevision
	s.notifier = s.newNotifier()
	s.cleanupCtx, s.cancelCleanup = context.WithCancel(context.Background())
	s.permits = permit.New(s.cli, member.Cluster(), member.Lease())
	s.stopWaiting, s.stopWaits = context.WithCancel(context.Background())
	prepared, err := prepareJobs(cat, cfg.Handlers, nil)
	if err != nil {
		return nil, err
	}
	s.prepared, s.preparedRev = prepared, cfg.CatalogRevision
	s.install(maps.Clone(prepared), time.Time{})
	return s, nil
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

// LeadingCount is how many slots this member leads now: Leading's length,
// without copying it.
func (s *Scheduler) LeadingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.snapshot)
}

// Jobs returns the jobs of the catalog the loop runs, in no order.
func (s *Scheduler) Jobs() []config.Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]config.Job, 0, len(s.installed))
	for _, j := range s.installed {
		out = append(out, j.spec)
	}
	return out
}

// CatalogRevision is the revision of the catalog the loop runs
// (Config.CatalogRevision for the one given to New).
func (s *Scheduler) CatalogRevision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.catalogRev
}

// StateWrites reports how many fenced writes (starts, results, resigns)
// wait for etcd in this member's writer, and how long the oldest of them
// has waited: a wait that stays above a quarter of a second says etcd
// commits them slower than they come, and the member is past capacity.
func (s *Scheduler) StateWrites() (queued int, oldest time.Duration) {
	return s.writer.Backlog()
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

// ErrUntrusted is returned when the member's trust window closed (no keepalive
// ack for TTL − margin) before the session was declared lost.
var ErrUntrusted = errors.New("scheduler: lease deadline passed")
