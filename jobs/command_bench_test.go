package jobs

import (
	"context"
	"testing"
)

// BenchmarkCommandExecute runs `sh -c :` through the command executor: its
// allocations per run (a second's worth of command fires makes them, and the
// collections they cause delay the fires that follow).
func BenchmarkCommandExecute(b *testing.B) {
	c := &Command{Argv: []string{"sh", "-c", ":"}}
	b.ReportAllocs()
	for b.Loop() {
		if res := c.Execute(context.Background(), exec1); res.Outcome != Succeeded {
			b.Fatal(res)
		}
	}
}
