package config

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
)

// benchStoredJobs is the catalog BenchmarkPutJob creates jobs over.
const benchStoredJobs = 10000

// BenchmarkPutJob creates jobs one by one, from 8 writers, over a stored
// catalog of 10,000 jobs on an embedded etcd, and reports creates/s and
// the latency of a create: "fresh" through PutJob, which reads
// catalog-head, the settings and the job, and counts the jobs, before its
// commit; "writer" through one JobWriter shared by the 8, which commits on
// what it keeps. Run it as
// go test ./config -run '^$' -bench BenchmarkPutJob -benchtime 2000x.
func BenchmarkPutJob(b *testing.B) {
	cli := etcdtest.Start(b).Client(b)
	ctx := context.Background()
	cat, err := Parse("many.yaml", manyJobs(benchStoredJobs))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := PutJobs(ctx, cli, cat, Source{By: ByApply, At: time.Now().UTC()}, 0); err != nil {
		b.Fatal(err)
	}
	body := []byte("schedule: '@every 1m'\nhandler: noop\n")
	var n int64
	w := NewJobWriter(cli, "c")
	for _, c := range []struct {
		name string
		put  func(name string) error
	}{
		{"fresh", func(name string) error {
			_, err := PutJob(ctx, cli, "c", body, name, PutJobOptions{Manager: signup})
			return err
		}},
		{"writer", func(name string) error {
			_, err := w.PutJob(ctx, body, name, PutJobOptions{Manager: signup})
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var mu sync.Mutex
			var took []time.Duration
			b.SetParallelism(8)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				for pb.Next() {
					t0 := time.Now()
					if err := c.put(fmt.Sprintf("%s-%07d", c.name, nextName(&n))); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(t0))
				}
				mu.Lock()
				took = append(took, mine...)
				mu.Unlock()
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "creates/s")
			slices.Sort(took)
			if len(took) > 0 {
				b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}

// nextName numbers the benchmark's jobs across its writers.
func nextName(n *int64) int64 { return atomic.AddInt64(n, 1) }
