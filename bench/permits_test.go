package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/etcdclient"
	"github.com/kira-scheduler/kira/etcdtest"
	"github.com/kira-scheduler/kira/jobs"
	"github.com/kira-scheduler/kira/scheduler"
)

// BenchmarkPermitCost is what a concurrency limit costs etcd per
// execution: one member runs a job of 6 partitions fired every second,
// each run working 50 ms, with no limit, with max_running: 6 (no fire ever
// waits) and with max_running: 2 (most fires wait), and the embedded etcd's
// own counters give the calls and the keys written (puts and deletes)
// between two readings 5 s apart, per execution started. The readings
// include what the member pays anyway (lease renewals, the view), alike in
// each case. It prints figures and asserts nothing
// (docs/benchmarks.md#concurrency-limits-etcd-cost):
//
//	go test -run '^$' -bench BenchmarkPermitCost -benchtime 1x ./bench
func BenchmarkPermitCost(b *testing.B) {
	c := etcdtest.Start(b)
	etcd := etcdclient.Config{Endpoints: c.Endpoints()}
	for _, limit := range []int{0, 6, 2} {
		name := "none"
		if limit > 0 {
			name = fmt.Sprintf("max_running=%d", limit)
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				calls, keys, started := permitCost(b, etcd, fmt.Sprintf("permits-%d", limit), limit)
				total := 0
				var parts []string
				for _, m := range []string{"Range", "Txn", "Put", "DeleteRange", "LeaseKeepAlive"} {
					total += calls[m]
					parts = append(parts, fmt.Sprintf("%s %.2f", m, float64(calls[m])/float64(started)))
				}
				b.ReportMetric(float64(total)/float64(started), "etcd-calls/exec")
				b.ReportMetric(float64(keys)/float64(started), "keys-written/exec")
				b.Logf("%s: %d executions; per execution: %s", name, started, strings.Join(parts, ", "))
			}
		})
	}
}

// permitCost runs the shape once and returns etcd's calls by method, the
// keys written and the executions started between the readings.
func permitCost(b *testing.B, etcd etcdclient.Config, cluster string, limit int) (map[string]int, int, int) {
	b.Helper()
	cat := &config.Catalog{Cluster: cluster, Membership: config.Membership{LeaseTTL: 2 * time.Second},
		Jobs: []config.Job{{Name: "work", Schedule: "@every 1s", Partitions: 6, Handler: "work", MaxRunning: limit,
			Misfire: config.MisfireFireOnce, Overlap: config.OverlapSkip, CatchupWindow: time.Minute, HistoryLimit: config.DefaultHistoryLimit}}}
	var mu sync.Mutex
	var starts []time.Time
	onEvent := func(e scheduler.Event) {
		if e.Kind == scheduler.Started {
			mu.Lock()
			starts = append(starts, e.At)
			mu.Unlock()
		}
	}
	work := func(ctx context.Context) error {
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	}
	m, err := startMember(etcd, cat, jobs.Handlers{"work": work}, onEvent)
	if err != nil {
		b.Fatal(err)
	}
	defer m.stop()
	if err := waitFor(15*time.Second, func() bool { return m.sched.LeadingCount() == 6 }); err != nil {
		b.Fatal(err)
	}
	// Readings half a second past whole seconds, a second's fires done.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(2500 * time.Millisecond)))
	from, before := time.Now(), readInProcess()
	time.Sleep(5 * time.Second)
	to, after := time.Now(), readInProcess()
	mu.Lock()
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	n := 0
	for _, at := range starts {
		if at.After(from) && at.Before(to) {
			n++
		}
	}
	mu.Unlock()
	if n == 0 {
		b.Fatal("no execution started")
	}
	calls := map[string]int{}
	for method, c := range after.calls {
		calls[method] = c - before.calls[method]
	}
	return calls, after.keys - before.keys, n
}
