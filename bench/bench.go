package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/etcdclient"
	"github.com/kira-scheduler/kira/jobs"
	"github.com/kira-scheduler/kira/keyspace"
	"github.com/kira-scheduler/kira/scheduler"
	"github.com/kira-scheduler/kira/shard"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Config says what to measure.
type Config struct {
	Etcd     etcdclient.Config // the etcd to run against
	Slots    []int             // lateness: slot counts, each over 3 members
	Duration time.Duration     // lateness: measuring window
	Warmup   time.Duration     // lateness and soak: from every slot owned to the window
	Command  bool              // lateness: run `sh -c :` instead of an in-process handler
	// OutputBytes, if positive, makes the lateness load an HTTP job whose
	// answer, of this many bytes, is its output: the write volume of jobs
	// that print, rather than of silent Go handlers. The bench serves it.
	OutputBytes int
	// Jitter spreads the load's fires over time: each slot fires at its own
	// fixed offset in [0, Jitter) after its scheduled second (the job's
	// jitter), and its lateness is counted from then. Zero: every slot
	// fires at the second.
	Jitter time.Duration
	// Probe adds to the lateness runs one more slot, a job running
	// `sh -c :` every second, whose lateness (to its process start) is
	// reported on its own (Lateness.Probe): a command job on a loaded
	// scheduler, rather than every slot forking at once.
	Probe bool
	TTLs  []time.Duration // failover: lease TTLs
	// Processes runs failover and handover with each member a `kira run`
	// process of Binary, the owner sent SIGKILL or SIGTERM, rather than in
	// this process.
	Processes bool
	Binary    string
	Trials    int // failover and handover: trials per setting
	Rebalance int // rebalance: slot count (0 skips)
	// HeapProfile, if set, is where to write a heap profile (go tool pprof)
	// taken when the rebalance's members hold their idle slots, as the
	// memory figures are.
	HeapProfile string
	// EtcdInProcess says etcd runs inside this process (kira bench without
	// --etcd): CPU and memory figures then include etcd's.
	EtcdInProcess bool
	// EtcdTuning names how the bench's own etcd is tuned (etcdnode.Tuning),
	// or is empty for an etcd given with --etcd.
	EtcdTuning string
	// Soak, if positive, runs the soak (and nothing else the config
	// enables): SoakSlots slots firing every second in the production
	// shape (Cluster must be set) for this long, sampled every SoakEvery.
	Soak      time.Duration
	SoakSlots int
	SoakEvery time.Duration
	// Cluster, if set, is the production shape: etcd is these three
	// `kira etcd` processes (Etcd their endpoints), lateness runs with the
	// members as `kira run` processes of Binary and reports what etcd paid,
	// and failover and handover run with processes.
	Cluster *EtcdCluster
}

// Report is what kira bench prints.
type Report struct {
	// Etcd says which etcd the figures come from: the bench's own (and its
	// tuning), or the endpoints given.
	Etcd      string      `json:"etcd"`
	Failover  []Failover  `json:"failover,omitempty"`
	Handover  *Handover   `json:"handover,omitempty"`
	Lateness  []Lateness  `json:"lateness,omitempty"`
	Rebalance []Rebalance `json:"rebalance,omitempty"`
	Memory    *Memory     `json:"memory,omitempty"`
	Soak      *Soak       `json:"soak,omitempty"`
}

// Failover is kill → first execution by the new owner, per TTL.
type Failover struct {
	TTL      time.Duration   `json:"ttl_ns"`
	Samples  []time.Duration `json:"samples_ns"`
	Median   time.Duration   `json:"median_ns"`
	Worst    time.Duration   `json:"worst_ns"`
	RatioTTL float64         `json:"median_over_ttl"`
	Lost     int             `json:"fires_lost"`
	// Processes: members were `kira run` processes and the owner was
	// killed with SIGKILL; otherwise members share the bench's process and
	// the owner's crash drops its etcd connection.
	Processes bool `json:"processes,omitempty"`
}

// Handover is graceful stop → next owner holds the slot.
type Handover struct {
	Samples []time.Duration `json:"samples_ns"`
	Median  time.Duration   `json:"median_ns"`
	Worst   time.Duration   `json:"worst_ns"`
	Lost    int             `json:"fires_lost"`
	// Processes: members were `kira run` processes, the owner was sent
	// SIGTERM, and a sample ended when another member's key led the slot's
	// election in etcd; otherwise members share the bench's process, the
	// owner stops as on SIGTERM, and a sample ends at the next owner's
	// Acquired event.
	Processes bool `json:"processes,omitempty"`
}

// Lateness is actual start − scheduled time at a number of slots.
type Lateness struct {
	Slots    int           `json:"slots"`
	Executor string        `json:"executor"`
	Jitter   time.Duration `json:"jitter_ns,omitempty"` // Config.Jitter
	Settle   time.Duration `json:"settle_ns"`           // start of 3 members → every slot owned
	Figures
	EtcdCalls  map[string]int `json:"etcd_calls"`                // gRPC calls by method during the window
	PerExecute float64        `json:"etcd_writes_per_execution"` // write calls (Txn, Put, DeleteRange)
	// KeysPerExecute is the keys etcd wrote (put or deleted) during the
	// window per execution, from its own counters; zero when etcd is not in
	// this process.
	KeysPerExecute float64 `json:"etcd_keys_written_per_execution"`
	// BytesPerExecute is the bytes etcd received from its clients (gRPC
	// requests: the writes and the reads) during the window per execution,
	// from its own counters; zero when etcd is not in this process.
	BytesPerExecute float64 `json:"etcd_bytes_received_per_execution"`
	// CPU is this process's CPU time (user + system) during the window;
	// CPUPer1000 is that per second of window, per 1,000 slots, per member
	// (3 members): cores busy. Includes etcd's when EtcdInProcess.
	CPU           time.Duration `json:"cpu_ns"`
	CPUPer1000    float64       `json:"cpu_seconds_per_second_per_1000_slots_per_member"`
	EtcdInProcess bool          `json:"etcd_in_process"`
	// NoScheduler marks the floor row: the same commands forked at each
	// second without Kira or etcd (etcd, settle and CPU do not apply).
	NoScheduler bool `json:"no_scheduler,omitempty"`
	// MemberLost says which member stopped scheduling during the warm-up or
	// the window (its lease lost or untrusted), if one did: its slots were
	// then unowned for the rest of the run.
	MemberLost string `json:"member_lost,omitempty"`
	// BySecond splits the window by scheduled second (JSON only): a run
	// still working off its start shows as late early seconds.
	BySecond []SecondLateness `json:"by_second,omitempty"`
	// Probe is the lateness of the one `sh -c :` slot (Config.Probe),
	// measured to its process start; not counted in the figures above.
	Probe *Figures `json:"sh_probe,omitempty"`
	// Processes: the members were `kira run` processes (the production
	// shape), and what ran was read from etcd; EtcdCost is then what the
	// three `kira etcd` processes paid.
	Processes bool      `json:"processes,omitempty"`
	EtcdCost  *EtcdCost `json:"etcd_cost,omitempty"`
	Cores     *Cores    `json:"cores,omitempty"`
}

// secondTally is what started and was skipped of the fires scheduled in
// one second of the window.
type secondTally struct {
	late    []time.Duration
	skipped int
}

// tallied is the window's seconds, from from, as Lateness.BySecond.
func tallied(from time.Time, secs []secondTally) []SecondLateness {
	out := make([]SecondLateness, 0, len(secs))
	for i, sec := range secs {
		s := SecondLateness{At: from.Add(time.Duration(i) * time.Second), Started: len(sec.late), Skipped: sec.skipped}
		s.P50, s.P99, s.Max = spread(sec.late)
		out = append(out, s)
	}
	return out
}

// Figures count a set of fires over the window and spread their lateness.
type Figures struct {
	Expected int `json:"expected"`
	Started  int `json:"started"`
	Skipped  int `json:"skipped"`
	// NotStarted counts fires handed to an execution that ended without
	// starting (its start could not be recorded, or the slot was lost).
	NotStarted int           `json:"not_started"`
	P50        time.Duration `json:"p50_ns"`
	P99        time.Duration `json:"p99_ns"`
	Max        time.Duration `json:"max_ns"`
}

// count adds f to the figures; a fire that started adds its lateness to late.
func (g *Figures) count(f fire, late *[]time.Duration) {
	switch {
	case f.skipped:
		g.Skipped++
	case f.started != 0:
		*late = append(*late, time.Duration(f.started-f.due))
	default:
		g.NotStarted++
	}
}

// spread sets Started and the spread of the lateness of the fires that started.
func (g *Figures) spread(late []time.Duration) {
	g.Started = len(late)
	g.P50, g.P99, g.Max = spread(late)
}

// SecondLateness is the lateness of the fires scheduled in one second.
type SecondLateness struct {
	At      time.Time     `json:"at"`
	Started int           `json:"started"`
	Skipped int           `json:"skipped"`
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
	Max     time.Duration `json:"max_ns"`
}

// Memory is the heap that idle slots cost, measured in the rebalance phase:
// live heap after a GC with 3 members holding Slots idle slots, minus the
// heap before the members started.
type Memory struct {
	Slots            int     `json:"slots"`
	Members          int     `json:"members"`
	HeapBytes        int64   `json:"heap_bytes"`
	PerSlotPerMember float64 `json:"heap_bytes_per_slot_per_member"`
	// RSSBytes is the growth of the process's resident memory (VmRSS) from
	// before the members started (free memory returned to the OS first) to
	// every slot owned: the heap with the Go runtime's headroom, stacks, what
	// the burst of taking every slot left in use by the runtime and, when
	// EtcdInProcess, etcd's memory too. RSSKeptBytes is the same once the
	// runtime has returned its free memory to the OS (debug.FreeOSMemory),
	// as its scavenger does over time. Zero where /proc is missing.
	RSSBytes                int64   `json:"rss_bytes,omitempty"`
	RSSPer1000PerMember     float64 `json:"rss_bytes_per_1000_slots_per_member,omitempty"`
	RSSKeptBytes            int64   `json:"rss_kept_bytes,omitempty"`
	RSSKeptPer1000PerMember float64 `json:"rss_kept_bytes_per_1000_slots_per_member,omitempty"`
	EtcdInProcess           bool    `json:"etcd_in_process"`
}

// Rebalance is a membership change at many slots.
type Rebalance struct {
	Change string        `json:"change"`
	Slots  int           `json:"slots"`
	Moved  float64       `json:"moved_fraction"`
	Ideal  float64       `json:"ideal_fraction"`
	Settle time.Duration `json:"settle_ns"`
	// Processes: the members were kira run processes (--production).
	Processes bool `json:"processes,omitempty"`
}

// events collects scheduler events from every member.
type events struct {
	mu  sync.Mutex
	all []scheduler.Event
}

func (e *events) add(ev scheduler.Event) {
	if ev.Kind == scheduler.Started {
		return // Finished carries the real start
	}
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

func (e *events) snapshot() []scheduler.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.all)
}

// fires keeps what lateness needs of each fire's Finished or Skipped event,
// in records without pointers: the bench holding hundreds of thousands of
// whole events made every GC cycle of the process (the members' too) mark
// them, and one second in ten came out late at 10,000 slots.
type fires struct {
	command bool                  // the start is the process's (Result.ProcessStarted)
	jobs    map[string]config.Job // by name: a job's jitter says when its fires are due
	mu      sync.Mutex
	all     []fire
}

type fire struct {
	probe     bool // the Config.Probe slot's
	skipped   bool
	scheduled int64 // Unix nanoseconds
	due       int64 // Unix nanoseconds: scheduled plus the slot's jitter offset
	started   int64 // Unix nanoseconds; zero if it never started
}

func (f *fires) add(ev scheduler.Event) {
	if ev.Kind != scheduler.Finished && ev.Kind != scheduler.Skipped {
		return
	}
	r := fire{probe: ev.Slot.Job == probeJob, skipped: ev.Kind == scheduler.Skipped, scheduled: ev.Execution.ScheduledTime.UnixNano()}
	r.due = r.scheduled + int64(f.jobs[ev.Slot.Job].JitterOffset(ev.Slot))
	start := ev.StartedAt
	if f.command || r.probe {
		start = ev.Result.ProcessStarted
	}
	if ev.Kind == scheduler.Finished && !start.IsZero() {
		r.started = start.UnixNano()
	}
	f.mu.Lock()
	f.all = append(f.all, r)
	f.mu.Unlock()
}

func (f *fires) snapshot() []fire {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.all)
}

func noop(context.Context) error { return nil }

var handlers = jobs.Handlers{"noop": noop}

func benchCatalog(cluster string, ttl time.Duration, partitions int, jitter time.Duration) *config.Catalog {
	j := config.Job{Name: "load", Schedule: "@every 1s", Partitions: partitions, Handler: "noop", Jitter: jitter,
		Misfire: config.MisfireFireAll, CatchupWindow: time.Minute, Overlap: config.OverlapSkip,
		Retries: config.Retries{Backoff: time.Second, MaxBackoff: time.Second}}
	return &config.Catalog{Cluster: cluster, Membership: config.Membership{LeaseTTL: ttl}, Jobs: []config.Job{j}}
}

// jobsByName indexes cat's jobs by name.
func jobsByName(cat *config.Catalog) map[string]config.Job {
	out := map[string]config.Job{}
	for _, j := range cat.Jobs {
		out[j.Name] = j
	}
	return out
}

// probeJob is the name of the Config.Probe job.
const probeJob = "sh-probe"

// withProbe adds the Config.Probe job to cat: one slot running `sh -c :`
// every second, with the load job's policies (and jitter).
func withProbe(cat *config.Catalog) {
	j := cat.Jobs[0]
	j.Name, j.Partitions, j.Handler, j.Command = probeJob, 1, "", []string{"sh", "-c", ":"}
	cat.Jobs = append(cat.Jobs, j)
}

func startMembers(cfg Config, cat *config.Catalog, n int, onEvent func(scheduler.Event)) ([]*member, error) {
	var out []*member
	for i := 0; i < n; i++ {
		m, err := startMember(cfg.Etcd, cat, handlers, onEvent)
		if err != nil {
			for _, m := range out {
				m.stop()
			}
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// leading is how many slots ms lead together: cheap enough to poll every
// few milliseconds while thousands of slots change hands. Polling leaders (a
// copy of every member's slots) and building the ring at each poll took
// 1.54 of the 16.55 CPU seconds of a rebalance run at 10,000 slots (kira
// bench --cpuprofile); now too little to be listed.
func leading(ms []*member) int {
	n := 0
	for _, m := range ms {
		n += m.sched.LeadingCount()
	}
	return n
}

// leaders sums who leads what across members.
func leaders(ms []*member) map[shard.Slot]string {
	out := map[shard.Slot]string{}
	for _, m := range ms {
		for s := range m.sched.Leading() {
			out[s] = m.id
		}
	}
	return out
}

func waitFor(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: not settled after %s", timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// spread sorts late and returns its p50, p99 and maximum (zeros when empty).
func spread(late []time.Duration) (p50, p99, maxLate time.Duration) {
	slices.Sort(late)
	if len(late) > 0 {
		maxLate = late[len(late)-1]
	}
	return percentile(late, 0.5), percentile(late, 0.99), maxLate
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return percentile(s, 0.5)
}

// Run measures every scenario the config enables.
func Run(ctx context.Context, cfg Config, progress func(string)) (*Report, error) {
	r := &Report{Etcd: "embedded in this process, " + cfg.EtcdTuning}
	switch {
	case cfg.Cluster != nil:
		r.Etcd = "production shape: three kira etcd processes (fsync, etcd's defaults), members as kira run processes"
	case !cfg.EtcdInProcess:
		r.Etcd = "external: " + strings.Join(cfg.Etcd.Endpoints, ",")
	}
	if cfg.Soak > 0 {
		if cfg.Cluster == nil {
			return r, fmt.Errorf("bench: the soak runs in the production shape only")
		}
		progress(fmt.Sprintf("soak, %d slots firing every second over 3 kira run processes, %s, sampled every %s", cfg.SoakSlots, cfg.Soak, cfg.SoakEvery))
		s, err := procSoak(ctx, cfg, progress)
		r.Soak = s
		return r, err
	}
	for _, ttl := range cfg.TTLs {
		progress(fmt.Sprintf("failover after a crash, lease_ttl %s, %d trials", ttl, cfg.Trials))
		crash := failover
		if cfg.Processes {
			crash = procFailover
		}
		f, err := crash(cfg, ttl)
		if err != nil {
			return r, err
		}
		r.Failover = append(r.Failover, f)
	}
	if cfg.Trials > 0 {
		progress(fmt.Sprintf("graceful handover, %d trials", cfg.Trials))
		stop := handover
		if cfg.Processes {
			stop = procHandover
		}
		h, err := stop(cfg)
		if err != nil {
			return r, err
		}
		r.Handover = h
	}
	for _, n := range cfg.Slots {
		progress(fmt.Sprintf("lateness, %d slots firing every second over 3 members, %s", n, cfg.Duration))
		measure := lateness
		if cfg.Cluster != nil {
			measure = procLateness
		}
		l, err := measure(cfg, n)
		if err != nil {
			return r, err
		}
		r.Lateness = append(r.Lateness, l)
		if cfg.Command {
			progress(fmt.Sprintf("the same %d sh -c : at each second without a scheduler, %s", n, cfg.Duration))
			r.Lateness = append(r.Lateness, forkFloor(ctx, n, cfg.Duration, cfg.Jitter))
		}
	}
	if cfg.Rebalance > 0 {
		progress(fmt.Sprintf("rebalance, %d slots, 3→4→3 members", cfg.Rebalance))
		if cfg.Cluster != nil {
			rb, err := procRebalance(cfg, cfg.Rebalance)
			r.Rebalance = rb
			if err != nil {
				return r, err
			}
		} else {
			rb, mem, err := rebalance(cfg, cfg.Rebalance)
			if err != nil {
				return r, err
			}
			r.Rebalance, r.Memory = rb, mem
		}
	}
	return r, ctx.Err()
}

var clusterSeq int

func cluster(name string) string {
	clusterSeq++
	return fmt.Sprintf("bench-%s-%d-%d", name, time.Now().Unix(), clusterSeq)
}

// ownerOf waits until the single slot is led by the member the ring prefers
// (views have converged) and by nobody else, and returns that member.
func ownerOf(ms []*member) (*member, error) {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.id)
	}
	ring, err := shard.New(ids)
	if err != nil {
		return nil, err
	}
	want := ring.Owner(shard.Slot{Job: "load"})
	var owner *member
	err = waitFor(30*time.Second, func() bool {
		owner = nil
		l := leaders(ms)
		if len(l) != 1 || l[shard.Slot{Job: "load"}] != want {
			return false
		}
		for _, m := range ms {
			if m.id == want {
				owner = m
			}
		}
		return true
	})
	return owner, err
}

// lostFires counts scheduled seconds in [from, to) that no member started.
func lostFires(evs []scheduler.Event, from, to time.Time) int {
	ran := map[int64]bool{}
	for _, e := range evs {
		if e.Kind == scheduler.Finished && !e.StartedAt.IsZero() {
			ran[e.Execution.ScheduledTime.UnixNano()] = true
		}
	}
	return holes(ran, from, to)
}

// holes counts the whole seconds in (from, to) missing from ran, a set of
// scheduled times by Unix nanoseconds (time.Time values of one instant may
// differ as map keys).
func holes(ran map[int64]bool, from, to time.Time) int {
	lost := 0
	for t := from.Truncate(time.Second).Add(time.Second); t.Before(to); t = t.Add(time.Second) {
		if !ran[t.UnixNano()] {
			lost++
		}
	}
	return lost
}

// ownerChange runs trials of one change of owner: n members run a 1s job;
// once the ring's owner has run it twice, act is applied to the owner at
// offset() into a second, and took reports (from the events) how long after
// that the change was complete. It returns the samples and the fires no
// member started around the change.
func ownerChange(cfg Config, name string, ttl time.Duration, n int, offset func() time.Duration,
	act func(owner *member), took func(e scheduler.Event, owner *member, at time.Time) (time.Duration, bool)) ([]time.Duration, int, error) {
	var samples []time.Duration
	lost := 0
	for trial := 0; trial < cfg.Trials; trial++ {
		ev := &events{}
		ms, err := startMembers(cfg, benchCatalog(cluster(name), ttl, 1, 0), n, ev.add)
		if err != nil {
			return samples, lost, err
		}
		owner, err := ownerOf(ms)
		if err == nil {
			err = waitFor(10*time.Second, func() bool { return countFinished(ev.snapshot(), owner.id) >= 2 })
		}
		if err != nil {
			return samples, lost, err
		}
		first := time.Now()
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + offset())))
		at := time.Now()
		act(owner)
		var d time.Duration
		err = waitFor(ttl+30*time.Second, func() bool {
			for _, e := range ev.snapshot() {
				if got, ok := took(e, owner, at); ok {
					d = got
					return true
				}
			}
			return false
		})
		if err != nil {
			return samples, lost, err
		}
		// Let the catch-up and one more fire happen, then count holes.
		end := time.Now().Add(1500 * time.Millisecond)
		time.Sleep(time.Until(end) + 500*time.Millisecond)
		lost += lostFires(ev.snapshot(), first, end)
		samples = append(samples, d)
		for _, m := range ms {
			if m != owner {
				m.stop()
			}
		}
	}
	return samples, lost, nil
}

// failover crashes the owner of a 1s job at a random moment of a second and
// times the first execution by the next owner (missed fires are caught up at
// once: misfire fire-all). The moment is random because etcd checks for
// expired leases every 500 ms on a fixed ticker: crashes at one offset into
// the second would all meet that ticker at one phase, and a run's samples
// would fall on a single grid instead of spreading as real crashes do.
func failover(cfg Config, ttl time.Duration) (Failover, error) {
	anyMoment := func() time.Duration { return rand.N(time.Second) }
	samples, lost, err := ownerChange(cfg, "failover", ttl, 3, anyMoment, (*member).crash,
		func(e scheduler.Event, owner *member, at time.Time) (time.Duration, bool) {
			ok := e.Kind == scheduler.Finished && e.Member != owner.id && !e.StartedAt.IsZero() && e.StartedAt.After(at)
			return e.StartedAt.Sub(at), ok
		})
	if err != nil {
		return Failover{TTL: ttl}, err
	}
	return failoverFigures(ttl, samples, lost), nil
}

// failoverFigures sums up a failover run: its samples' median and worst,
// and the median as a ratio to the TTL.
func failoverFigures(ttl time.Duration, samples []time.Duration, lost int) Failover {
	med := median(samples)
	return Failover{TTL: ttl, Samples: samples, Median: med, Worst: slices.Max(samples), RatioTTL: float64(med) / float64(ttl), Lost: lost}
}

// handoverFigures sums up a handover run: its samples' median and worst.
func handoverFigures(samples []time.Duration, lost int) *Handover {
	return &Handover{Samples: samples, Median: median(samples), Worst: slices.Max(samples), Lost: lost}
}

func countFinished(evs []scheduler.Event, member string) int {
	n := 0
	for _, e := range evs {
		if e.Kind == scheduler.Finished && e.Member == member {
			n++
		}
	}
	return n
}

// handover stops the owner of an idle 1s job gracefully, a quarter into a
// second, and times until the next owner holds the slot (won its election).
func handover(cfg Config) (*Handover, error) {
	quarter := func() time.Duration { return 250 * time.Millisecond }
	samples, lost, err := ownerChange(cfg, "handover", 6*time.Second, 2, quarter,
		func(owner *member) { go owner.stop() },
		func(e scheduler.Event, owner *member, at time.Time) (time.Duration, bool) {
			return e.At.Sub(at), e.Kind == scheduler.Acquired && e.Member != owner.id && e.At.After(at)
		})
	if err != nil {
		return nil, err
	}
	return handoverFigures(samples, lost), nil
}

// grpcCalls reads the embedded etcd's own count of handled gRPC calls.
func grpcCalls() map[string]int {
	out := map[string]int{}
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != "grpc_server_handled_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "grpc_method" {
					out[l.GetValue()] += int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return out
}

// keysWritten reads the embedded etcd's own count of keys put and deleted.
func keysWritten() int { return int(counters("etcd_mvcc_put_total", "etcd_mvcc_delete_total")) }

// bytesReceived reads the embedded etcd's own count of bytes its clients sent.
func bytesReceived() float64 { return counters("etcd_network_client_grpc_received_bytes_total") }

// counters sums the embedded etcd's counters of the names given.
func counters(names ...string) float64 {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return 0
	}
	n := 0.0
	for _, mf := range mfs {
		if slices.Contains(names, mf.GetName()) {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// metricsURLs are the /metrics URLs of an etcd the bench did not start in
// its process (--etcd), whose cost it then reads from etcd's own metrics.
func metricsURLs(cfg Config) []string {
	if cfg.EtcdInProcess {
		return nil
	}
	var out []string
	for _, ep := range cfg.Etcd.Endpoints {
		out = append(out, strings.TrimSuffix(ep, "/")+"/metrics")
	}
	return out
}

// useLoad makes the lateness load job of cat what cfg says: `sh -c :`, an
// HTTP job answered with cfg.OutputBytes bytes by a server it starts (the
// returned function stops it), or the Go handler.
func useLoad(cfg Config, cat *config.Catalog, res *Lateness) (stop func(), err error) {
	j := &cat.Jobs[0]
	switch {
	case cfg.Command:
		j.Handler, j.Command = "", []string{"sh", "-c", ":"}
		res.Executor = "sh -c :" // started: the process exec'd (Result.ProcessStarted)
	case cfg.OutputBytes > 0:
		url, stop, err := loadServer(cfg.OutputBytes)
		if err != nil {
			return nil, err
		}
		j.Handler, j.HTTP = "", &config.HTTPSpec{URL: url, Method: http.MethodGet}
		res.Executor = fmt.Sprintf("http, %d-byte answer", cfg.OutputBytes)
		return stop, nil
	}
	return func() {}, nil
}

// lateness runs n slots firing every second over 3 members and measures
// actual start − scheduled time over the window.
func lateness(cfg Config, n int) (Lateness, error) {
	res := Lateness{Slots: n, Executor: "go-handler", Jitter: cfg.Jitter}
	cat := benchCatalog(cluster("lateness"), 6*time.Second, n, cfg.Jitter)
	stopLoad, err := useLoad(cfg, cat, &res)
	if err != nil {
		return res, err
	}
	defer stopLoad()
	total := n
	if cfg.Probe {
		withProbe(cat)
		total++
	}
	ev := &fires{command: cfg.Command, jobs: jobsByName(cat)}
	began := time.Now()
	ms, err := startMembers(cfg, cat, 3, ev.add)
	if err != nil {
		return res, err
	}
	defer func() {
		for _, m := range ms {
			m.stop()
		}
	}()
	if err := waitFor(5*time.Minute, func() bool { return leading(ms) == total || lostMember(ms) != nil }); err != nil {
		return res, fmt.Errorf("%w: %d of %d slots owned", err, len(leaders(ms)), total)
	}
	if err := lostMember(ms); err != nil {
		return res, fmt.Errorf("bench: lateness at %d slots, while the slots were being taken: %w", n, err)
	}
	res.Settle = time.Since(began)
	// Measure whole seconds, from the first after the warm-up: the burst of
	// taking every slot at once (campaigns, fences, first records) takes a
	// few seconds to work off at 10,000 slots (BySecond shows it).
	from := time.Now().Add(cfg.Warmup).Truncate(time.Second).Add(time.Second)
	to := from.Add(cfg.Duration)
	// The counters are read half a second before the window's first and
	// last instants: a read gathers etcd's whole metrics registry, twice,
	// and at an instant it took the CPU from the fires measured. They count
	// a span as long as the window, in the same steady state.
	time.Sleep(time.Until(from.Add(-time.Second / 2)))
	external := metricsURLs(cfg) // what an etcd of its own says it paid
	extBefore, extOK := readMetrics(external)
	before, keysBefore, bytesBefore, cpuBefore := grpcCalls(), keysWritten(), bytesReceived(), cpuTime()
	time.Sleep(time.Until(to.Add(-time.Second / 2)))
	after, keysAfter, bytesAfter, cpuAfter := grpcCalls(), keysWritten(), bytesReceived(), cpuTime()
	extAfter, extAfterOK := readMetrics(external)
	time.Sleep(time.Until(to))
	res.CPU, res.EtcdInProcess = cpuAfter-cpuBefore, cfg.EtcdInProcess
	res.CPUPer1000 = res.CPU.Seconds() / cfg.Duration.Seconds() / 3 / (float64(n) / 1000)
	time.Sleep(2 * time.Second) // let the window's runs finish
	if err := lostMember(ms); err != nil {
		res.MemberLost = err.Error()
	}
	var late []time.Duration
	bySecond := make([]secondTally, (cfg.Duration+time.Second-1)/time.Second)
	var probe *Figures
	var probeLate []time.Duration
	if cfg.Probe {
		probe = &Figures{Expected: int(cfg.Duration / time.Second)}
	}
	for _, f := range ev.snapshot() {
		if f.scheduled < from.UnixNano() || f.scheduled >= to.UnixNano() {
			continue
		}
		if f.probe {
			probe.count(f, &probeLate)
			continue
		}
		sec := &bySecond[time.Duration(f.scheduled-from.UnixNano())/time.Second]
		res.count(f, &late)
		switch {
		case f.skipped:
			sec.skipped++
		case f.started != 0:
			sec.late = append(sec.late, late[len(late)-1])
		}
	}
	res.BySecond = tallied(from, bySecond)
	res.Expected = n * int(cfg.Duration/time.Second)
	res.spread(late)
	if probe != nil {
		probe.spread(probeLate)
		res.Probe = probe
	}
	res.EtcdCalls = map[string]int{}
	writes := 0
	for method, c := range after {
		if d := c - before[method]; d > 0 {
			res.EtcdCalls[method] = d
			if method == "Txn" || method == "Put" || method == "DeleteRange" {
				writes += d
			}
		}
	}
	if res.Started > 0 {
		res.PerExecute = float64(writes) / float64(res.Started)
		res.KeysPerExecute = float64(keysAfter-keysBefore) / float64(res.Started)
		res.BytesPerExecute = (bytesAfter - bytesBefore) / float64(res.Started)
	}
	if extOK && extAfterOK {
		res.EtcdCost = cost(extBefore, extAfter, res.Started)
	}
	return res, nil
}

// forkFloor starts n `sh -c :` at every whole second of d through Kira's
// command executor, from goroutines parked until the second (no scheduler,
// no etcd), and measures when each process had started: the least that
// forking at the fire's time can cost on this machine. With jitter, each
// goroutine then sleeps until its slot's offset in the second, the one the
// scheduler would give it, and lateness counts from there.
func forkFloor(ctx context.Context, n int, d, jitter time.Duration) Lateness {
	res := Lateness{Slots: n, Executor: "sh -c :, no scheduler", Jitter: jitter, NoScheduler: true, Figures: Figures{Expected: n * int(d/time.Second)}}
	ex := &jobs.Command{Argv: []string{"sh", "-c", ":"}}
	load := config.Job{Name: "load", Jitter: jitter}
	var late []time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	from := time.Now().Truncate(time.Second).Add(time.Second)
	for at := from; at.Before(from.Add(d)) && ctx.Err() == nil; at = at.Add(time.Second) {
		gate := make(chan struct{})
		for i := range n {
			due := at.Add(load.JitterOffset(shard.Slot{Job: load.Name, Partition: i}))
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				if jitter > 0 {
					time.Sleep(time.Until(due))
				}
				r := ex.Execute(ctx, jobs.Execution{Job: "floor", ScheduledTime: at})
				mu.Lock()
				defer mu.Unlock()
				if r.ProcessStarted.IsZero() {
					res.NotStarted++
					return
				}
				late = append(late, r.ProcessStarted.Sub(due))
			}()
		}
		time.Sleep(time.Until(at))
		close(gate)
	}
	wg.Wait()
	res.spread(late)
	return res
}

// ringOf is the ring over the members' ids: who should hold each slot.
func ringOf(members []*member) *shard.Ring {
	var ids []string
	for _, m := range members {
		ids = append(ids, m.id)
	}
	ring, _ := shard.New(ids)
	return ring
}

// movedShare is the share of n slots whose leader differs from before to after.
func movedShare(before, after map[shard.Slot]string, n int) float64 {
	moved := 0
	for s, o := range after {
		if before[s] != o {
			moved++
		}
	}
	return float64(moved) / float64(n)
}

// misplaced counts the slots of l held by a member the ring does not prefer.
func misplaced(ring *shard.Ring, l map[shard.Slot]string) int {
	n := 0
	for s, owner := range l {
		if ring.Owner(s) != owner {
			n++
		}
	}
	return n
}

// describeMisplaced names up to three slots not held by their preferred
// owner, with the election keys etcd has for each, for a settle that timed
// out.
func describeMisplaced(ms []*member, cat *config.Catalog) string {
	ring := ringOf(ms)
	var out []string
	for s, owner := range leaders(ms) {
		if want := ring.Owner(s); want != owner && len(out) < 3 {
			line := fmt.Sprintf("%s held by %s, preferred %s; keys:", s, owner, want)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err := ms[0].cli.Get(ctx, keyspace.Election(cat.Cluster, s)+"/", clientv3.WithPrefix())
			cancel()
			if err != nil {
				line += " " + err.Error()
			} else {
				for _, kv := range resp.Kvs {
					line += fmt.Sprintf(" %s=%s@%d", kv.Key, kv.Value, kv.CreateRevision)
				}
			}
			out = append(out, line)
		}
	}
	return strings.Join(out, "; ")
}

// rebalance adds a fourth member to n slots over three, then removes it.
func rebalance(cfg Config, n int) ([]Rebalance, *Memory, error) {
	ev := &events{}
	cat := benchCatalog(cluster("rebalance"), 6*time.Second, n, 0)
	cat.Jobs[0].Schedule = "@hourly" // idle slots: ownership is what is measured
	heapBefore := liveHeap()
	debug.FreeOSMemory()
	rssBefore := residentBytes()
	ms, err := startMembers(cfg, cat, 3, ev.add)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		for _, m := range ms {
			m.stop()
		}
	}()
	// settled is built once per view: the ring is not cheap to build.
	settled := func(members []*member) func() bool {
		ring := ringOf(members)
		return func() bool {
			return leading(members) == n && misplaced(ring, leaders(members)) == 0
		}
	}
	check := settled(ms)
	if err := waitFor(5*time.Minute, func() bool { return check() || lostMember(ms) != nil }); err != nil {
		return nil, nil, fmt.Errorf("%w (initial: %d of %d slots held; %s)", err, len(leaders(ms)), n, describeMisplaced(ms, cat))
	}
	if err := lostMember(ms); err != nil {
		return nil, nil, fmt.Errorf("bench: rebalance, while the slots were being taken: %w", err)
	}
	// The events kept for the other phases are not the members' memory.
	ev.mu.Lock()
	ev.all = nil
	ev.mu.Unlock()
	heap := liveHeap() - heapBefore
	mem := &Memory{Slots: n, Members: 3, HeapBytes: heap, PerSlotPerMember: float64(heap) / float64(n) / 3, EtcdInProcess: cfg.EtcdInProcess}
	if rss := residentBytes(); rss > 0 && rssBefore > 0 {
		mem.RSSBytes = rss - rssBefore
		mem.RSSPer1000PerMember = float64(mem.RSSBytes) / (float64(n) / 1000) / 3
		debug.FreeOSMemory()
		mem.RSSKeptBytes = residentBytes() - rssBefore
		mem.RSSKeptPer1000PerMember = float64(mem.RSSKeptBytes) / (float64(n) / 1000) / 3
	}
	if cfg.HeapProfile != "" {
		if err := writeHeapProfile(cfg.HeapProfile); err != nil {
			return nil, nil, err
		}
	}
	var out []Rebalance
	// measure applies a membership change (act updates ms) and waits until
	// every slot is held by its preferred owner in the new view.
	measure := func(change string, act func() error, ideal float64) error {
		before := leaders(ms)
		start := time.Now()
		if err := act(); err != nil {
			return err
		}
		check := settled(ms)
		if err := waitFor(5*time.Minute, func() bool { return check() || lostMember(ms) != nil }); err != nil {
			l := leaders(ms)
			return fmt.Errorf("%w (%s: %d of %d slots held, %d of them not by their preferred owner; %s)", err, change, len(l), n, misplaced(ringOf(ms), l), describeMisplaced(ms, cat))
		}
		if err := lostMember(ms); err != nil {
			return fmt.Errorf("bench: rebalance %s: %w", change, err)
		}
		took := time.Since(start)
		out = append(out, Rebalance{Change: change, Slots: n, Moved: movedShare(before, leaders(ms), n), Ideal: ideal, Settle: took})
		return nil
	}
	if err := measure("3→4", func() error {
		m, err := startMember(cfg.Etcd, cat, handlers, ev.add)
		if err == nil {
			ms = append(ms, m)
		}
		return err
	}, 0.25); err != nil {
		return out, mem, err
	}
	return out, mem, measure("4→3", func() error {
		fourth := ms[3]
		ms = ms[:3]
		fourth.stop()
		return nil
	}, 0.25)
}

// cpuTime is this process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// residentBytes is the process's resident memory (VmRSS), or 0 where
// /proc/self/status cannot be read.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// liveHeap is the heap still in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
