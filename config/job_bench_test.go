package config

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
)

// BenchmarkPutJob creates jobs one by one, from 8 writers, over a stored
// catalog of 100,000 jobs less the b.N it creates (MaxJobs bounds the
// whole) on an embedded etcd, and reports creates/s. Run
// it as go test ./config -run '^$' -bench BenchmarkPutJob -benchtime 100x.
func BenchmarkPutJob(b *testing.B) {
	cli := etcdtest.Start(b).Client(b)
	ctx := context.Background()
	cat, err := Parse("many.yaml", manyJobs(MaxJobs-b.N))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := PutJobs(ctx, cli, cat, Source{By: ByApply, At: time.Now().UTC()}, 0); err != nil {
		b.Fatal(err)
	}
	body := []byte("schedule: '@every 1m'\nhandler: noop\n")
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	var n int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := nextName(&n)
			if _, err := PutJob(ctx, cli, "c", body, fmt.Sprintf("single-%06d", i), PutJobOptions{Manager: signup}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "creates/s")
}

// nextName numbers the benchmark's jobs across its writers.
func nextName(n *int64) int64 { return atomic.AddInt64(n, 1) }
