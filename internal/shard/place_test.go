package shard

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// Placing a job into an assignment moves no other job's slot and gives the
// job the base Assign gives it; removing it again leaves the others as
// they were. Every member gets ⌊P/N⌋ or ⌈P/N⌉ of the job's slots.
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
		a.Remove(extra.Name)
		if m, _ := moved(a, before, jobs); m != 0 || a.Owner(Slot{Job: extra.Name}) != "" {
			t.Fatalf("trial %d: removing the job moved %d slots, or left it placed", trial, m)
		}
		if got, want := a.Totals(), before.Totals(); !maps.Equal(got, want) {
			t.Fatalf("trial %d: after Remove, totals %v, want %v", trial, got, want)
		}
	}
}

// Two members hold assignments with different histories: one computed
// Assign over a catalog, the other over another catalog, then placed and
// removed jobs one by one. Each places a new job (its members listed in
// another order) the same way, and as Place into an empty assignment does.
func TestPlaceDependsOnTheJobAlone(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 17))
	for trial := range 200 {
		view := memberIDs(rng, 2+rng.IntN(7))
		jobs := catalog(rng, 1+rng.IntN(300), 1+rng.IntN(20), view)
		placed(rng, jobs, view)
		a := mustAssign(t, jobs)
		b := mustAssign(t, jobs[:rng.IntN(len(jobs))])
		for i := range rng.IntN(50) {
			j := Job{Name: fmt.Sprintf("one-%d", i), Partitions: 1 + rng.IntN(10), Members: pick(rng, view, 1+rng.IntN(len(view)))}
			if err := b.Place(j); err != nil {
				t.Fatal(err)
			}
			if rng.IntN(3) == 0 {
				b.Remove(jobs[rng.IntN(len(jobs))].Name)
			}
		}
		alone := mustAssign(t, nil)
		extra := Job{Name: fmt.Sprintf("added-%d", trial), Partitions: 1 + rng.IntN(12), Members: pick(rng, view, 1+rng.IntN(len(view)))}
		shuffled := slices.Clone(extra.Members)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		for i, as := range []*Assignment{a, b, alone} {
			j := extra
			if i == 1 {
				j.Members = shuffled
			}
			if err := as.Place(j); err != nil {
				t.Fatal(err)
			}
		}
		for k := range extra.Partitions {
			s := Slot{Job: extra.Name, Partition: k}
			if a.Owner(s) != b.Owner(s) || a.Owner(s) != alone.Owner(s) {
				t.Fatalf("trial %d: slot %v placed at %s by one history, %s by another, %s alone", trial, s, a.Owner(s), b.Owner(s), alone.Owner(s))
			}
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

// BenchmarkPlacedThenAssigned reports what the whole assignment moves
// after jobs were placed one by one, as the job-writes bench places them:
// 10,000 single-slot jobs placed into the assignment of 90,000 over three
// members, then Assign over all 100,000: the share of the placed jobs'
// slots it moves (placed-moved) and of the others' (others-moved). Run it
// as go test ./internal/shard -run '^$' -bench PlacedThenAssigned -benchtime 3x.
func BenchmarkPlacedThenAssigned(b *testing.B) {
	rng := rand.New(rand.NewPCG(21, 39))
	var placedMoved, othersMoved float64
	for b.Loop() {
		view := memberIDs(rng, 3)
		stored := make([]Job, 90000)
		for i := range stored {
			stored[i] = Job{Name: fmt.Sprintf("stored-%06d-%x", i, rng.Uint32()), Partitions: 1, Members: view}
		}
		a := mustAssign(b, stored)
		placed := make([]Job, 10000)
		for i := range placed {
			placed[i] = Job{Name: fmt.Sprintf("w-%d-%x", i, rng.Uint32()), Partitions: 1, Members: view}
			if err := a.Place(placed[i]); err != nil {
				b.Fatal(err)
			}
		}
		whole := mustAssign(b, append(stored, placed...))
		m, n := moved(a, whole, placed)
		placedMoved += float64(m) / float64(n)
		m, n = moved(a, whole, stored)
		othersMoved += float64(m) / float64(n)
	}
	b.ReportMetric(placedMoved/float64(b.N), "placed-moved")
	b.ReportMetric(othersMoved/float64(b.N), "others-moved")
}
