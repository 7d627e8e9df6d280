package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdclient"
)

// Config says what to measure.
type Config struct {
	Etcd     etcdclient.Config // the etcd to run against
	Slots    []int             // lateness: slot counts, each over 3 members
	Duration time.Duration     // lateness: measuring window
	Warmup   time.Duration     // lateness and soak: from every slot owned to the window
	// Command makes the lateness load a command job (commandArgv) instead
	// of the Go handler noop; its lateness counts to when its process ran.
	Command bool
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
	// Every is the lateness load's period (its "@every", anchored so every
	// member fires at the same instants); zero is every second. A window
	// counts the instants in it: Duration is a whole number of periods.
	Every time.Duration
	// Jobs makes the lateness load n jobs of one slot each instead of one
	// job of n partitions: a catalog with one schedule per customer
	// (docs/benchmarks.md, Many jobs), measured the same way.
	Jobs bool
	// Probe adds to the lateness runs one more slot, a command job
	// (commandArgv) every second, whose lateness (to when its process ran)
	// is reported on its own (Lateness.Probe): a command job on a loaded
	// scheduler, rather than every slot forking at once.
	Probe bool
	// Overlap is the lateness load's overlap policy (config.DefaultOverlap
	// if empty): what a slot's fire does while its previous run still runs,
	// which past capacity decides what the fires that cannot run cost.
	Overlap config.Overlap
	TTLs    []time.Duration // failover: lease TTLs
	// Binary is the kira binary every member runs as: `kira run`
	// processes, the shape users deploy.
	Binary    string
	Trials    int // failover and handover: trials per setting
	Rebalance int // rebalance: slot count (0 skips)
	// EtcdInProcess says etcd runs inside this process (kira bench without
	// --etcd or --production): its cost is then read from this process.
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
	// JobWrites, if set, runs only the job-writes scenario, in the
	// production shape (Cluster must be set): jobs created and deleted one
	// by one through the members' API (procJobWrites).
	JobWrites *JobWritesConfig
	// Cluster, if set, is the production shape: etcd is these three
	// `kira etcd` processes (Etcd their endpoints), lateness runs with the
	// members as `kira run` processes of Binary and reports what etcd paid,
	// and failover and handover run with processes.
	Cluster *EtcdCluster
}

// overlap is the lateness load's overlap policy.
func (cfg Config) overlap() config.Overlap {
	if cfg.Overlap == "" {
		return config.DefaultOverlap
	}
	return cfg.Overlap
}

// every is the lateness load's period.
func (cfg Config) every() time.Duration {
	if cfg.Every <= 0 {
		return time.Second
	}
	return cfg.Every
}

// loadText says what the lateness load is and how often it fires, for
// the progress lines.
func (cfg Config) loadText(n int) string {
	what := fmt.Sprintf("%d slots", n)
	if cfg.Jobs {
		what = fmt.Sprintf("%d jobs of one slot", n)
	}
	if cfg.every() == time.Second {
		return what + " firing every second"
	}
	return what + " firing every " + cfg.every().String()
}

// Run measures every scenario the config enables, with every member a
// `kira run` process of cfg.Binary.
func Run(ctx context.Context, cfg Config, progress func(string)) (*Report, error) {
	r := &Report{Etcd: "embedded in this process, " + cfg.EtcdTuning + "; members as kira run processes"}
	switch {
	case cfg.Binary == "":
		return r, fmt.Errorf("bench: no kira binary to run the members as")
	case cfg.Cluster != nil:
		r.Etcd = "production shape: three kira etcd processes (fsync, etcd's defaults), members as kira run processes"
	case !cfg.EtcdInProcess:
		r.Etcd = "external: " + strings.Join(cfg.Etcd.Endpoints, ",") + "; members as kira run processes"
	}
	if cfg.JobWrites != nil {
		if cfg.Cluster == nil {
			return r, fmt.Errorf("bench: the job writes run in the production shape only")
		}
		w, err := procJobWrites(ctx, cfg, progress)
		r.JobWrites = w
		return r, err
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
		progress(fmt.Sprintf("failover after a SIGKILL, lease_ttl %s, %d trials", ttl, cfg.Trials))
		f, err := procFailover(cfg, ttl)
		if err != nil {
			return r, err
		}
		r.Failover = append(r.Failover, f)
	}
	if cfg.Trials > 0 {
		progress(fmt.Sprintf("graceful handover (SIGTERM), %d trials", cfg.Trials))
		h, err := procHandover(cfg)
		if err != nil {
			return r, err
		}
		r.Handover = h
	}
	for _, n := range cfg.Slots {
		progress(fmt.Sprintf("lateness, %s over 3 members, %s", cfg.loadText(n), cfg.Duration))
		l, err := procLateness(cfg, n)
		if err != nil {
			return r, err
		}
		r.Lateness = append(r.Lateness, l)
		if cfg.Command {
			progress(fmt.Sprintf("the same %d commands at each second without a scheduler, %s", n, cfg.Duration))
			r.Lateness = append(r.Lateness, forkFloor(ctx, n, cfg.Duration, cfg.Jitter))
		}
	}
	if cfg.Rebalance > 0 {
		for _, many := range []bool{false, true} {
			progress(fmt.Sprintf("rebalance, %d slots (%s), 3→4→3 members", cfg.Rebalance, map[bool]string{false: "one job", true: "jobs of 1 to 16 partitions"}[many]))
			rb, mem, err := procRebalance(cfg, cfg.Rebalance, many)
			r.Rebalance = append(r.Rebalance, rb...)
			if !many {
				r.Memory = mem
			}
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
