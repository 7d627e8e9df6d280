package bench

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
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

// counters sums the embedded etcd's counters and gauges of the names given.
func counters(names ...string) float64 {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return 0
	}
	n := 0.0
	for _, mf := range mfs {
		if slices.Contains(names, mf.GetName()) {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return n
}

// readEtcd reads what the run's etcd has paid so far: the three processes
// of the production shape, the bench's own process when etcd is embedded
// in it (its CPU then includes the bench's HTTP receiver), or an external
// etcd's /metrics (ok is false if it did not answer).
func (cfg Config) readEtcd() (r etcdReading, ok bool) {
	switch {
	case cfg.Cluster != nil:
		return cfg.Cluster.read(), true
	case cfg.EtcdInProcess:
		r.cpu, r.disk = procUsage(os.Getpid())
		r.wal = counters("etcd_disk_wal_write_bytes_total")
		r.keys = counters("etcd_mvcc_put_total", "etcd_mvcc_delete_total")
		r.txns = counters("etcd_mvcc_txn_total")
		r.db = counters("etcd_mvcc_db_total_size_in_bytes")
		return r, true
	default:
		return readMetrics(metricsURLs(cfg))
	}
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

// forkFloor starts n commandArgv at every whole second of d through Kira's
// command executor, from goroutines parked until the second (no scheduler,
// no etcd), and measures when each process ran (its output): the least
// that forking at the fire's time can cost on this machine. With jitter, each
// goroutine then sleeps until its slot's offset in the second, the one the
// scheduler would give it, and lateness counts from there.
func forkFloor(ctx context.Context, n int, d, jitter time.Duration) Lateness {
	res := Lateness{Slots: n, Executor: commandText + ", no scheduler", Jitter: jitter, NoScheduler: true, Figures: Figures{Expected: n * int(d/time.Second)}}
	ex := &jobs.Command{Argv: commandArgv}
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
				ran, ok := processRan(r.OutputTail)
				if !ok {
					res.NotStarted++
					return
				}
				late = append(late, ran.Sub(due))
			}()
		}
		time.Sleep(time.Until(at))
		close(gate)
	}
	wg.Wait()
	res.spread(late)
	return res
}

// commandArgv is the command job of --sh and --sh-probe: it prints the
// instant its process ran, which the bench reads back from the run's
// output in its history record (processRan). commandText names it.
var commandArgv = []string{"date", "+%s.%N"}

const commandText = "command date +%s.%N"

// processRan reads the instant commandArgv printed.
func processRan(output string) (time.Time, bool) {
	sec, frac, ok := strings.Cut(strings.TrimSpace(output), ".")
	if !ok || len(frac) != 9 {
		return time.Time{}, false
	}
	s, err1 := strconv.ParseInt(sec, 10, 64)
	ns, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, false
	}
	return time.Unix(s, ns), true
}
