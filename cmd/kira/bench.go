package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	rtmetrics "runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/bench"
	"github.com/kira-scheduler/kira/internal/bench/charts"
	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/kira-scheduler/kira/internal/etcdnode"
	"github.com/spf13/cobra"
)

func (c *cli) benchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure failover, handover, lateness, rebalance and memory (docs/benchmarks.md)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.slotsSet = cmd.Flags().Changed("slots")
			f.http = cmd.Flags().Changed("output-bytes")
			return c.bench(f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.slots, "slots", "100,1000,10000", "lateness: comma-separated slot counts (empty skips)")
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "lateness: measuring window")
	fs.DurationVar(&f.warmup, "warmup", 10*time.Second, "lateness and soak: wait this long after every slot is owned before measuring")
	fs.BoolVar(&f.command, "sh", false, "lateness: the load is a command job, `date +%s.%N`, instead of the Go handler noop; its lateness counts to when its process ran (the instant it printed)")
	fs.DurationVar(&f.jitter, "jitter", 0, "lateness: spread the load's fires: each slot fires at its own fixed offset in [0, jitter) after the second (the job's jitter); lateness counts from there")
	fs.DurationVar(&f.every, "every", time.Second, "lateness: the load fires every this long (whole seconds; --duration a whole number of them), at the same instants on every member")
	fs.BoolVar(&f.jobs, "jobs", false, "lateness: the load is one job of one slot for each of --slots (one schedule per customer) instead of one job of that many partitions")
	fs.IntVar(&f.outputBytes, "output-bytes", 0, "lateness: the load is an HTTP job whose answer, its output, is this many bytes (served by the bench), instead of the Go handler noop (built into kira run); soak: its HTTP job's answer")
	fs.StringVar(&f.overlap, "overlap", string(config.DefaultOverlap), "lateness: the load job's overlap policy (skip, queue, replace, allow): what a fire does while the slot's previous run still runs, which past capacity decides what the fires that cannot run cost")
	fs.BoolVar(&f.probe, "sh-probe", false, "lateness: add one slot running the command job of --sh every second and report its lateness (to when its process ran) on its own")
	fs.StringVar(&f.ttls, "ttls", "2s,6s,15s", "failover: comma-separated lease TTLs (empty skips)")
	fs.IntVar(&f.trials, "trials", 9, "failover and handover: trials each (0 skips handover)")
	fs.IntVar(&f.rebalance, "rebalance", 10000, "rebalance: slots (0 skips)")
	f.output.register(fs)
	fs.BoolVar(&f.production, "production", false, "the production shape: etcd as three kira etcd processes of this binary (fsync, etcd's defaults), lateness with the members as kira run processes and what etcd paid per 1,000 executions, failover and handover with processes")
	fs.DurationVar(&f.soak, "soak", 0, "run only the soak, in the production shape, for this long: one --slots count (default 1000) firing every second, etcd's database size, the members' resident memory and goroutines, and executions, skips and failures sampled every --soak-every")
	fs.DurationVar(&f.soakEvery, "soak-every", 15*time.Second, "soak and --churn: sampling interval")
	fs.IntVar(&f.jobWrites, "job-writes", 0, "run only the job writes, in the production shape: this many jobs created one by one through the members' API (PUT /v1/jobs/{job}) by --writers clients over --stored-jobs idle jobs, each firing every 10s, then deleted; the writes' rate and latency, each created job's first fire, fires after a delete")
	fs.IntVar(&f.storedJobs, "stored-jobs", 90000, "job writes: idle jobs stored before the writes (the created ones count toward the catalog's 100,000)")
	fs.IntVar(&f.writers, "writers", 8, "job writes: concurrent clients")
	fs.DurationVar(&f.churn, "churn", 0, "job writes: then create and delete jobs at --churn-rate a second each for this long, sampling etcd's database and the members' memory every --soak-every")
	fs.IntVar(&f.churnRate, "churn-rate", 20, "job writes: creates (and deletes) a second during --churn")
	fs.BoolVar(&f.etcdFast, "etcd-fast", false, "with no --etcd: tune the embedded etcd as the tests do (no fsync, 20 ms ticks) instead of as kira run does")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole bench to this file (go tool pprof)")
	fs.StringVar(&f.plot, "plot", "", "write SVG charts of what the run measured into this directory: lateness.svg (p50, p99 and fires started against fires a second), failover.svg (each failover and handover trial), soak.svg (etcd's database and the members' memory over time)")
	return cmd
}

type benchFlags struct {
	slots, ttls                               string
	duration, warmup, jitter, soak, soakEvery time.Duration
	every                                     time.Duration
	command, probe, etcdFast, production      bool
	jobs                                      bool
	slotsSet                                  bool // --slots was given
	http                                      bool // --output-bytes was given
	trials, rebalance, outputBytes            int
	jobWrites, storedJobs, writers, churnRate int
	churn                                     time.Duration
	output                                    output
	cpuProfile, overlap, plot                 string
}

func (c *cli) bench(f benchFlags) error {
	stdout, stderr := c.stdout, c.stderr
	cfg := bench.Config{Duration: f.duration, Warmup: f.warmup, Command: f.command, Jitter: f.jitter, Probe: f.probe, Trials: f.trials, Rebalance: f.rebalance, OutputBytes: f.outputBytes,
		HTTP: f.http, Overlap: config.Overlap(f.overlap), Every: f.every, Jobs: f.jobs}
	if !cfg.Overlap.Known() {
		return fmt.Errorf("kira bench: --overlap %q is not one of skip, queue, replace, allow", f.overlap)
	}
	if err := everyValid(f); err != nil {
		return err
	}
	if f.soak > 0 {
		if err := soakConfig(&f, &cfg); err != nil {
			return err
		}
	}
	if f.jobWrites > 0 {
		if f.storedJobs < 1 || f.writers < 1 || f.churnRate < 1 || f.storedJobs+f.jobWrites > config.MaxJobs {
			return fmt.Errorf("kira bench: --job-writes %d over --stored-jobs %d: want positive counts, --writers and --churn-rate too, and at most %d jobs in all (the catalog's limit)", f.jobWrites, f.storedJobs, config.MaxJobs)
		}
		f.production, f.slots, f.ttls, f.trials, f.rebalance = true, "", "", 0, 0
		cfg.Trials, cfg.Rebalance, cfg.SoakEvery = 0, 0, f.soakEvery
		cfg.JobWrites = &bench.JobWritesConfig{Stored: f.storedJobs, Clients: f.writers, Creates: f.jobWrites, CreatedEvery: 10 * time.Second, Churn: f.churn, ChurnRate: f.churnRate}
	}
	for _, s := range etcdclient.SplitList(f.slots) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("kira bench: --slots: %q is not a positive number", s)
		}
		cfg.Slots = append(cfg.Slots, n)
	}
	for _, s := range etcdclient.SplitList(f.ttls) {
		d, err := time.ParseDuration(s)
		if err != nil || d < 2*time.Second || d%time.Second != 0 {
			return fmt.Errorf("kira bench: --ttls: %q is not a whole number of seconds ≥ 2s", s)
		}
		cfg.TTLs = append(cfg.TTLs, d)
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("kira bench: %w", err)
	}
	cfg.Binary = bin
	cfg.Etcd = c.etcdConfig("")
	switch {
	case f.production && len(cfg.Etcd.Endpoints) > 0:
		return fmt.Errorf("kira bench: --production and --soak start their own etcd cluster; leave out --etcd")
	case f.production:
		dir, err := os.MkdirTemp("", "kira-bench-etcd")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cluster, err := bench.StartEtcdCluster(cfg.Binary, dir)
		if err != nil {
			return err
		}
		defer cluster.Stop()
		cfg.Cluster, cfg.Etcd = cluster, etcdclient.Config{Endpoints: cluster.Endpoints}
	case len(cfg.Etcd.Endpoints) == 0:
		dir, err := os.MkdirTemp("", "kira-bench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		tuning := etcdnode.Production
		if f.etcdFast {
			tuning = etcdnode.Fast
		}
		e, err := etcdnode.StartLocal(dir, tuning)
		if err != nil {
			return fmt.Errorf("kira bench: %w", err)
		}
		defer e.Close()
		cfg.Etcd, cfg.EtcdInProcess, cfg.EtcdTuning = etcdclient.Config{Endpoints: etcdnode.ClientURLs(e)}, true, tuning.String()
		useHostingEtcdGC(os.Getenv("GOGC"))
	}
	if f.cpuProfile != "" {
		prof, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		defer prof.Close()
		if err := pprof.StartCPUProfile(prof); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	gogc := []rtmetrics.Sample{{Name: "/gc/gogc:percent"}}
	rtmetrics.Read(gogc)
	fmt.Fprintf(stderr, "bench: GOMAXPROCS %d, GOGC %d\n", runtime.GOMAXPROCS(0), gogc[0].Value.Uint64())
	rep, err := bench.Run(ctx, cfg, func(s string) { fmt.Fprintln(stderr, "bench:", s) })
	if rep != nil {
		f.output.print(stdout, rep, func(w io.Writer) error { printBench(w, rep); return nil })
		if f.plot != "" {
			paths, perr := charts.Write(f.plot, rep)
			for _, p := range paths {
				fmt.Fprintln(stderr, "bench: wrote", p)
			}
			err = errors.Join(err, perr)
		}
	}
	return err
}

// everyValid checks --every: whole seconds, a window of whole periods, and
// every second with --sh, whose floor forks every second.
func everyValid(f benchFlags) error {
	switch {
	case f.every < time.Second || f.every%time.Second != 0:
		return fmt.Errorf("kira bench: --every %s: want a whole number of seconds, at least 1s", f.every)
	case f.duration%f.every != 0:
		return fmt.Errorf("kira bench: --duration %s is not a whole number of --every (%s)", f.duration, f.every)
	case f.command && f.every != time.Second:
		return fmt.Errorf("kira bench: --every %s with --sh: the floor it compares with forks every second; leave --every out", f.every)
	}
	return nil
}

// soakConfig makes cfg the soak's: the production shape, one slot count
// (1000 unless --slots names one), and no other scenario.
func soakConfig(f *benchFlags, cfg *bench.Config) error {
	slots := etcdclient.SplitList(f.slots)
	if !f.slotsSet {
		slots = []string{"1000"}
	}
	n, err := 0, error(nil)
	if len(slots) == 1 {
		n, err = strconv.Atoi(slots[0])
	}
	switch {
	case len(slots) != 1 || err != nil || n < 1:
		return fmt.Errorf("kira bench: --soak takes one --slots count, a positive number; got %q", f.slots)
	case f.soakEvery <= 0 || f.soakEvery > f.soak:
		return fmt.Errorf("kira bench: --soak-every %s: want more than 0 and at most --soak (%s)", f.soakEvery, f.soak)
	case f.overlap != string(config.DefaultOverlap):
		return fmt.Errorf("kira bench: --overlap %s: the soak runs the job with the defaults a user gets; leave out --overlap", f.overlap)
	case f.command || f.probe:
		return fmt.Errorf("kira bench: --sh and --sh-probe are lateness loads; the soak runs its own HTTP job: leave them out with --soak")
	}
	f.production, f.slots, f.ttls, f.trials, f.rebalance = true, "", "", 0, 0
	cfg.Soak, cfg.SoakSlots, cfg.SoakEvery, cfg.Trials, cfg.Rebalance = f.soak, n, f.soakEvery, 0, 0
	return nil
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
}

// executorText is a lateness row's executor, with its jitter and overlap
// policy if not the default.
func executorText(l bench.Lateness) string {
	text := l.Executor
	if l.Jobs {
		text += ", a job a slot"
	}
	if l.Every > time.Second {
		text += ", every " + l.Every.String()
	}
	if l.Jitter > 0 {
		text += ", jitter " + l.Jitter.String()
	}
	if l.Overlap != "" && l.Overlap != string(config.DefaultOverlap) {
		text += ", overlap " + l.Overlap
	}
	return text
}

func printBench(w io.Writer, r *bench.Report) {
	fmt.Fprintf(w, "etcd: %s\n\n", r.Etcd)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(r.Failover) > 0 {
		fmt.Fprintln(tw, "FAILOVER (kill -9)\tTTL\tMEDIAN\tWORST\tMEDIAN/TTL\tFIRES LOST\tSAMPLES")
		for _, f := range r.Failover {
			var s []string
			for _, d := range f.Samples {
				s = append(s, ms(d))
			}
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%.2f\t%d\t%s\n", f.TTL, ms(f.Median), ms(f.Worst), f.RatioTTL, f.Lost, strings.Join(s, ", "))
		}
		fmt.Fprintln(tw)
	}
	if h := r.Handover; h != nil {
		fmt.Fprintln(tw, "GRACEFUL HANDOVER (SIGTERM)\t\tMEDIAN\tWORST\t\tFIRES LOST")
		fmt.Fprintf(tw, "\t\t%s\t%s\t\t%d\n\n", ms(h.Median), ms(h.Worst), h.Lost)
	}
	if len(r.Lateness) > 0 {
		fmt.Fprintln(tw, "LATENESS\tSLOTS\tEXECUTOR\tP50\tP99\tMAX\tSTARTED/EXPECTED\tSKIPPED\tNOT STARTED\tETCD TXNS/EXEC\tKEYS WRITTEN/EXEC\tETCD BYTES IN/EXEC\tSETTLE\tCPU s/s PER 1000 SLOTS PER MEMBER")
		for _, l := range r.Lateness {
			if l.NoScheduler {
				fmt.Fprintf(tw, "\t%d\t%s\t%s\t%s\t%s\t%d/%d\t%d\t%d\t-\t-\t-\t-\t-\n", l.Slots, executorText(l), ms(l.P50), ms(l.P99), ms(l.Max), l.Started, l.Expected, l.Skipped, l.NotStarted)
				continue
			}
			fmt.Fprintf(tw, "\t%d\t%s\t%s\t%s\t%s\t%d/%d\t%d\t%d\t%s\t%s\t%s\t%s\t%.3f\n", l.Slots, executorText(l), ms(l.P50), ms(l.P99), ms(l.Max), l.Started, l.Expected, l.Skipped, l.NotStarted, keysText(l.PerExecute), keysText(l.KeysPerExecute), bytesText(l.BytesPerExecute), l.Settle.Round(time.Millisecond),
				l.CPUPer1000)
		}
		for _, l := range r.Lateness {
			if p := l.Probe; p != nil {
				fmt.Fprintf(tw, "\t+1\tthe command among %d\t%s\t%s\t%s\t%d/%d\t%d\t%d\n", l.Slots, ms(p.P50), ms(p.P99), ms(p.Max), p.Started, p.Expected, p.Skipped, p.NotStarted)
			}
		}
		for _, l := range r.Lateness {
			if l.MemberLost != "" {
				fmt.Fprintf(tw, "\t%d slots: %s\n", l.Slots, l.MemberLost)
			}
		}
		fmt.Fprintln(tw)
	}
	if len(r.Rebalance) > 0 {
		fmt.Fprintln(tw, "REBALANCE\tCATALOG\tCHANGE\tSLOTS\tMOVED\tIDEAL\tMOVED/IDEAL\tSETTLE")
		for _, b := range r.Rebalance {
			fmt.Fprintf(tw, "\t%s\t%s\t%d\t%.3f\t%.3f\t%.2f\t%s\n", b.Shape, b.Change, b.Slots, b.Moved, b.Ideal, b.Moved/b.Ideal, b.Settle.Round(time.Millisecond))
		}
		fmt.Fprintln(tw)
	}
	var costs []bench.Lateness
	for _, l := range r.Lateness {
		if l.EtcdCost != nil {
			costs = append(costs, l)
		}
	}
	if len(costs) > 0 {
		fmt.Fprintln(tw, "ETCD COST PER 1,000 EXECUTIONS\tSLOTS\tCPU s (all members)\tDISK WRITTEN\tWAL\tKEYS\tTXNS\tDB SIZE AT END")
		for _, l := range costs {
			c := l.EtcdCost
			disk := "-" // not known for an etcd the bench did not start
			if c.DiskBytes > 0 {
				disk = fmt.Sprintf("%.2f MB", c.DiskBytes/1e6)
			}
			fmt.Fprintf(tw, "\t%d\t%.3f\t%s\t%.2f MB\t%.0f\t%.1f\t%.1f MB\n", l.Slots, c.CPUSeconds, disk, c.WALBytes/1e6, c.Keys, c.Txns, c.DBBytes/1e6)
		}
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "CORES USED IN THE WINDOW\tSLOTS\tETCD (WITH THE BENCH IF EMBEDDED)\tMEMBERS (3)\tBENCH (THE JOB'S RECEIVER)\tMACHINE")
		for _, l := range costs {
			if c := l.Cores; c != nil {
				fmt.Fprintf(tw, "\t%d\t%.2f\t%.2f\t%.2f\t%d\n", l.Slots, c.Etcd, c.Members, c.Bench, c.Machine)
			}
		}
		fmt.Fprintln(tw)
	}
	if s := r.Soak; s != nil {
		printSoak(tw, s)
	}
	if w := r.JobWrites; w != nil {
		printJobWrites(tw, w)
	}
	if m := r.Memory; m != nil {
		fmt.Fprintln(tw, "MEMORY\tIDLE SLOTS\tMEMBERS\tLIVE HEAP\tPER SLOT PER MEMBER\tRESIDENT PER 1000 SLOTS PER MEMBER\tBASE MEMBER (HEAP / RESIDENT)")
		fmt.Fprintf(tw, "\t%d\t%d\t%.1f MiB\t%.0f B\t%.2f MiB\t%.1f / %.1f MiB\n", m.Slots, m.Members, float64(m.HeapBytes)/(1<<20), m.PerSlotPerMember,
			m.RSSPer1000PerMember/(1<<20), float64(m.BaseHeapBytes)/(1<<20), float64(m.BaseRSSBytes)/(1<<20))
	}
	tw.Flush()
}

// printJobWrites prints the job writes' figures.
func printJobWrites(tw *tabwriter.Writer, w *bench.JobWrites) {
	fmt.Fprintf(tw, "JOB WRITES: %d stored jobs, %d clients, every slot led %s after the members' start\n", w.Stored, w.Clients, w.Settle.Round(100*time.Millisecond))
	fmt.Fprintln(tw, "\tWRITE\tDONE\tFAILED\tA SECOND\tP50\tP99\tMAX\tFIRST ERROR")
	for _, x := range []struct {
		what string
		f    bench.WriteFigures
	}{{"create", w.Creates}, {"delete", w.Deletes}} {
		fmt.Fprintf(tw, "\t%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\n", x.what, x.f.Done, x.f.Failed, x.f.PerSecond, ms(x.f.P50), ms(x.f.P99), ms(x.f.Max), x.f.FirstErr)
	}
	f := w.FirstFires
	fmt.Fprintf(tw, "\tfirst fires: %d of %d on time, lateness p50 %s, p99 %s; from the create's answer to the first start p50 %s, p99 %s, max %s; fires after a delete: %d\n",
		f.Started, f.Expected, ms(f.P50), ms(f.P99), ms(w.FirstStart.P50), ms(w.FirstStart.P99), ms(w.FirstStart.Max), w.FiredAfterDelete)
	if w.FirstOverwritten > 0 {
		fmt.Fprintf(tw, "	first fires not read: %d created jobs' first record was overwritten by newer ones\n", w.FirstOverwritten)
	}
	if len(w.Churn) > 0 {
		fmt.Fprintln(tw, "\tCHURN AT\tDB SIZE\tIN USE\tRESIDENT (3 MEMBERS)")
		for _, s := range w.Churn {
			var rss []string
			for _, b := range s.RSSBytes {
				rss = append(rss, fmt.Sprintf("%.0f MB", b/1e6))
			}
			fmt.Fprintf(tw, "\t%s\t%.1f MB\t%.1f MB\t%s\n", s.At.Round(time.Second), s.DBBytes/1e6, s.DBInUseBytes/1e6, strings.Join(rss, " "))
		}
	}
	if w.MemberLost != "" {
		fmt.Fprintf(tw, "\ta member was lost: %s\n", w.MemberLost)
	}
	fmt.Fprintln(tw)
}

// maxSoakRows bounds the samples the soak's table prints (the JSON output
// has them all).
const maxSoakRows = 20

// printSoak prints a soak's samples, at most maxSoakRows of them evenly
// spaced, and its summary.
func printSoak(tw *tabwriter.Writer, s *bench.Soak) {
	fmt.Fprintf(tw, "SOAK: %d slots every second, %s, %s sampled every %s; etcd quota %.0f MB\n", s.Slots, s.Executor, s.Duration.Round(time.Second), s.Every, s.QuotaBytes/1e6)
	fmt.Fprintln(tw, "\tAT\tDB SIZE\tIN USE\tRESIDENT (3 MEMBERS)\tGOROUTINES (3 MEMBERS)\tEXECUTIONS\tSKIPPED\tFAILED")
	step := max(1, (len(s.Samples)+maxSoakRows-1)/maxSoakRows)
	for i, x := range s.Samples {
		if i%step != 0 && i != len(s.Samples)-1 {
			continue
		}
		var rss, g []string
		for j := range x.RSSBytes {
			rss, g = append(rss, fmt.Sprintf("%.0f", x.RSSBytes[j]/1e6)), append(g, fmt.Sprintf("%.0f", x.Goroutines[j]))
		}
		fmt.Fprintf(tw, "\t%s\t%.1f MB\t%.1f MB\t%s MB\t%s\t%.0f\t%.0f\t%.0f\n", x.At.Round(time.Second), x.DBBytes/1e6, x.DBInUseBytes/1e6,
			strings.Join(rss, " / "), strings.Join(g, " / "), x.Executions, x.Skipped, x.Failed)
	}
	sum := s.Summary
	quota := 0.0
	if s.QuotaBytes > 0 {
		quota = 100 * sum.DBMax / s.QuotaBytes
	}
	fmt.Fprintf(tw, "\tdatabase at most %.1f MB (%.0f %% of the quota), first at %s; in the last quarter at least %.1f MB\n", sum.DBMax/1e6, quota, sum.DBMaxAt.Round(time.Second), sum.DBLastQuarterMin/1e6)
	fmt.Fprintf(tw, "\tmembers' resident memory, mean: %.1f MB over the first quarter, %.1f MB over the last; goroutines %.0f–%.0f\n", sum.RSSFirstQuarter/1e6, sum.RSSLastQuarter/1e6, sum.GoroutinesMin, sum.GoroutinesMax)
	fmt.Fprintf(tw, "\t%.0f executions, %.0f skipped, %.0f failed\n", sum.Executions, sum.Skipped, sum.Failed)
	if s.MemberLost != "" {
		fmt.Fprintf(tw, "\tended early: %s\n", s.MemberLost)
	}
	fmt.Fprintln(tw)
}

// bytesText prints bytes per execution, "-" when etcd's counters were not
// in this process.
func bytesText(b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f B", b)
}

// keysText prints keys written per execution, "-" when etcd's counters were
// not in this process.
func keysText(k float64) string {
	if k == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", k)
}
