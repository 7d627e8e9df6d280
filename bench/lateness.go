package bench

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/jobs"
	"github.com/kira-scheduler/kira/shard"
	"github.com/prometheus/client_golang/prometheus"
)

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
	case cfg.HTTP:
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
	res := Lateness{Slots: n, Executor: "go-handler", Jitter: cfg.Jitter, Overlap: string(cfg.overlap())}
	cat := benchCatalog(cluster("lateness"), 6*time.Second, n, cfg.Jitter)
	cat.Jobs[0].Overlap = cfg.overlap()
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
	before := readInProcess()
	time.Sleep(time.Until(to.Add(-time.Second / 2)))
	after := readInProcess()
	extAfter, extAfterOK := readMetrics(external)
	time.Sleep(time.Until(to))
	res.CPU, res.EtcdInProcess = after.cpu-before.cpu, cfg.EtcdInProcess
	res.CPUPer1000 = res.CPU.Seconds() / cfg.Duration.Seconds() / 3 / (float64(n) / 1000)
	time.Sleep(2 * time.Second) // let the window's runs finish
	if err := lostMember(ms); err != nil {
		res.MemberLost = err.Error()
	}
	res.tally(ev.snapshot(), from, to, cfg.Probe)
	res.Expected = n * int(cfg.Duration/time.Second)
	res.etcdPaid(before, after)
	if extOK && extAfterOK {
		res.EtcdCost = cost(extBefore, extAfter, res.Started)
	}
	return res, nil
}

// tally counts the fires scheduled in [from, to), by second, and spreads
// their lateness; the probe's (withProbe) apart.
func (res *Lateness) tally(fs []fire, from, to time.Time, withProbe bool) {
	var late, probeLate []time.Duration
	bySecond := make([]secondTally, (to.Sub(from)+time.Second-1)/time.Second)
	var probe *Figures
	if withProbe {
		probe = &Figures{Expected: int(to.Sub(from) / time.Second)}
	}
	for _, f := range fs {
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
	res.spread(late)
	if probe != nil {
		probe.spread(probeLate)
		res.Probe = probe
	}
}

// inProcessReading is what the bench's process counts at one moment: the
// embedded etcd's gRPC calls, keys written and bytes received, and the
// process's CPU time.
type inProcessReading struct {
	calls map[string]int
	keys  int
	bytes float64
	cpu   time.Duration
}

func readInProcess() inProcessReading {
	return inProcessReading{calls: grpcCalls(), keys: keysWritten(), bytes: bytesReceived(), cpu: cpuTime()}
}

// etcdPaid sets the embedded etcd's calls, writes, keys and bytes between
// two readings, per execution started.
func (res *Lateness) etcdPaid(before, after inProcessReading) {
	res.EtcdCalls = map[string]int{}
	writes := 0
	for method, c := range after.calls {
		if d := c - before.calls[method]; d > 0 {
			res.EtcdCalls[method] = d
			if method == "Txn" || method == "Put" || method == "DeleteRange" {
				writes += d
			}
		}
	}
	if res.Started > 0 {
		res.PerExecute = float64(writes) / float64(res.Started)
		res.KeysPerExecute = float64(after.keys-before.keys) / float64(res.Started)
		res.BytesPerExecute = (after.bytes - before.bytes) / float64(res.Started)
	}
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
