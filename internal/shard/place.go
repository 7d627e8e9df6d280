package shard

import (
	"cmp"
	"slices"
)

// Place puts job j into a, replacing any job of its name, without moving
// any other job's slot: its base is the one Assign gives it (a job's stable
// matching depends on nothing else), and each leftover goes, strongest
// preference first, to the member choose picks over a's totals with
// Assign's bound. That is Assign's answer for j's base; for its leftovers it
// may differ, and Assign over the whole catalog may also move other jobs'
// leftovers for it (TestAddingAJobMovesFewOthers): a caller that needs
// Assign's exact answer computes it again. Held by
// TestPlaceKeepsOtherJobsAndTheJobsBase.
func (a *Assignment) Place(j Job) error {
	js, err := normalize([]Job{j})
	if err != nil {
		return err
	}
	a.Remove(j.Name)
	nj := js[0]
	owners := make([]string, nj.partitions)
	a.owners[nj.name] = owners
	if len(nj.members) == 0 {
		return nil
	}
	totals := make([]int, len(nj.members)) // the job's members' totals, by index in nj.members
	for i := range nj.members {
		nj.members[i].at = i
		a.members[nj.members[i].id] = true
		totals[i] = a.totals[nj.members[i].id]
	}
	a.slots += nj.partitions
	limit := a.slots/len(a.members) + 1
	var rest []leftover
	for k, m := range match(nj) {
		if m >= 0 {
			owners[k] = nj.members[m].id
			totals[m]++
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
		m := choose(l.key, nj, taken, totals, limit)
		taken[m] = true
		owners[l.k] = nj.members[m].id
		totals[m]++
	}
	for i, m := range nj.members {
		a.totals[m.id] = totals[i]
	}
	return nil
}

// Remove takes job name out of a; no other job's slot moves.
func (a *Assignment) Remove(name string) {
	owners, ok := a.owners[name]
	if !ok {
		return
	}
	placed := false
	for _, o := range owners {
		if o != "" {
			a.totals[o]--
			placed = true
		}
	}
	if placed {
		a.slots -= len(owners)
	}
	delete(a.owners, name)
}
