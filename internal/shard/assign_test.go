package shard

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// memberIDs are n member ids as kira makes them: host name and a random UUID.
func memberIDs(rng *rand.Rand, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("host-%d-%08x-%04x-%04x-%012x", rng.IntN(1000), rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff)
	}
	return ids
}

// catalog is jobs jobs of 1 to maxP partitions, each run by all of view.
func catalog(rng *rand.Rand, jobs, maxP int, view []string) []Job {
	out := make([]Job, jobs)
	for i := range out {
		out[i] = Job{Name: fmt.Sprintf("job-%d-%x", i, rng.Uint32()), Partitions: 1 + rng.IntN(maxP), Members: view}
	}
	return out
}

// placed gives some jobs a placement: a random subset of view.
func placed(rng *rand.Rand, jobs []Job, view []string) {
	for i := range jobs {
		if rng.IntN(3) == 0 {
			jobs[i].Members = pick(rng, view, 1+rng.IntN(len(view)))
		}
	}
}

func pick(rng *rand.Rand, view []string, n int) []string {
	c := slices.Clone(view)
	rng.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
	return c[:n]
}

func mustAssign(t testing.TB, jobs []Job) *Assignment {
	t.Helper()
	a, err := Assign(jobs)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// moved counts the slots of jobs whose owner differs between a and b.
func moved(a, b *Assignment, jobs []Job) (moved, slots int) {
	for _, j := range jobs {
		for p := range j.Partitions {
			s := Slot{Job: j.Name, Partition: p}
			if a.Owner(s) != b.Owner(s) {
				moved++
			}
			slots++
		}
	}
	return moved, slots
}

// Random views of 1 to 50 members and catalogs of 1 to 1,000 partitions,
// some jobs placed on a subset: every slot goes to a member its job admits,
// each admitted member leads ⌊P/N⌋ or ⌈P/N⌉ slots of the job, so at most
// one when P < N.
func TestEveryJobSplitsEvenly(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 39))
	for trial := range 200 {
		view := memberIDs(rng, 1+rng.IntN(50))
		jobs := catalog(rng, 1+rng.IntN(20), 1000, view)
		if trial%2 == 1 {
			placed(rng, jobs, view)
		}
		a := mustAssign(t, jobs)
		for _, j := range jobs {
			shares := a.Shares(j.Name)
			for p := range j.Partitions {
				if o := a.Owner(Slot{Job: j.Name, Partition: p}); !slices.Contains(j.Members, o) {
					t.Fatalf("trial %d: %s/%d owned by %q, not a member the job admits", trial, j.Name, p, o)
				}
			}
			n := len(j.Members)
			lo, hi := j.Partitions/n, (j.Partitions+n-1)/n
			for _, m := range j.Members {
				if c := shares[m]; c < lo || c > hi {
					t.Fatalf("trial %d: job %s (%d partitions, %d members): member leads %d, want %d or %d", trial, j.Name, j.Partitions, n, c, lo, hi)
				}
			}
		}
	}
}

// A job of fewer slots than members: at most one slot each, with the
// single-slot jobs of a catalog spread over the cluster.
func TestSmallJobsAtMostOneEach(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 39))
	for trial := range 200 {
		view := memberIDs(rng, 2+rng.IntN(49))
		jobs := catalog(rng, 1+rng.IntN(50), len(view)-1, view)
		placed(rng, jobs, view)
		a := mustAssign(t, jobs)
		for _, j := range jobs {
			if j.Partitions >= len(j.Members) {
				continue // a placed job may have as many slots as members
			}
			for m, c := range a.Shares(j.Name) {
				if c > 1 {
					t.Fatalf("trial %d: job %s (%d partitions, %d members): %s leads %d", trial, j.Name, j.Partitions, len(j.Members), m, c)
				}
			}
		}
	}
}

// Same view and catalog, given in any order and with ids repeated: the same
// owner for every slot.
func TestSameInputSameOwners(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 39))
	for trial := range 100 {
		view := memberIDs(rng, 1+rng.IntN(50))
		jobs := catalog(rng, 1+rng.IntN(30), 1000, view)
		placed(rng, jobs, view)
		a := mustAssign(t, jobs)
		shuffled := slices.Clone(jobs)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		for i := range shuffled {
			ms := append(slices.Clone(shuffled[i].Members), shuffled[i].Members[0])
			rng.Shuffle(len(ms), func(x, y int) { ms[x], ms[y] = ms[y], ms[x] })
			shuffled[i].Members = ms
		}
		b := mustAssign(t, shuffled)
		if n, _ := moved(a, b, jobs); n != 0 {
			t.Fatalf("trial %d: %d slots owned differently for the same input in another order", trial, n)
		}
	}
}

// Many small jobs (500 of 1 to 16 partitions over 5 members; 40 single-slot
// jobs over 3; 100 to 500 of 1 to 16 over 1 to 50), and catalogs of up to
// 100 jobs of 1 to 1,000 partitions over 1 to 50, in random views: no member's total exceeds the average by
// more than 5 % plus one slot.
func TestClusterTotalsBounded(t *testing.T) {
	for seed := range uint64(3) {
		clusterTotalsBounded(t, rand.New(rand.NewPCG(seed, 39)))
	}
}

func clusterTotalsBounded(t *testing.T, rng *rand.Rand) {
	check := func(trial int, view []string, jobs []Job) {
		a := mustAssign(t, jobs)
		sum := 0
		for _, j := range jobs {
			sum += j.Partitions
		}
		avg := float64(sum) / float64(len(view))
		totals := a.Totals()
		for _, m := range view {
			if float64(totals[m]) > 1.05*avg+1 {
				t.Fatalf("trial %d: %d members, %d jobs, %d slots: a member leads %d, average %.1f", trial, len(view), len(jobs), sum, totals[m], avg)
			}
		}
	}
	for trial := range 100 {
		view := memberIDs(rng, 5)
		check(trial, view, catalog(rng, 500, 16, view))
	}
	for trial := range 100 {
		view := memberIDs(rng, 3)
		check(trial, view, catalog(rng, 40, 1, view))
	}
	for trial := range 100 {
		view := memberIDs(rng, 1+rng.IntN(50))
		check(trial, view, catalog(rng, 100+rng.IntN(400), 16, view))
	}
	for trial := range 30 {
		view := memberIDs(rng, 1+rng.IntN(50))
		check(trial, view, catalog(rng, 1+rng.IntN(100), 1000, view))
	}
}

// One big job: at 10,000 slots, a fourth member joining three moves at most
// 26 % of the slots (ideal 25 %; the documented bound is 30 %), and leaving
// moves the same slots back.
func TestFewMovesOneBigJob(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 39))
	worst := 0.0
	for trial := range 20 {
		view := memberIDs(rng, 4)
		three := []Job{{Name: fmt.Sprintf("big-%d", trial), Partitions: 10000, Members: view[:3]}}
		four := []Job{{Name: three[0].Name, Partitions: 10000, Members: view}}
		n, all := moved(mustAssign(t, three), mustAssign(t, four), four)
		frac := float64(n) / float64(all)
		worst = max(worst, frac)
		if frac > 0.26 {
			t.Fatalf("trial %d: %.3f of 10,000 slots moved on 3→4; want at most 0.26", trial, frac)
		}
	}
	t.Logf("3→4 at 10,000 slots: worst %.3f moved (ideal 0.25)", worst)
}

// Catalogs of up to 100 jobs of 1 to maxP partitions, a member joining N-1
// (or leaving N): averaged over random views, the share of slots that change
// owner against the ideal 1/N stays within each shape's bound: the goal of
// 1.3 × for single-slot jobs and jobs of 1 to 100 partitions at 3→4 and 4→5;
// elsewhere what exact per-job splits achieve (docs/benchmarks.md). Each bound
// is within 0.05 of the figure, so a change that moves more fails here.
func TestFewMovesManySmallJobs(t *testing.T) {
	for _, c := range []struct {
		members, maxP int
		bound         float64
	}{
		{4, 1, 1.20}, {4, 16, 1.40}, {4, 100, 1.20},
		{5, 1, 1.30}, {5, 16, 1.60}, {5, 100, 1.30},
		{8, 1, 1.45}, {8, 16, 1.90}, {8, 100, 1.60},
	} {
		rng := rand.New(rand.NewPCG(6, uint64(c.members*1000+c.maxP)))
		ratio := movesOverIdeal(t, rng, c.members, c.maxP, 100)
		t.Logf("%d→%d members, jobs of 1 to %d partitions: moved %.3f × the ideal on average", c.members-1, c.members, c.maxP, ratio)
		if ratio > c.bound {
			t.Errorf("%d→%d members, jobs of 1 to %d partitions: moved %.3f × the ideal on average; want at most %.2f", c.members-1, c.members, c.maxP, ratio, c.bound)
		}
	}
}

// movesOverIdeal is the share of slots that change owner when the last of n
// members joins, against the ideal 1/n, averaged over that many random views
// (views) of up to 100 jobs of 1 to maxP partitions.
func movesOverIdeal(tb testing.TB, rng *rand.Rand, n, maxP, views int) float64 {
	var ratio float64
	for range views {
		view := memberIDs(rng, n)
		jobs := catalog(rng, 1+rng.IntN(100), maxP, view)
		fewer := slices.Clone(jobs)
		for i := range fewer {
			fewer[i].Members = view[:n-1]
		}
		m, all := moved(mustAssign(tb, fewer), mustAssign(tb, jobs), jobs)
		ratio += float64(m) / float64(all) * float64(n)
	}
	return ratio / float64(views)
}

// The owners depend on the whole catalog, but little: adding a job to 500
// of 1 to 16 partitions moves under 1 % of the other jobs' slots.
func TestAddingAJobMovesFewOthers(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 39))
	var n, all int
	for range 50 {
		view := memberIDs(rng, 3+rng.IntN(3))
		jobs := catalog(rng, 500, 16, view)
		more := append(slices.Clone(jobs), Job{Name: "added", Partitions: 1 + rng.IntN(16), Members: view})
		m, a := moved(mustAssign(t, jobs), mustAssign(t, more), jobs)
		n, all = n+m, all+a
	}
	t.Logf("adding a job moved %.4f of the other jobs' slots", float64(n)/float64(all))
	if float64(n) > 0.01*float64(all) {
		t.Fatalf("adding a job moved %d of the other jobs' %d slots; want under 1 %%", n, all)
	}
}

// benchJobs is jobs jobs of partitions slots each, run by all of n members.
func benchJobs(jobs, partitions, n int) []Job {
	view := memberIDs(rand.New(rand.NewPCG(7, 39)), n)
	out := make([]Job, jobs)
	for i := range out {
		out[i] = Job{Name: fmt.Sprintf("job-%d", i), Partitions: partitions, Members: view}
	}
	return out
}

// BenchmarkAssignView is what a member computes on every view change: the
// owners of 10,000 slots (100 jobs of 100) over 3 members.
func BenchmarkAssignView(b *testing.B) {
	jobs := benchJobs(100, 100, 3)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Assign(jobs)
	}
}

// BenchmarkAssign100k is the owners of 100,000 slots (1,000 jobs of 100)
// over 10 members.
func BenchmarkAssign100k(b *testing.B) {
	jobs := benchJobs(1000, 100, 10)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Assign(jobs)
	}
}

// BenchmarkMoves reports the share of slots that change owner when one
// member joins N-1, against the ideal 1/N, averaged over random views, for
// catalogs of up to 100 jobs of 1 to maxP partitions.
func BenchmarkMoves(b *testing.B) {
	for _, n := range []int{4, 5, 8} {
		for _, maxP := range []int{1, 16, 100} {
			b.Run(fmt.Sprintf("members=%d/partitions=1-%d", n, maxP), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(8, 39))
				var ratio float64
				views := 0
				for b.Loop() {
					view := memberIDs(rng, n)
					jobs := catalog(rng, 1+rng.IntN(100), maxP, view)
					fewer := slices.Clone(jobs)
					for i := range fewer {
						fewer[i].Members = view[:n-1]
					}
					m, all := moved(mustAssign(b, fewer), mustAssign(b, jobs), jobs)
					ratio += float64(m) / float64(all) * float64(n)
					views++
				}
				b.ReportMetric(ratio/float64(views), "moved/ideal")
			})
		}
	}
}

// BenchmarkMovesOneJob reports the share of one job's P slots that change
// owner when a member joins N-1, against the ideal 1/N, averaged over random
// views: the cost of exact splits by job size.
func BenchmarkMovesOneJob(b *testing.B) {
	for _, n := range []int{4, 5, 8} {
		for _, p := range []int{2, 4, 8, 16, 32, 64, 100, 400, 1000} {
			b.Run(fmt.Sprintf("members=%d/partitions=%d", n, p), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(10, 39))
				var ratio float64
				views := 0
				for b.Loop() {
					view := memberIDs(rng, n)
					jobs := []Job{{Name: fmt.Sprintf("job-%x", rng.Uint64()), Partitions: p, Members: view}}
					fewer := []Job{{Name: jobs[0].Name, Partitions: p, Members: view[:n-1]}}
					m, all := moved(mustAssign(b, fewer), mustAssign(b, jobs), jobs)
					ratio += float64(m) / float64(all) * float64(n)
					views++
				}
				b.ReportMetric(ratio/float64(views), "moved/ideal")
			})
		}
	}
}
