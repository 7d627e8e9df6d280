package main

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/kira-scheduler/kira/api"
	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/dashboard"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The shape of the cluster BenchmarkDashboardAt10000Slots writes.
const (
	benchJobs       = 100
	benchPartitions = 100
	benchRecords    = config.DefaultHistoryLimit // each slot's ring full, one fire a minute
)

// writeBenchCluster stores a catalog of benchJobs jobs of benchPartitions
// partitions, three member records, every slot's election key and a full
// ring of history per slot, in the keys and encoding members write
// (history.FormatWire); one slot in ten changed holder five minutes ago.
func writeBenchCluster(b *testing.B, cli *clientv3.Client, cluster string) {
	var yaml strings.Builder
	fmt.Fprintf(&yaml, "cluster: %s\njobs:\n", cluster)
	for j := range benchJobs {
		fmt.Fprintf(&yaml, "  - {name: job-%03d, schedule: \"@every 1m\", partitions: %d, command: [\"true\"]}\n", j, benchPartitions)
	}
	cat, err := config.Parse("bench.yaml", []byte(yaml.String()))
	if err != nil {
		b.Fatal(err)
	}
	catRev, _, err := config.Store(context.Background(), cli, cat)
	if err != nil {
		b.Fatal(err)
	}
	ids := []string{"bench-a", "bench-b", "bench-c"}
	for _, id := range ids {
		rec, _ := json.Marshal(member.Record{ID: id, Name: id[len("bench-"):], CatalogRevision: catRev, HistoryFormat: history.NewestFormat, StartedAt: time.Now().UTC()})
		if _, err := cli.Put(context.Background(), keyspace.Member(cluster, id), string(rec)); err != nil {
			b.Fatal(err)
		}
	}
	now := time.Now().UTC().Truncate(time.Minute)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for w := range 4 { // four writers, each a quarter of the jobs
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ops []clientv3.Op
			flush := func() {
				if len(ops) == 0 {
					return
				}
				if _, err := cli.Txn(context.Background()).Then(ops...).Commit(); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
				ops = ops[:0]
			}
			for j := w; j < benchJobs; j += 4 {
				for p := range benchPartitions {
					s := shard.Slot{Job: fmt.Sprintf("job-%03d", j), Partition: p}
					owner, token := ids[(j+p)%3], int64(1000+j*benchPartitions+p)
					ops = append(ops, clientv3.OpPut(keyspace.Candidacy(cluster, s, token), owner))
					for i := range benchRecords {
						at := now.Add(-time.Duration(benchRecords-i) * time.Minute)
						member, tok := owner, token
						if p%10 == 0 && i < benchRecords/2 {
							member, tok = ids[(j+p+1)%3], token/2
						}
						code := 0
						rec := history.Record{Job: s.Job, Partition: p, ExecutionID: jobs.ExecutionID(s.Job, p, at), Member: member, Token: fencing.Token(tok),
							ScheduledTime: at, StartedAt: at.Add(12 * time.Millisecond), FinishedAt: at.Add(80 * time.Millisecond), Outcome: string(jobs.Succeeded),
							Attempt: 1, Cause: history.CauseSchedule, ExitCode: &code}
						ops = append(ops, clientv3.OpPut(keyspace.HistoryEntry(cluster, s, int64(i), config.DefaultHistoryLimit), string(history.Encode(history.Stored{Record: rec}, history.FormatWire))))
					}
					if len(ops) >= 100 {
						flush()
					}
				}
			}
			flush()
		}()
	}
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}

// fetch GETs url and returns its body.
func fetch(b *testing.B, url string) []byte {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		b.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return body
}

func gzipped(data []byte) int {
	var n countWriter
	w := gzip.NewWriter(&n)
	w.Write(data)
	w.Close()
	return int(n)
}

type countWriter int

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// BenchmarkDashboardAt10000Slots measures what the dashboard costs at
// 10,000 slots (100 jobs of 100 partitions, a full ring of history per
// slot, written to a real etcd as members write it): the API's answers the
// page draws from (bytes, and the time of a member's first timeline read,
// of a later one, and of one after 2 s of writes), and the
// page's load in headless Chromium (from navigation to the first timeline
// drawn) and the time of one redrawing. It prints figures and asserts no
// time; docs/benchmarks.md holds them.
func BenchmarkDashboardAt10000Slots(b *testing.B) {
	etcd := etcdtest.Start(b)
	cli := etcd.Client(b)
	began := time.Now()
	writeBenchCluster(b, cli, "big")
	b.Logf("wrote %d slots with %d records each in %s", benchJobs*benchPartitions, benchRecords, time.Since(began).Round(time.Millisecond))
	mux := http.NewServeMux()
	mux.Handle("/v1/", api.Handler(api.Config{KV: cli, Cluster: "big"}))
	mux.Handle("/", dashboard.Handler(dashboard.Config{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// A member's first timeline read reads every ring; later ones only the
	// ring keys written since (ops.Rings): each of these reads is
	// the first of a new API handler.
	b.Run("timeline-api-first-read", func(b *testing.B) {
		for b.Loop() {
			cold := httptest.NewServer(api.Handler(api.Config{KV: cli, Cluster: "big"}))
			fetch(b, cold.URL+"/v1/timeline?since=15m&limit=1000")
			cold.Close()
		}
	})
	// What a member keeps between timeline reads (ops.Rings): the
	// live heap after a first read, against before it.
	b.Run("timeline-cache-heap", func(b *testing.B) {
		var before, after runtime.MemStats
		var kept http.Handler
		for b.Loop() {
			kept = nil // the last round's, freed before measuring
			runtime.GC()
			runtime.ReadMemStats(&before)
			kept = api.Handler(api.Config{KV: cli, Cluster: "big"})
			cold := httptest.NewServer(kept)
			fetch(b, cold.URL+"/v1/timeline?since=15m&limit=1000")
			cold.Close()
			runtime.GC()
			runtime.ReadMemStats(&after)
		}
		runtime.KeepAlive(kept)
		b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "heap-bytes-kept")
	})
	fetch(b, srv.URL+"/v1/timeline?since=15m&limit=1000") // the first read, measured above
	for _, get := range []struct{ name, path string }{
		{"timeline-api", "/v1/timeline?since=15m&limit=1000"},
		{"job-detail-api", "/v1/timeline?since=15m&job=job-000"},
		{"health-api", "/v1/health"},
		{"status-api", "/v1/status"},
		{"members-api", "/v1/members"}, // every ring read for the last failover, as the timeline reads them
	} {
		b.Run(get.name, func(b *testing.B) {
			var body []byte
			for b.Loop() {
				body = fetch(b, srv.URL+get.path)
			}
			b.ReportMetric(float64(len(body)), "bytes/answer")
			b.ReportMetric(float64(gzipped(body)), "gzipped-bytes/answer")
		})
	}
	// What a refresh 2 s after the last costs while members write: 2 s of
	// fires at 10,000 slots a minute (333 ring keys) rewritten before each.
	b.Run("timeline-api-after-writes", func(b *testing.B) {
		var body []byte
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			rewriteRecords(b, cli, "big", 333, i)
			b.StartTimer()
			body = fetch(b, srv.URL+"/v1/timeline?since=15m&limit=1000")
		}
		b.ReportMetric(float64(len(body)), "bytes/answer")
	})
	b.Run("page-load", func(b *testing.B) {
		browser := chromium(b)
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
			chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-background-networking", true),
			chromedp.UserDataDir(filepath.Join(b.TempDir(), "chromium")), chromedp.WindowSize(1200, 900))
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		defer cancelAlloc()
		ctx, cancel := chromedp.NewContext(allocCtx)
		defer cancel()
		ctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute)
		defer cancelTimeout()
		for b.Loop() {
			if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
				b.Fatal(err)
			}
			var loaded, render string
			deadline := time.Now().Add(time.Minute)
			for loaded == "" && time.Now().Before(deadline) {
				var err error
				if loaded, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.loadedMs || ""`)); err != nil {
					b.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if loaded == "" {
				b.Fatal("the page drew no timeline within a minute")
			}
			render, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.renderMs || ""`))
			b.Logf("page drawn %s ms after navigation; one drawing of the timeline %s ms", loaded, render)
		}
	})
}

// rewriteRecords overwrites n ring entries of round's slots with a newer
// fire, as members write them.
func rewriteRecords(b *testing.B, cli *clientv3.Client, cluster string, n, round int) {
	var ops []clientv3.Op
	at := time.Now().UTC().Truncate(time.Second)
	for k := range n {
		slot := (round*n + k) % (benchJobs * benchPartitions)
		s := shard.Slot{Job: fmt.Sprintf("job-%03d", slot/benchPartitions), Partition: slot % benchPartitions}
		code := 0
		rec := history.Record{Job: s.Job, Partition: s.Partition, ExecutionID: jobs.ExecutionID(s.Job, s.Partition, at), Member: "bench-a", Token: fencing.Token(1000 + slot),
			ScheduledTime: at, StartedAt: at.Add(12 * time.Millisecond), FinishedAt: at.Add(80 * time.Millisecond), Outcome: string(jobs.Succeeded),
			Attempt: 1, Cause: history.CauseSchedule, ExitCode: &code}
		ops = append(ops, clientv3.OpPut(keyspace.HistoryEntry(cluster, s, int64(round%benchRecords), config.DefaultHistoryLimit), string(history.Encode(history.Stored{Record: rec}, history.FormatWire))))
		if len(ops) == 100 || k == n-1 {
			if _, err := cli.Txn(context.Background()).Then(ops...).Commit(); err != nil {
				b.Fatal(err)
			}
			ops = ops[:0]
		}
	}
}
