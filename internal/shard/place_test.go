package shard

import (
	"maps"
	"math/rand/v2"
	"testing"
)

// Placing a job into an assignment moves no other job's slot and gives the
// job the base Assign gives it; removing it again leaves the others as
// they were. Every member gets ⌊P/N⌋ or ⌈P/N⌉ of the job's slots, and the
// totals Place keeps are the assignment's.
func TestPlaceKeepsOtherJobsAndTheJobsBase(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 50 {
		view := memberIDs(rng, 1+rng.IntN(8))
		jobs := catalog(rng, 1+rng.IntN(200), 20, view)
		if trial%2 == 1 {
			placed(rng, jobs, view)
		}
		a := mustAssign(t, jobs)
		before := mustAssign(t, jobs)
		extra := Job{Name: "added", Partitions: 1 + rng.IntN(40), Members: pick(rng, view, 1+rng.IntN(len(view)))}
		if err := a.Place(extra); err != nil {
			t.Fatal(err)
		}
		if m, _ := moved(a, before, jobs); m != 0 {
			t.Fatalf("trial %d: placing a job moved %d slots of the others", trial, m)
		}
		whole := mustAssign(t, append(jobs, extra))
		for k, m := range match(mustNormal(t, extra)) {
			s := Slot{Job: extra.Name, Partition: k}
			if m >= 0 && a.Owner(s) != whole.Owner(s) {
				t.Fatalf("trial %d: slot %v of the job's base at %s; Assign says %s", trial, s, a.Owner(s), whole.Owner(s))
			}
		}
		for m, n := range a.Shares(extra.Name) {
			if lo := extra.Partitions / len(extra.Members); n < lo || n > lo+1 {
				t.Fatalf("trial %d: member %s got %d of the job's %d slots over %d members", trial, m, n, extra.Partitions, len(extra.Members))
			}
		}
		if got, want := clean(a.totals), a.Totals(); !maps.Equal(got, want) {
			t.Fatalf("trial %d: Place keeps totals %v, the assignment's are %v", trial, got, want)
		}
		a.Remove(extra.Name)
		if m, _ := moved(a, before, jobs); m != 0 || a.Owner(Slot{Job: extra.Name}) != "" || a.slots != before.slots {
			t.Fatalf("trial %d: removing the job moved %d slots, or left it placed", trial, m)
		}
		if got, want := clean(a.totals), before.Totals(); !maps.Equal(got, want) {
			t.Fatalf("trial %d: after Remove, totals %v, want %v", trial, got, want)
		}
	}
}

func mustNormal(t *testing.T, j Job) normalJob {
	t.Helper()
	js, err := normalize([]Job{j})
	if err != nil {
		t.Fatal(err)
	}
	return js[0]
}

// clean is totals without the members at zero.
func clean(totals map[string]int) map[string]int {
	out := map[string]int{}
	for m, n := range totals {
		if n != 0 {
			out[m] = n
		}
	}
	return out
}
