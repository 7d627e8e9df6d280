package history

import (
	"fmt"
	"slices"

	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// A slot's records are in two places: its ring of history keys, and the
// journals of the members that held it (FormatJournal). A record stays in
// its holder's journal until the entry holding it is reused; the holder
// then copies it to the slot's ring if it is still among the slot's
// newest, and a new holder copies those it finds in journals when it takes
// the slot over. So a record can be in both places; its Seq tells.

// JournalItems reads the items of journal entry kv of cluster.
func JournalItems(cluster string, kv *mvccpb.KeyValue) ([]JournalItem, error) {
	member, ok := keyspace.ParseJournalEntry(cluster, string(kv.Key))
	if !ok {
		return nil, fmt.Errorf("history: %s is not a journal entry's key", kv.Key)
	}
	return DecodeJournal(member, kv.Value)
}

// NewestState is slot s's recorded state: of its state key, its ring's
// records and its records in journals, the one written under the highest
// token, and of those the newest by revision. Tokens rise with every change
// of holder, so a state of an earlier holder can never pass for a later
// one's, even at a higher revision (a journal entry put again by the
// writer's one-by-one retry after a fenced batch holds the records of that
// batch committed before, whose holder may have lost the slot since). Within
// one token the writer keeps a slot's writes in order, so the newest
// revision is the newest state; the state key wins a tie. An unreadable state key is passed over when a
// record holding a state was written after it. A record copied to
// the ring holds a state only when it was the slot's newest write (the
// writer strips it otherwise). An unreadable newest ring record (newer than
// the state key) is an error, as an unreadable state key is: the slot is
// then treated as never run. Held by TestNewestStateIsTheHighestTokensNewest.
func NewestState(s shard.Slot, stateKvs, ringKvs []*mvccpb.KeyValue, journal []Slotted) (SlotState, error) {
	var best *SlotState
	var bestRev int64
	newer := func(st *SlotState, rev int64) bool {
		return best == nil || st.Token > best.Token || st.Token == best.Token && rev > bestRev
	}
	consider := func(st *SlotState, rev int64) {
		if st != nil && newer(st, rev) {
			best, bestRev = st, rev
		}
	}
	var newestRing *mvccpb.KeyValue
	for _, kv := range ringKvs {
		if newestRing == nil || kv.ModRevision > newestRing.ModRevision {
			newestRing = kv
		}
	}
	for _, kv := range ringKvs {
		if r, err := Decode(s, kv.Value); err == nil {
			consider(r.State, kv.ModRevision)
		}
	}
	for _, p := range journal {
		consider(p.Stored.State, p.Revision)
	}
	var stateRev int64
	if len(stateKvs) > 0 {
		stateRev = stateKvs[0].ModRevision
	}
	if newestRing != nil && newestRing.ModRevision > max(stateRev, bestRev) {
		if _, err := Decode(s, newestRing.Value); err != nil {
			return SlotState{}, fmt.Errorf("history: newest record of %s (%s) is unreadable: %w", s, newestRing.Key, err)
		}
	}
	if len(stateKvs) > 0 {
		st, err := DecodeState(s, stateKvs[0].Value)
		switch {
		case err != nil && (best == nil || bestRev <= stateRev):
			return SlotState{}, fmt.Errorf("history: state of %s is unreadable: %w", s, err)
		case err == nil && (best == nil || !(best.Token > st.Token || best.Token == st.Token && bestRev > stateRev)):
			return st, nil
		}
	}
	if best == nil {
		return SlotState{}, nil
	}
	return *best, nil
}

// Slotted is a stored record with its slot, and the revision that wrote
// it.
type Slotted struct {
	Slot     shard.Slot
	Stored   Stored
	Revision int64
}

// Gather is the history of the slots in ring (records read from ring keys)
// and journal (records read from journal entries): each record once, and
// of a slot's records with a Seq only its HistoryLimit newest (the limit
// its newest record names, Stored.Limit, or in records written before it
// the state it carries), as its ring alone would hold. Records without a
// Seq, written before journals, are kept as their ring holds them.
func Gather(ring, journal []Slotted) []Record {
	// Two passes, so that each slot's records are one allocation: a
	// dashboard gathers every slot's (BenchmarkDashboardAt10000Slots).
	count := map[shard.Slot]int{}
	var order []shard.Slot
	for _, all := range [][]Slotted{ring, journal} {
		for _, r := range all {
			if count[r.Slot] == 0 {
				order = append(order, r.Slot)
			}
			count[r.Slot]++
		}
	}
	bySlot := make(map[shard.Slot][]Stored, len(order))
	for _, all := range [][]Slotted{ring, journal} {
		for _, r := range all {
			if bySlot[r.Slot] == nil {
				bySlot[r.Slot] = make([]Stored, 0, count[r.Slot])
			}
			bySlot[r.Slot] = append(bySlot[r.Slot], r.Stored)
		}
	}
	out := make([]Record, 0, len(ring)+len(journal))
	for _, s := range order {
		for _, st := range newestOnce(bySlot[s]) {
			out = append(out, st.Records()...)
		}
	}
	return out
}

// newestOnce is a slot's records each once, cut to the slot's limit.
func newestOnce(all []Stored) []Stored {
	seqd, old := make([]Stored, 0, len(all)), []Stored(nil)
	seen := make(map[int64]bool, len(all))
	var newest int64 = -1
	limit := 0
	for _, st := range all {
		switch {
		case st.Seq == nil:
			old = append(old, st)
		case !seen[*st.Seq]:
			seen[*st.Seq] = true
			seqd = append(seqd, st)
			if *st.Seq > newest && (st.Limit > 0 || st.State != nil) {
				newest, limit = *st.Seq, st.Limit
				if limit == 0 {
					limit = st.State.HistoryLimit
				}
			}
		}
	}
	if limit <= 0 {
		return append(seqd, old...)
	}
	slices.SortFunc(seqd, func(a, b Stored) int { return int(*b.Seq - *a.Seq) })
	maxSeq := *seqd[0].Seq
	kept := seqd[:0]
	for _, st := range seqd {
		if *st.Seq > maxSeq-int64(limit) {
			kept = append(kept, st)
		}
	}
	if room := limit - len(kept); room > 0 {
		slices.SortFunc(old, func(a, b Stored) int { return b.ScheduledTime.Compare(a.ScheduledTime) })
		kept = append(kept, old[:min(room, len(old))]...)
	}
	return kept
}
