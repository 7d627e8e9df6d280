package shard

import (
	"cmp"
	"slices"
)

// leftover is a slot its job's base did not place: partition k of job js[job].
type leftover struct {
	order uint64 // the slot's highest score: strong preferences first
	key   uint64
	job   int32
	k     int32
}

// place gives every slot of js an owner, in two steps. Each job's base
// (⌊P/N⌋ slots for each of its N members) is a stable matching of its
// slots to its members (match). The P mod N slots left over, from all jobs,
// then go strongest preference first each to the member that prefers it
// most among those of its job without a leftover of it yet and below limit
// in total; where every such member is at the limit, to the one with the
// lowest total.
func place(js []normalJob, owners map[string][]string, members, limit int) {
	totals := make([]int, members)
	var rest []leftover
	for i, j := range js {
		if len(j.members) == 0 {
			continue
		}
		for k, m := range match(j) {
			if m < 0 {
				key := slotKey(j.hash, k)
				top := uint64(0)
				for _, c := range j.members {
					top = max(top, score(key, c))
				}
				rest = append(rest, leftover{order: top, key: key, job: int32(i), k: int32(k)})
				continue
			}
			owners[j.name][k] = j.members[m].id
			totals[j.members[m].at]++
		}
	}
	slices.SortFunc(rest, func(a, b leftover) int {
		if a.order != b.order {
			return cmp.Compare(b.order, a.order)
		}
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.job, b.job), cmp.Compare(a.k, b.k))
	})
	taken := make(map[int32][]bool)
	for _, l := range rest {
		j := js[l.job]
		if taken[l.job] == nil {
			taken[l.job] = make([]bool, len(j.members))
		}
		m := choose(l.key, j, taken[l.job], totals, limit)
		taken[l.job][m] = true
		owners[j.name][l.k] = j.members[m].id
		totals[j.members[m].at]++
	}
}

// choose is the member of j not yet taken that slot key goes to: one below
// limit in total before one at it; among those below, the highest score;
// among those at it, the lowest total, then the highest score.
func choose(key uint64, j normalJob, taken []bool, totals []int, limit int) int {
	best, bestScore, bestTotal := -1, uint64(0), 0
	for i, m := range j.members {
		if taken[i] {
			continue
		}
		t, sc := totals[m.at], score(key, m)
		under, bestUnder := t < limit, bestTotal < limit
		switch {
		case best < 0,
			under && !bestUnder,
			under == bestUnder && (under || t == bestTotal) && sc > bestScore,
			!under && !bestUnder && t < bestTotal:
			best, bestScore, bestTotal = i, sc, t
		}
	}
	return best
}
