package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/history/journal"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
)

// loadServer answers the HTTP load job with n bytes until stopped.
func loadServer(n int) (url string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	answer := []byte(strings.Repeat("x", n))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(answer) }), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	return "http://" + l.Addr().String() + "/", func() { srv.Close() }, nil
}

// loadRun is what a production-shape run of the load job needs: the job's
// receiver, answering cfg.OutputBytes bytes, and a directory holding the
// job's catalog, of its own cluster.
type loadRun struct {
	dir, catalog, cluster string
	stopServer            func()
}

// newLoadRun starts the receiver and writes catalog(cluster, its URL).
func newLoadRun(cfg Config, kind string, catalog func(cluster, url string) string) (*loadRun, error) {
	url, stop, err := loadServer(cfg.OutputBytes)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kira-bench-"+kind)
	if err != nil {
		stop()
		return nil, err
	}
	l := &loadRun{dir: dir, catalog: filepath.Join(dir, "catalog.yaml"), cluster: cluster("prod-" + kind), stopServer: stop}
	if err := os.WriteFile(l.catalog, []byte(catalog(l.cluster, url)), 0o600); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// close stops the receiver and removes the directory.
func (l *loadRun) close() {
	l.stopServer()
	os.RemoveAll(l.dir)
}

// prodCatalog is the lateness load for `kira run` processes: the Go
// handler noop, an HTTP job answered by the bench or a command (its
// executor line), with a history long enough to keep every fire of the
// window; jobs is the load job, or the load's jobs (loadJobs), and probe
// the --sh-probe job, or empty.
const prodCatalog = `cluster: %s
membership:
  lease_ttl: 6s
jobs:
%s%s`

// loadJobs is the lateness load's jobs in a catalog: one job of n
// partitions named load, or with cfg.Jobs n jobs of one slot named
// load-00000 on; policies is what they all have after the schedule.
func loadJobs(cfg Config, n int, executor, policies string) string {
	every := fmt.Sprintf("\"@every %s\"", cfg.every())
	if !cfg.Jobs {
		return fmt.Sprintf("  - {name: load, schedule: %s, partitions: %d, %s, %s}\n", every, n, executor, policies)
	}
	var b strings.Builder
	width := len(strconv.Itoa(n - 1))
	for i := range n {
		fmt.Fprintf(&b, "  - {name: load-%0*d, schedule: %s, %s, %s}\n", width, i, every, executor, policies)
	}
	return b.String()
}

// isLoad tells whether job is the lateness load's, or one of its jobs.
func isLoad(job string) bool { return job == "load" || strings.HasPrefix(job, "load-") }

// probeJob is the name of the Config.Probe job: one slot of the command,
// with the load's policies and jitter.
const probeJob = "sh-probe"

// procLateness is lateness with the members as three `kira run` processes
// of the bench's binary, and what etcd paid. What ran is read back from
// the history in etcd.
func procLateness(cfg Config, n int) (Lateness, error) {
	res := Lateness{Slots: n, Executor: "go-handler", Jitter: cfg.Jitter, Every: cfg.Every, Jobs: cfg.Jobs, Overlap: string(cfg.overlap()), EtcdInProcess: cfg.EtcdInProcess}
	argv, _ := json.Marshal(commandArgv)
	executor := "handler: noop"
	switch {
	case cfg.Command:
		res.Executor, executor = commandText, fmt.Sprintf("command: %s", argv)
	case cfg.HTTP:
		res.Executor = fmt.Sprintf("http, %d-byte answer", cfg.OutputBytes)
	}
	// The window and the fires until the members stop (2 s, and the
	// writers' drain), each of which may leave two records (a run and a
	// skip) when the machine is overloaded.
	keep := func(every time.Duration) int { return min(999, 2*int((cfg.Duration+2*time.Second+maxDrain)/every)+6) }
	load, err := newLoadRun(cfg, "lateness", func(name, url string) string {
		if cfg.HTTP {
			executor = fmt.Sprintf("http: {url: %q, method: GET}", url)
		}
		policies := func(every time.Duration) string {
			return fmt.Sprintf("misfire: fire-all, catchup_window: 1m, overlap: %s, history_limit: %d, jitter: %s", cfg.overlap(), keep(every), cfg.Jitter)
		}
		probe := ""
		if cfg.Probe {
			probe = fmt.Sprintf("  - {name: %s, schedule: \"@every 1s\", command: %s, %s}\n", probeJob, argv, policies(time.Second))
		}
		return fmt.Sprintf(prodCatalog, name, loadJobs(cfg, n, executor, policies(cfg.every())), probe)
	})
	if err != nil {
		return res, err
	}
	defer load.close()
	name := load.cluster
	cli, err := etcdclient.New(cfg.Etcd)
	if err != nil {
		return res, err
	}
	defer cli.Close()
	total := n
	if cfg.Probe {
		total++
	}
	began := time.Now()
	procs, err := startRunProcs(cfg, cli, load, total)
	defer stopAll(procs)
	if err != nil {
		return res, fmt.Errorf("bench: lateness at %d slots with processes, while the slots were being taken: %w", n, err)
	}
	res.Settle = time.Since(began)
	from := time.Now().Add(cfg.Warmup).Truncate(cfg.every()).Add(cfg.every())
	to := from.Add(cfg.Duration)
	// The counters are read half a second before the window's first and
	// last instants, so a read does not take the CPU from the fires
	// measured; they count a span as long as the window.
	time.Sleep(time.Until(from.Add(-time.Second / 2)))
	etcdBefore, etcdOK := cfg.readEtcd()
	cpuBefore, inBefore := procsCPU(procs), readInProcess()
	benchBefore, _ := procUsage(os.Getpid())
	time.Sleep(time.Until(to.Add(-time.Second / 2)))
	etcdAfter, etcdAfterOK := cfg.readEtcd()
	cpuAfter, inAfter := procsCPU(procs), readInProcess()
	benchAfter, _ := procUsage(os.Getpid())
	time.Sleep(time.Until(to) + 2*time.Second) // let the window's runs finish
	drainFrom := time.Now()
	if err := drainWrites(procs, to.Add(2*time.Second), maxDrain); err != nil {
		res.MemberLost = err.Error()
	}
	res.Drain = time.Since(drainFrom)
	// The members stop (gracefully: each commits the results it has queued)
	// before the history is read: under load a window's last results land
	// a while after it, and members still firing would overwrite its
	// records in the ring while a long history is read.
	stopAll(procs)
	res.CPU = time.Duration((cpuAfter - cpuBefore) * float64(time.Second))
	res.CPUPer1000 = res.CPU.Seconds() / cfg.Duration.Seconds() / 3 / (float64(n) / 1000)
	tally := newTally(from, to, cfg.every(), cfg.Jitter, cfg.Command, &res.Figures)
	if err := countFromHistory(cli, name, cfg.loadHistory(name), isLoad, tally); err != nil {
		return res, err
	}
	res.ByInstant = tallied(from, cfg.every(), tally.byInstant)
	if cfg.Probe {
		res.Probe = &Figures{}
		isProbe := func(job string) bool { return job == probeJob }
		probe := newTally(from, to, time.Second, cfg.Jitter, true, res.Probe)
		if err := countFromHistory(cli, name, keyspace.History(name, probeJob), isProbe, probe); err != nil {
			return res, err
		}
		res.Probe.Expected = int(cfg.Duration / time.Second)
	}
	res.Expected = n * int(cfg.Duration/cfg.every())
	// A fire with no record did not start: the loop fell behind and let it
	// go, or its start could not be recorded.
	res.NotStarted += max(0, res.Expected-res.Started-res.Skipped-res.NotStarted)
	if cfg.EtcdInProcess {
		res.etcdPaid(inBefore, inAfter)
	}
	if etcdOK && etcdAfterOK {
		res.EtcdCost = cost(etcdBefore, etcdAfter, res.Started)
	}
	window := cfg.Duration.Seconds()
	res.Cores = &Cores{Etcd: (etcdAfter.cpu - etcdBefore.cpu) / window, Members: res.CPU.Seconds() / window,
		Bench: (benchAfter - benchBefore) / window, Machine: runtime.NumCPU()}
	if cfg.EtcdInProcess {
		res.Cores.Bench = 0 // etcd's CPU is the bench's process
	}
	return res, nil
}

// startRunProcs starts three `kira run` processes named m0, m1 and m2 on
// load's catalog (n slots), each serving /metrics (memberProc.metrics), and
// waits until every slot is led by the member the ring over the three
// prefers and no member is still taking a slot over (kira_slots_taking_over):
// the first to start takes every slot and hands two thirds of them over as
// the others join, and a window that began before those takeovers ended
// would count the slots not firing yet as fires not started. It returns the
// processes it started, also on error, for the caller to stop. args are
// more arguments of each kira run.
func startRunProcs(cfg Config, cli *clientv3.Client, load *loadRun, n int, args ...string) ([]*memberProc, error) {
	var procs []*memberProc
	for i := 0; i < 3; i++ {
		p, err := startServingProc(cfg, load.dir, load.catalog, fmt.Sprintf("m%d", i), args...)
		if err != nil {
			return procs, err
		}
		procs = append(procs, p)
	}
	return procs, waitProcs(procs, settleLimit(n), func(ctx context.Context) (bool, error) {
		_, settled, err := preferredOwners(ctx, cli, load.cluster, 3, n)
		if !settled || err != nil {
			return false, err
		}
		for _, p := range procs {
			if v, ok := scrape(p.metrics)["kira_slots_taking_over"]; !ok || v != 0 {
				return false, nil
			}
		}
		return true, nil
	})
}

// settleLimit bounds the wait for n slots to settle: it grows with them,
// since every slot is campaigned for and most handed over once, and on a
// machine shared with other work that takes longer than on a quiet one.
func settleLimit(n int) time.Duration { return 5*time.Minute + time.Duration(n)*8*time.Millisecond }

// procsCPU is the CPU seconds the processes used so far.
func procsCPU(procs []*memberProc) float64 {
	total := 0.0
	for _, p := range procs {
		cpu, _ := procUsage(p.cmd.Process.Pid)
		total += cpu
	}
	return total
}

// maxDrain bounds the wait for the members' writers after a window.
const maxDrain = 10 * time.Second

// drainWrites waits, for at most limit, until every member has committed
// the state writes it queued before since: past capacity a member's writer
// is seconds behind, and the records of the window's last fires are still
// queued when it ends. Each member's oldest queued write, from its
// kira_state_write_wait_seconds, must have been queued after since (an
// empty queue reports 0). An error only when a member exited.
func drainWrites(procs []*memberProc, since time.Time, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if err := exited(procs); err != nil {
			return err
		}
		drained := true
		for _, p := range procs {
			wait, ok := scrape(p.metrics)["kira_state_write_wait_seconds"]
			if !ok || time.Now().Add(-time.Duration(wait*float64(time.Second))).Before(since) {
				drained = false
				break
			}
		}
		if drained {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// stopAll stops the processes at once (SIGTERM), and waits for them.
func stopAll(procs []*memberProc) {
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(p.stop)
	}
	wg.Wait()
}

// firesIn are the scheduled times of the fires record r stands for (its
// job fires every every) that fall in [from, to).
func firesIn(r history.Record, every time.Duration, from, to time.Time) []time.Time {
	var in []time.Time
	for i, t := 0, r.ScheduledTime; i < r.Fires(); i, t = i+1, t.Add(every) {
		if !t.Before(from) && t.Before(to) {
			in = append(in, t)
		}
	}
	return in
}

// loadHistory is the key prefix of the lateness load's history: its one
// job's, or that of every job named load-N.
func (cfg Config) loadHistory(cluster string) string {
	if cfg.Jobs {
		return strings.TrimSuffix(keyspace.History(cluster, "load-"), "/")
	}
	return keyspace.History(cluster, "load")
}

// countFromHistory counts the fires of the jobs matched (whose records are
// under prefix) scheduled in [from, to) into t from their history records,
// the rings read in pages, and the records in journals.
func countFromHistory(cli *clientv3.Client, cluster, prefix string, matched func(job string) bool, t *historyTally) error {
	end := clientv3.GetPrefixRangeEnd(prefix)
	var ring []history.Slotted
	var rev int64
	for key := prefix; ; {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := cli.Get(ctx, key, clientv3.WithRange(end), clientv3.WithLimit(2000))
		cancel()
		if err != nil {
			return err
		}
		rev = max(rev, resp.Header.Revision)
		for _, kv := range resp.Kvs {
			if s, ok := keyspace.ParseHistoryEntry(cluster, string(kv.Key)); ok && matched(s.Job) {
				if stored, err := history.Decode(s, kv.Value); err == nil {
					ring = append(ring, history.Slotted{Slot: s, Stored: stored, Revision: kv.ModRevision})
				}
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	inJournals, err := journal.NewCache(cli, cluster).Records(ctx, rev, func(s shard.Slot) bool { return matched(s.Job) })
	if err != nil {
		return err
	}
	for _, r := range history.Gather(ring, inJournals) {
		t.add(r)
	}
	t.res.P50, t.res.P99, t.res.Max = spread(t.late)
	return nil
}

// historyTally counts the fires scheduled in [from, to) of jobs firing
// every every with jitter into res, record by record, and spreads them by
// the instant they were scheduled at. A fire of a command (command)
// started when its process ran, as its output says (processRan).
type historyTally struct {
	from, to  time.Time
	every     time.Duration
	jitter    time.Duration
	command   bool
	res       *Figures
	byInstant []instantTally
	late      []time.Duration
}

func newTally(from, to time.Time, every, jitter time.Duration, command bool, res *Figures) *historyTally {
	return &historyTally{from: from, to: to, every: every, jitter: jitter, command: command, res: res,
		byInstant: make([]instantTally, (to.Sub(from)+every-1)/every)}
}

func (t *historyTally) instant(at time.Time) *instantTally {
	return &t.byInstant[at.Sub(t.from)/t.every]
}

// add counts the fires of record r that fall in the window.
func (t *historyTally) add(r history.Record) {
	if r.Cause != history.CauseSchedule && r.Cause != history.CauseCatchup {
		return
	}
	fires := firesIn(r, t.every, t.from, t.to)
	if len(fires) == 0 {
		return
	}
	job := config.Job{Name: r.Job, Jitter: t.jitter}
	due := r.ScheduledTime.Add(job.JitterOffset(shard.Slot{Job: r.Job, Partition: r.Partition}))
	switch r.Outcome {
	case history.OutcomeSkipped, history.OutcomeMissed:
		t.res.Skipped += len(fires)
		for _, at := range fires {
			t.instant(at).skipped++
		}
	case string(jobs.Succeeded), string(jobs.Failed), string(jobs.TimedOut), string(jobs.Fenced):
		started := r.StartedAt
		if t.command {
			ran, ok := processRan(r.OutputTail)
			if !ok {
				t.res.NotStarted++
				return
			}
			started = ran
		}
		late, in := started.Sub(due), t.instant(r.ScheduledTime)
		t.res.Started++
		t.late, in.late = append(t.late, late), append(in.late, late)
	default:
		t.res.NotStarted++
	}
}
