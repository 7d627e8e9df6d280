package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/etcdclient"
	"github.com/kira-scheduler/kira/jobs"
	"github.com/kira-scheduler/kira/scheduler"
	"github.com/kira-scheduler/kira/shard"
)

// Config says what to measure.
type Config struct {
	Etcd     etcdclient.Config // the etcd to run against
	Slots    []int             // lateness: slot counts, each over 3 members
	Duration time.Duration     // lateness: measuring window
	Warmup   time.Duration     // lateness and soak: from every slot owned to the window
	Command  bool              // lateness: run `sh -c :` instead of the Go handler noop
	// HTTP makes the lateness load an HTTP job whose answer, of OutputBytes
	// bytes, is its output: the write volume of jobs that print, rather
	// than of the silent Go handler noop (jobs.Builtin, which kira run has
	// too). The bench serves it. The soak's load is always this job.
	HTTP        bool
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
	// Overlap is the lateness load's overlap policy (config.DefaultOverlap
	// if empty): what a slot's fire does while its previous run still runs,
	// which past capacity decides what the fires that cannot run cost.
	Overlap config.Overlap
	TTLs    []time.Duration // failover: lease TTLs
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

var handlers = jobs.Builtin()

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

// overlap is the lateness load's overlap policy.
func (cfg Config) overlap() config.Overlap {
	if cfg.Overlap == "" {
		return config.DefaultOverlap
	}
	return cfg.Overlap
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
			rb, err := procRebalance(cfg, cfg.Rebalance, false)
			r.Rebalance = rb
			if err != nil {
				return r, err
			}
			progress(fmt.Sprintf("rebalance, %d slots of jobs of 1 to 16 partitions, 3→4→3 members", cfg.Rebalance))
			rb, err = procRebalance(cfg, cfg.Rebalance, true)
			r.Rebalance = append(r.Rebalance, rb...)
			if err != nil {
				return r, err
			}
		} else {
			rb, mem, err := rebalance(cfg, cfg.Rebalance, false)
			if err != nil {
				return r, err
			}
			r.Rebalance, r.Memory = rb, mem
			progress(fmt.Sprintf("rebalance, %d slots of jobs of 1 to 16 partitions, 3→4→3 members", cfg.Rebalance))
			rb, _, err = rebalance(cfg, cfg.Rebalance, true)
			r.Rebalance = append(r.Rebalance, rb...)
			if err != nil {
				return r, err
			}
		}
	}
	return r, ctx.Err()
}

var clusterSeq int

func cluster(name string) string {
	clusterSeq++
	return fmt.Sprintf("bench-%s-%d-%d", name, time.Now().Unix(), clusterSeq)
}
