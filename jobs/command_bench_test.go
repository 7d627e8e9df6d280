package jobs

import (
	"context"
	"testing"
	"time"
)

// BenchmarkCommandExecute runs `sh -c :` through the command executor: its
// allocations per run (a second's worth of command fires makes them, and the
// collections they cause delay the fires that follow), and start-ns/op, the
// mean time from the call until the process had started, which a fire's
// lateness includes.
func BenchmarkCommandExecute(b *testing.B) {
	c := &Command{Argv: []string{"sh", "-c", ":"}}
	b.ReportAllocs()
	var toStart time.Duration
	for b.Loop() {
		called := time.Now()
		res := c.Execute(context.Background(), exec1)
		if res.Outcome != Succeeded {
			b.Fatal(res)
		}
		toStart += res.ProcessStarted.Sub(called)
	}
	b.ReportMetric(float64(toStart.Nanoseconds())/float64(b.N), "start-ns/op")
}
