package shard

// match places the base of job j: each of its N members gets exactly
// ⌊P/N⌋ of its P slots, by deferred acceptance (Gale–Shapley): slots
// propose to members in the order of their scores, and each member keeps
// the ⌊P/N⌋ proposals that score highest with it. The result is the stable
// matching best for every slot, whatever the order of proposals: no slot
// and member prefer each other to what they hold. It returns the member
// index of each slot, -1 for the P mod N slots left over.
func match(j normalJob) []int {
	n, p := len(j.members), j.partitions
	owner := make([]int, p)
	for k := range owner {
		owner[k] = -1
	}
	base := p / n
	if base == 0 {
		return owner
	}
	scores := make([]uint64, p*n) // slot k's score with member i: scores[k*n+i]
	for k := range p {
		key := slotKey(j.hash, k)
		for i, m := range j.members {
			scores[k*n+i] = score(key, m)
		}
	}
	tried := make([]int, p) // how many members slot k has proposed to
	last := make([]int, p)  // the member slot k proposed to last
	held := make([]minHeap, n)
	backing := make([]held1, n*base) // each member holds exactly base at the end
	for m := range held {
		held[m].items = backing[m*base : m*base : (m+1)*base]
	}
	free := make([]int, p)
	for k := range free {
		free[k] = p - 1 - k
	}
	for len(free) > 0 {
		k := free[len(free)-1]
		free = free[:len(free)-1]
		if tried[k] == n {
			continue // rejected by every member: left over
		}
		m := nextChoice(scores[k*n:(k+1)*n], tried[k], last[k])
		tried[k], last[k] = tried[k]+1, m
		s := scores[k*n+m]
		h := &held[m]
		switch {
		case len(h.items) < base:
			h.push(held1{s, k})
			owner[k] = m
		case h.items[0].less(held1{s, k}):
			out := h.replaceMin(held1{s, k})
			owner[k], owner[out.slot] = m, -1
			free = append(free, out.slot)
		default:
			free = append(free, k)
		}
	}
	return owner
}

// nextChoice is the member a slot with these scores proposes to after
// proposing to tried members, the last being last: the next in the order
// of score, then index.
func nextChoice(scores []uint64, tried, last int) int {
	best := -1
	for i, s := range scores {
		if tried > 0 && (s > scores[last] || (s == scores[last] && i <= last)) {
			continue // proposed to already
		}
		if best < 0 || s > scores[best] {
			best = i
		}
	}
	return best
}

// held1 is a slot a member holds, with its score there.
type held1 struct {
	score uint64
	slot  int
}

func (a held1) less(b held1) bool {
	return a.score < b.score || (a.score == b.score && a.slot > b.slot)
}

// minHeap is a member's held slots, the lowest scoring on top.
type minHeap struct{ items []held1 }

func (h *minHeap) push(x held1) {
	h.items = append(h.items, x)
	i := len(h.items) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !h.items[i].less(h.items[parent]) {
			break
		}
		h.items[i], h.items[parent] = h.items[parent], h.items[i]
		i = parent
	}
}

// replaceMin puts x in place of the lowest held slot and returns that slot.
func (h *minHeap) replaceMin(x held1) held1 {
	out := h.items[0]
	h.items[0] = x
	i, n := 0, len(h.items)
	for {
		l, r, small := 2*i+1, 2*i+2, i
		if l < n && h.items[l].less(h.items[small]) {
			small = l
		}
		if r < n && h.items[r].less(h.items[small]) {
			small = r
		}
		if small == i {
			return out
		}
		h.items[i], h.items[small] = h.items[small], h.items[i]
		i = small
	}
}
