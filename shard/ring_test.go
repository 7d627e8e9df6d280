package shard

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func slots(jobs, partitions int) []Slot {
	var out []Slot
	for j := 0; j < jobs; j++ {
		for p := 0; p < partitions; p++ {
			out = append(out, Slot{Job: fmt.Sprintf("job-%d", j), Partition: p})
		}
	}
	return out
}

func members(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("host-%d-7c9e6679-7425-40de-944b-e07fc1f90a%02d", i, i)
	}
	return ids
}

func mustRing(t testing.TB, ids []string) *Ring {
	t.Helper()
	r, err := New(ids)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The ring must not panic and must give every slot exactly one member of the
// view, for small and large views alike; no member exceeds the load bound.
func TestEverySlotHasOneOwnerWithinBound(t *testing.T) {
	all := slots(100, 100)
	for _, n := range []int{1, 2, 3, 50, 500} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ids := members(n)
			r := mustRing(t, ids)
			for _, s := range all {
				if o := r.Owner(s); !slices.Contains(ids, o) {
					t.Fatalf("slot %v owned by %q, not a member", s, o)
				}
			}
			for id, load := range r.Loads() {
				if load > r.MaxLoad() {
					t.Fatalf("member %s holds %v ring partitions, bound %v", id, load, r.MaxLoad())
				}
			}
		})
	}
}

func TestSameViewSameAnswer(t *testing.T) {
	ids := members(5)
	reversed := slices.Clone(ids)
	slices.Reverse(reversed)
	a, b := mustRing(t, ids), mustRing(t, append(reversed, ids[0]))
	for _, s := range slots(50, 20) {
		if a.Owner(s) != b.Owner(s) {
			t.Fatalf("slot %v: %s vs %s for the same view", s, a.Owner(s), b.Owner(s))
		}
	}
}

// Adding a fourth member moves about a quarter of the slots, and removing it
// again moves the same ones back.
func TestFewSlotsMoveOnMembershipChange(t *testing.T) {
	all := slots(100, 100)
	ids := members(4)
	r3, r4 := mustRing(t, ids[:3]), mustRing(t, ids)
	moved := 0
	for _, s := range all {
		if r3.Owner(s) != r4.Owner(s) {
			moved++
		}
	}
	frac := float64(moved) / float64(len(all))
	t.Logf("3→4 members: %.3f of slots moved (ideal 0.25)", frac)
	if frac > 0.30 {
		t.Fatalf("%.3f of slots moved on 3→4; want at most 1.2 × 1/4", frac)
	}
	counts := map[string]int{}
	for _, s := range all {
		counts[r4.Owner(s)]++
	}
	for id, c := range counts {
		if c < len(all)/4/2 || c > len(all)/4*3/2 {
			t.Errorf("member %s owns %d of %d slots: badly unbalanced", id, c, len(all))
		}
	}
}

func TestEmptyAndOversizedViews(t *testing.T) {
	r := mustRing(t, nil)
	if o := r.Owner(Slot{Job: "a"}); o != "" {
		t.Fatalf("empty ring owner = %q", o)
	}
	if _, err := New(members(MaxMembers + 1)); !errors.Is(err, ErrTooManyMembers) {
		t.Fatalf("New(too many) error = %v", err)
	}
}

func BenchmarkOwner(b *testing.B) {
	r := mustRing(b, members(3))
	s := Slot{Job: "reconcile-accounts", Partition: 17}
	b.ReportAllocs()
	for b.Loop() {
		_ = r.Owner(s)
	}
}

// BenchmarkAssignView measures what a member does on every view change:
// build the ring and find the owner of 10,000 slots.
func BenchmarkAssignView(b *testing.B) {
	all := slots(100, 100)
	ids := members(3)
	b.ReportAllocs()
	for b.Loop() {
		r, _ := New(ids)
		for _, s := range all {
			_ = r.Owner(s)
		}
	}
}
