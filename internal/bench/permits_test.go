package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdclient"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
)

// BenchmarkPermitCost is what a concurrency limit costs etcd per
// execution: one `kira run` member runs a job of 6 partitions fired every
// second, each run a command working 50 ms, with no limit, with
// max_running: 6 (no fire ever waits) and with max_running: 2 (most fires
// wait), and the embedded etcd's own counters give the calls and the keys
// written (puts and deletes) over a 5 s window, per execution started in
// it (read back from the history). The readings include what the member
// pays anyway (lease renewals, the view), alike in each case. It prints
// figures and asserts nothing
// (docs/benchmarks.md#concurrency-limits-etcd-cost):
//
//	go test -run '^$' -bench BenchmarkPermitCost -benchtime 1x ./internal/bench
func BenchmarkPermitCost(b *testing.B) {
	c := etcdtest.Start(b)
	cfg := Config{Etcd: etcdclient.Config{Endpoints: c.Endpoints()}, Binary: buildKira(b)}
	for _, limit := range []int{0, 6, 2} {
		name := "none"
		if limit > 0 {
			name = fmt.Sprintf("max_running=%d", limit)
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				calls, keys, started := permitCost(b, cfg, limit)
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
// keys written and the executions started in the window.
func permitCost(b *testing.B, cfg Config, limit int) (map[string]int, int, int) {
	b.Helper()
	dir := b.TempDir()
	name := cluster(fmt.Sprintf("permits-%d", limit))
	maxRunning := ""
	if limit > 0 {
		maxRunning = fmt.Sprintf(", max_running: %d", limit)
	}
	catalog := filepath.Join(dir, "catalog.yaml")
	yaml := fmt.Sprintf("cluster: %s\nmembership: {lease_ttl: 2s}\njobs:\n  - {name: work, schedule: \"@every 1s\", partitions: 6, command: [sleep, \"0.05\"], misfire: fire-once, overlap: skip, catchup_window: 1m, history_limit: 50%s}\n", name, maxRunning)
	if err := os.WriteFile(catalog, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	cli, err := etcdclient.New(cfg.Etcd)
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	p, err := startProc(cfg, dir, catalog, "m0")
	if err != nil {
		b.Fatal(err)
	}
	defer p.stop()
	if err := waitProcs([]*memberProc{p}, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, ok, err := preferredOwners(ctx, cli, name, 1, 6)
		return ok, err
	}); err != nil {
		b.Fatal(err)
	}
	// Readings half a second before whole seconds, as lateness reads them.
	from := time.Now().Add(2 * time.Second).Truncate(time.Second)
	to := from.Add(5 * time.Second)
	time.Sleep(time.Until(from.Add(-time.Second / 2)))
	before := readInProcess()
	time.Sleep(time.Until(to.Add(-time.Second / 2)))
	after := readInProcess()
	time.Sleep(time.Until(to) + time.Second) // the window's last runs end
	p.stop()
	var ran Figures
	isWork := func(job string) bool { return job == "work" }
	if err := countFromHistory(cli, name, keyspace.History(name, "work"), isWork, newTally(from, to, time.Second, 0, false, &ran)); err != nil {
		b.Fatal(err)
	}
	if ran.Started == 0 {
		b.Fatal("no execution started")
	}
	calls := map[string]int{}
	for method, c := range after.calls {
		calls[method] = c - before.calls[method]
	}
	return calls, after.keys - before.keys, ran.Started
}
