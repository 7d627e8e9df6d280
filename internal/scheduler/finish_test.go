package scheduler

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/clock"
)

// BenchmarkReleaseFires is the fire path at the instant: n armed runs wait
// at one gate; the releaser opens it; each run reads the clock and reports
// how late it started. It reports the p50 and max of that lateness (no etcd,
// no executor: what the process itself adds).
func BenchmarkReleaseFires(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			r := newGates(clock.Real{})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { r.run(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			var p50, worst time.Duration
			for i := 0; i < b.N; i++ {
				at := time.Now().Add(20 * time.Millisecond)
				late := make([]time.Duration, n)
				var wg sync.WaitGroup
				for j := 0; j < n; j++ {
					p := r.wait(at, false)
					wg.Add(1)
					go func() {
						defer wg.Done()
						select {
						case <-p.woken:
						case <-time.After(10 * time.Second):
							b.Error("a gate never opened")
						}
						late[j] = time.Since(at)
						r.leave(p)
					}()
				}
				wg.Wait()
				sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
				p50 += late[n/2]
				worst = max(worst, late[n-1])
			}
			b.ReportMetric(float64(p50.Microseconds())/float64(b.N), "p50-µs")
			b.ReportMetric(float64(worst.Microseconds()), "max-µs")
		})
	}
}

// Finished runs come out of take in the order they were put, each once.
func TestFinishedRunsAreTakenInOrder(t *testing.T) {
	f := newFinishedRuns()
	taken := func() []uint64 {
		var out []uint64
		for r := range f.take() {
			out = append(out, r.run)
		}
		return out
	}
	for run := range uint64(3) {
		f.put(finishedRun{run: run})
	}
	if got := taken(); !slices.Equal(got, []uint64{0, 1, 2}) {
		t.Fatalf("took %v; want [0 1 2]", got)
	}
	if got := taken(); len(got) != 0 {
		t.Fatalf("took %v again; want nothing", got)
	}
	f.put(finishedRun{run: 3})
	if got := taken(); !slices.Equal(got, []uint64{3}) {
		t.Fatalf("took %v; want [3]", got)
	}
}
