package shard

import (
	"cmp"
	"slices"
)

// Place puts job j into a, replacing any job of its name, without moving
// any other job's slot. Its answer depends on j and its members alone, not
// on what else a holds or how a came to hold it: each member's ⌊P/N⌋ is
// the job's stable matching (Assign's base, which depends on nothing else),
// and each of the P mod N slots left over goes, strongest preference
// first, to its highest-scoring member without a leftover of the job yet.
// So every member that places a job added one by one places it the same
// way, whatever its history (TestPlaceDependsOnTheJobAlone).
//
// Assign spreads the leftovers of all jobs with the members' totals
// bounded, so it may put a leftover of j elsewhere (where j's top member
// is over the average), and move a few other jobs' leftovers for it
// (TestAddingAJobMovesFewOthers): a caller that computes Assign again
// afterwards hands those slots over, under their fences
// (docs/decisions/0047-a-new-job-placed-by-itself.md). Held by
// TestPlaceKeepsOtherJobsAndTheJobsBase.
func (a *Assignment) Place(j Job) error {
	js, err := normalize([]Job{j})
	if err != nil {
		return err
	}
	nj := js[0]
	owners := make([]string, nj.partitions)
	a.owners[nj.name] = owners
	if len(nj.members) == 0 {
		return nil
	}
	var rest []leftover
	for k, m := range match(nj) {
		if m >= 0 {
			owners[k] = nj.members[m].id
			continue
		}
		key := slotKey(nj.hash, k)
		top := uint64(0)
		for _, c := range nj.members {
			top = max(top, score(key, c))
		}
		rest = append(rest, leftover{order: top, key: key, k: int32(k)})
	}
	slices.SortFunc(rest, func(a, b leftover) int {
		return cmp.Or(cmp.Compare(b.order, a.order), cmp.Compare(a.key, b.key), cmp.Compare(a.k, b.k))
	})
	taken := make([]bool, len(nj.members))
	for _, l := range rest {
		m := preferred(l.key, nj, taken)
		taken[m] = true
		owners[l.k] = nj.members[m].id
	}
	return nil
}

// preferred is the member of j not yet taken that scores highest with slot
// key.
func preferred(key uint64, j normalJob, taken []bool) int {
	best, bestScore := -1, uint64(0)
	for i, m := range j.members {
		if sc := score(key, m); !taken[i] && (best < 0 || sc > bestScore) {
			best, bestScore = i, sc
		}
	}
	return best
}

// Remove takes job name out of a; no other job's slot moves.
func (a *Assignment) Remove(name string) { delete(a.owners, name) }
