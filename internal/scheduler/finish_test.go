package scheduler

import (
	"slices"
	"testing"
)

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
