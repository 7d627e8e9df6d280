package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kira-scheduler/kira/config"
)

// ChainSlack is how long before the window's end a logical time must be
// for its dependents to be judged: a dependent fires after its upstreams
// ended, so its write for a time just before the end may come after the
// check.
const ChainSlack = 5 * time.Second

// judgeChains holds the dependents of the catalog (after:) to their
// promise, per logical time T in the window (a time every partition of
// every upstream had a write accepted for): each partition of the
// dependent had a write accepted for T, after every one of those upstream
// writes, and at no other time; and each dependent slot's accepted writes
// come in the order of their logical times. A dependent that ran T without every upstream
// partition's write accepted first, or out of order, fails it; one that
// never ran T fails it unless its misfire policy may drop T inside a
// fault's window. Its duplicates are the general check's. Held by
// TestChainsAreJudged.
func judgeChains(rep *Report, accepted map[key][]Attempt, spec Spec) {
	bySlot := map[string][]Attempt{}
	for _, as := range accepted {
		bySlot[as[0].Slot()] = append(bySlot[as[0].Slot()], as[0])
	}
	for _, j := range spec.Catalog.Jobs {
		if !j.Dependent() {
			continue
		}
		for p := 0; p < j.Partitions; p++ {
			slot := fmt.Sprintf("%s/%d", j.Name, p)
			ordered := slices.Clone(bySlot[slot])
			sort.Slice(ordered, func(a, b int) bool { return ordered[a].Seq < ordered[b].Seq })
			for i := 1; i < len(ordered); i++ {
				if ordered[i].Scheduled.Before(ordered[i-1].Scheduled) {
					rep.violate("%s: logical time %s accepted after %s (out of order)", slot,
						ordered[i].Scheduled.Format(time.RFC3339Nano), ordered[i-1].Scheduled.Format(time.RFC3339Nano))
				}
			}
		}
		times := upstreamTimes(j, accepted, spec)
		for p := 0; p < j.Partitions; p++ {
			slot := fmt.Sprintf("%s/%d", j.Name, p)
			for _, a := range bySlot[slot] {
				if !a.Scheduled.Before(spec.From) && a.Scheduled.Before(spec.To.Add(-ChainSlack)) && !slices.ContainsFunc(times, a.Scheduled.Equal) {
					rep.violate("%s: logical time %s accepted, though not every upstream partition's was", slot, a.Scheduled.Format(time.RFC3339Nano))
				}
			}
		}
		for _, t := range times {
			last := lastUpstreamWrite(j, t, accepted, spec.Catalog)
			for p := 0; p < j.Partitions; p++ {
				slot := fmt.Sprintf("%s/%d", j.Name, p)
				as := accepted[key{slot, t.UnixNano()}]
				switch {
				case len(as) == 0 && inDropWindow(spec.Faults, t) && j.Misfire != config.MisfireFireAll:
					rep.Dropped[j.Misfire]++
				case len(as) == 0:
					rep.violate("%s: logical time %s never accepted, after every upstream partition's was", slot, t.Format(time.RFC3339Nano))
				case as[0].Seq < last:
					rep.violate("%s: logical time %s accepted before every upstream partition's was", slot, t.Format(time.RFC3339Nano))
				}
			}
		}
	}
}

// upstreamTimes are the logical times in [From, To − ChainSlack) for
// which every partition of every upstream of j had a write accepted.
func upstreamTimes(j config.Job, accepted map[key][]Attempt, spec Spec) []time.Time {
	ups := map[string]bool{}
	want := 0
	for _, u := range j.After {
		up, ok := spec.Catalog.Job(u.Job)
		if !ok {
			return nil
		}
		ups[u.Job], want = true, want+up.Partitions
	}
	count := map[int64]int{}
	for k := range accepted {
		if ups[k.slot[:strings.LastIndex(k.slot, "/")]] {
			count[k.at]++
		}
	}
	var out []time.Time
	for at, n := range count {
		t := time.Unix(0, at).UTC()
		if n == want && !t.Before(spec.From) && t.Before(spec.To.Add(-ChainSlack)) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// lastUpstreamWrite is the sequence number of the last upstream write
// accepted for t.
func lastUpstreamWrite(j config.Job, t time.Time, accepted map[key][]Attempt, cat *config.Catalog) int64 {
	var last int64
	for _, u := range j.After {
		up, _ := cat.Job(u.Job)
		for p := 0; p < up.Partitions; p++ {
			if as := accepted[key{fmt.Sprintf("%s/%d", u.Job, p), t.UnixNano()}]; len(as) > 0 && as[0].Seq > last {
				last = as[0].Seq
			}
		}
	}
	return last
}
