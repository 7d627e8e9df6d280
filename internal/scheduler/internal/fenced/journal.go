package fenced

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/history/journal"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Record is an execution record for the member's journal: the writer puts
// the records of a transaction's writes in one key, an entry of the
// member's journal (history.EncodeJournal), each still committed only
// while its write's claim holds. The state a record carries goes to its
// slot's state key in the same transaction, not to the entry (placeState). A record stays there until its entry is
// reused, size transactions later; before that, the writer copies it to
// its slot's ring if it is still among the slot's Limit newest committed,
// unless a newer holder has taken the slot over (copyBatch): so at every
// revision each such record is in the journal or in the ring, and a
// takeover, which reads both at one revision, finds it. A write that hands
// the slot over (Handover) copies the slot's records that are still among
// its newest, so the next holder finds them in the ring; a holder that
// stops without a handover leaves its journal to the next holders, who
// copy what they need when they take each slot (the scheduler's takeover).
// Held by TestJournalCopiesRecordsStillNewestWhenReused,
// TestACopyLandsAfterTheClaimEndedUntilANewerHolderTookOver,
// TestHandoverCopiesTheSlotsRecords and
// TestReusingAFullEntryCopiesEveryRecord.
type Record struct {
	Slot   shard.Slot
	Limit  int            // the slot's history limit
	Stored history.Stored // its Seq set, its state (if any) the slot's as of this write
}

// DefaultJournalEntries is how many entries a member's journal has unless
// told otherwise (UseJournal): enough that a slot firing every second keeps
// its newest records (10 by default) in the journal, not copied, at a few
// thousand records a second per member (docs/decisions/0013-records-share-a-key.md).
const DefaultJournalEntries = 1024

// maxHandoverCopies bounds the records a handover copies (the newest):
// a transaction has room for 128 operations. A slot keeping more, and
// firing fast, leaves the older ones to its next holder's takeover.
const maxHandoverCopies = 64

// journal is what the writer knows of its member's journal: what each
// entry holds in etcd, and of each slot with records there, its newest.
type journalIndex struct {
	cluster, member string
	size            int
	next            int64   // the next entry's number
	entries         []entry // by entry number mod size
	slots           map[shard.Slot]*journaled
	byLeader        map[string]shard.Slot // the slots in slots, by leader key
	copying         bool                  // a copy batch is in flight
}

// entry is what an entry of the journal holds in etcd, as the writer
// keeps it: where its records are, not what they say. A copy reads a
// record back from its entry (fill), which holds it until the entry is
// reused. Keeping every record of a journal in memory made the members'
// garbage collector mark them all at every cycle, and keeping each
// record's slot, claim and entry grew a member by the journal's length
// times a few hundred bytes (docs/decisions/0016-writer-keeps-where-records-are.md,
// docs/decisions/0017-journal-index-16-bytes-a-record.md; BenchmarkJournalIndex).
type entry struct {
	number  int64 // -1: never written
	records []held
}

// held is a record in an entry that its slot still needed when the entry
// landed: its slot, under the claim it was written with, and its seq.
type held struct {
	js  *journaled
	seq int64
}

// copyOf is a record to copy to its slot's ring, from its entry, and where
// it goes there (decided under the writer's lock, so fill, off it, reads
// only what never changes: the slot and claim of h.js).
type copyOf struct {
	h     held
	entry int64
	key   string
}

// journaled is a slot with records in the journal, under one claim: a
// slot claimed again is a new journaled, so a record's js says both its
// slot and its claim.
type journaled struct {
	slot   shard.Slot
	claim  fencing.Claim
	newest int64 // its newest committed record's seq (see reuse)
	limit  int
	// lastRev is the revision of its newest committed write of any kind:
	// a state key written after it is a newer holder's (copyBatch).
	lastRev int64
	// recent are the seq and entry of its newest records landed (at most
	// maxHandoverCopies of them, oldest first, up to twice that before
	// trimming), for a handover.
	recent []heldAt
}

type heldAt struct{ seq, entry int64 }

func newIndex(cluster, member string, size int) *journalIndex {
	entries := make([]entry, size)
	for i := range entries {
		entries[i].number = -1
	}
	return &journalIndex{cluster: cluster, member: member, size: size, entries: entries,
		slots: map[shard.Slot]*journaled{}, byLeader: map[string]shard.Slot{}}
}

// needed reports whether h is still among its slot's newest records and
// the slot still held under h's claim.
func (j *journalIndex) needed(h held) bool {
	return j.slots[h.js.slot] == h.js && h.seq > h.js.newest-int64(h.js.limit)
}

// holds reports whether entry number n still holds record seq of js: it
// has not been reused nor the record copied out.
func (j *journalIndex) holds(n int64, js *journaled, seq int64) bool {
	e := &j.entries[n%int64(j.size)]
	return e.number == n && slices.Contains(e.records, held{js, seq})
}

// handoverCopies are the records of the slot fw hands over (if it does) to
// copy to the slot's ring: its newest still here.
func (j *journalIndex) handoverCopies(fw Write) []copyOf {
	if !fw.Handover {
		return nil
	}
	s, ok := j.byLeader[fw.Claim.LeaderKey]
	if !ok || j.slots[s].claim != fw.Claim {
		return nil
	}
	js := j.slots[s]
	recent := slices.Clone(js.recent)
	slices.SortFunc(recent, func(a, b heldAt) int { return cmp.Compare(b.seq, a.seq) })
	var out []copyOf
	for _, r := range recent {
		h := held{js, r.seq}
		if j.needed(h) && j.holds(r.entry, js, r.seq) && len(out) < maxHandoverCopies {
			out = append(out, j.copyOf(h, r.entry))
		}
	}
	return out
}

// copyOf is the copy of h, in entry n, to its slot's ring.
func (j *journalIndex) copyOf(h held, n int64) copyOf {
	return copyOf{h: h, entry: n, key: keyspace.HistoryEntry(j.cluster, h.js.slot, h.seq, max(h.js.limit, 1))}
}

// plan is what a batch writes to the journal: its entry, or the copies of
// the records of the entry to be reused that are still needed.
type plan struct {
	entry int64 // -1: the batch has no records
	// copy says the batch copies the next entry's records to their rings
	// (copyBatch) before the entry is reused.
	copy bool
	// handover are the copies of each handing-over write, by its claim (a
	// batch holds one write per leader key), and their puts once filled.
	handover    map[fencing.Claim][]copyOf
	handoverOps map[fencing.Claim][]clientv3.Op
	landed      []Write          // the batch's writes committed so far
	revs        map[string]int64 // the revision each committed at, by leader key
}

// committed adds writes b, just committed at revision rev, to p's landed
// writes.
func (p *plan) committed(b []Write, rev int64) {
	p.landed = append(p.landed, b...)
	if p.revs == nil {
		p.revs = map[string]int64{}
	}
	for _, fw := range b {
		p.revs[fw.Claim.LeaderKey] = rev
	}
}

// take plans batch b, taken off the queue (under the
// writer's lock) with the copies of its handing-over writes
// (handoverCopies): its records go in the next entry, which holds no record
// still to copy (blocked). Its writes become their slots' newest only once
// they commit (landed).
func (j *journalIndex) take(b []Write, handover map[fencing.Claim][]copyOf) *plan {
	p := &plan{entry: -1, handover: handover}
	hasRecords := false
	for _, fw := range b {
		if len(fw.Records) > 0 {
			hasRecords = true
		}
		for _, r := range fw.Records {
			if js := j.slots[r.Slot]; js == nil || js.claim != fw.Claim { // held again: the older records are the takeover's
				j.slots[r.Slot] = &journaled{slot: r.Slot, claim: fw.Claim, newest: -1}
				j.byLeader[fw.Claim.LeaderKey] = r.Slot
			}
		}
	}
	if !hasRecords {
		return p
	}
	p.entry = j.next
	j.next++
	return p
}

// reuse is what the writer knows, as it takes its next batch, of the
// entry to be reused next: the records it holds that are still needed.
// Only committed records count among a slot's newest: a record queued or
// in flight may yet fail, and the one it would have replaced is then the
// slot's newest (TestAnEntryIsReusedOnlyAfterItsSlotsNewerRecordsLanded).
func (j *journalIndex) reuse() []held {
	var out []held
	for _, h := range j.entries[j.next%int64(j.size)].records {
		if j.needed(h) {
			out = append(out, h)
		}
	}
	return out
}

// copyBatch is the batch that copies the next entry's records still needed
// to their slots' rings, before the entry is reused: one write per slot,
// up to maxTxnOps puts. A copy is not fenced by its claim: a record of a
// claim that has ended is still its slot's newest until a newer holder
// has read it, and a takeover finds it in the ring as well as in the
// entry. It is guarded instead by the slot's state key, which a newer
// holder puts after its takeover read (the scheduler's takeoverWrite) and
// this member last put no later than the slot's lastRev: a state key put
// since means the slot was taken over, and its record is the new holder's
// (errTakenOver). Like any write of its slots, the batch is ordered
// after their writes in flight (busy says which order keys are): it would
// otherwise decide that a record is its slot's newest before a newer one
// landed, and land after it. It returns the batch with its order keys
// (copyKeys); nil when there is nothing to copy, a copy batch is in
// flight, or a write of one of its slots is. Held by
// TestACopyWaitsForItsSlotsWriteInFlight.
func (j *journalIndex) copyBatch(needed []held, busy func(orderKey string) bool) ([]Write, []string) {
	if j.copying {
		return nil, nil
	}
	bySlot := map[*journaled][]held{}
	var order []*journaled
	n := 0
	for _, h := range needed {
		if n == maxTxnOps {
			break
		}
		if _, ok := bySlot[h.js]; !ok {
			order = append(order, h.js)
		}
		bySlot[h.js] = append(bySlot[h.js], h)
		n++
	}
	if n == 0 {
		return nil, nil
	}
	reused := j.entries[j.next%int64(j.size)].number // the entry needed comes from
	b := make([]Write, 0, len(order))
	for _, js := range order {
		hs := bySlot[js]
		cs := make([]copyOf, 0, len(hs))
		for _, h := range hs {
			cs = append(cs, j.copyOf(h, reused))
		}
		state := keyspace.State(j.cluster, js.slot)
		b = append(b, Write{Claim: js.claim, Done: make(chan error, 1), copies: cs,
			guard: clientv3.Compare(clientv3.ModRevision(state), "<", js.lastRev+1), stateKey: state})
	}
	keys := j.copyKeys(b)
	if slices.ContainsFunc(keys, busy) {
		return nil, nil
	}
	j.copying = true
	return b, keys
}

// copyKeys are the order keys of copy batch b: its leader keys and the
// ring keys it puts.
func (j *journalIndex) copyKeys(b []Write) []string {
	var keys []string
	for _, fw := range b {
		keys = append(keys, fw.Claim.LeaderKey)
		for _, c := range fw.copies {
			keys = append(keys, c.key)
		}
	}
	return keys
}

// fill reads back from their entries the records copy batch b or the
// handovers of plan p copy, and makes their puts (off the writer's lock;
// the entries are not reused before the copies land).
func (j *journalIndex) fill(ctx context.Context, kv clientv3.KV, b []Write, p *plan) error {
	var all []copyOf
	for _, fw := range b {
		all = append(all, fw.copies...)
		if p != nil && fw.Handover {
			all = append(all, p.handover[fw.Claim]...)
		}
	}
	if len(all) == 0 {
		return nil
	}
	records, err := j.readBack(ctx, kv, all)
	if err != nil {
		return err
	}
	puts := func(cs []copyOf) []clientv3.Op {
		var ops []clientv3.Op
		for _, c := range cs {
			st, ok := records[recordAt{c.h.js.slot, c.h.seq}]
			if !ok {
				continue
			}
			st.State = nil // a record's state is its state key's (placeState)
			ops = append(ops, clientv3.OpPut(c.key, string(history.Encode(st, history.FormatJournal))))
		}
		return LastPutPerKey(ops)
	}
	for i := range b {
		if len(b[i].copies) > 0 {
			b[i].Ops = puts(b[i].copies)
		}
		if p == nil || !b[i].Handover {
			continue
		}
		if cs := p.handover[b[i].Claim]; len(cs) > 0 {
			if p.handoverOps == nil {
				p.handoverOps = map[fencing.Claim][]clientv3.Op{}
			}
			p.handoverOps[b[i].Claim] = puts(cs)
		}
	}
	return nil
}

type recordAt struct {
	slot shard.Slot
	seq  int64
}

// readBack reads the entries holding the records of cs.
func (j *journalIndex) readBack(ctx context.Context, kv clientv3.KV, cs []copyOf) (map[recordAt]history.Stored, error) {
	seen := map[int64]bool{}
	var keys []string
	for _, c := range cs {
		if n := c.entry % int64(j.size); !seen[n] {
			seen[n] = true
			keys = append(keys, keyspace.JournalEntry(j.cluster, j.member, int(n)))
		}
	}
	entries, err := journal.GetEach(ctx, kv, keys)
	if err != nil {
		return nil, err
	}
	out := map[recordAt]history.Stored{}
	for _, kvs := range entries {
		for _, e := range kvs {
			items, err := history.DecodeJournal(j.member, e.Value)
			if err != nil {
				continue
			}
			for _, it := range items {
				out[recordAt{it.Slot, *it.Stored.Seq}] = it.Stored
			}
		}
	}
	return out, nil
}

// copiedOut takes the records of copy batch b out of the entry they were
// in, once their copy committed or their slot was taken over (under the
// writer's lock); the others are copied again in the next copy batch, after
// a state key this member wrote later than lastRev (in a write that had not
// landed yet) is taken as its own.
func (j *journalIndex) copiedOut(b []Write) {
	j.copying = false
	for _, fw := range b {
		var err error
		select {
		case err = <-fw.Done:
		default:
			err = ErrAbandoned
		}
		var not notCopied
		if errors.As(err, &not) {
			if js := j.slots[fw.copies[0].h.js.slot]; js == fw.copies[0].h.js {
				js.lastRev = max(js.lastRev, not.stateRev)
			}
			continue
		}
		if err != nil && !errors.Is(err, errTakenOver) {
			continue
		}
		if errors.Is(err, errTakenOver) && j.slots[fw.copies[0].h.js.slot] == fw.copies[0].h.js {
			j.drop(fw.copies[0].h.js.slot) // none of its records is needed here any more
		}
		for _, c := range fw.copies {
			if e := &j.entries[c.entry%int64(j.size)]; e.number == c.entry {
				e.records = slices.DeleteFunc(e.records, func(o held) bool { return o == c.h })
			}
		}
	}
}

// LastPutPerKey keeps, of puts to the same key, the last: etcd refuses a
// transaction that writes a key twice.
func LastPutPerKey(puts []clientv3.Op) []clientv3.Op {
	last := make(map[string]int, len(puts))
	for i, op := range puts {
		last[string(op.KeyBytes())] = i
	}
	out := puts[:0]
	for i, op := range puts {
		if last[string(op.KeyBytes())] == i {
			out = append(out, op)
		}
	}
	return out
}

// entryPut is the put of p's entry holding the records of writes.
func (j *journalIndex) entryPut(p *plan, writes []Write) clientv3.Op {
	var items []history.JournalItem
	for _, fw := range writes {
		for _, r := range fw.Records {
			items = append(items, history.JournalItem{Slot: r.Slot, Stored: r.Stored})
		}
	}
	key := keyspace.JournalEntry(j.cluster, j.member, int(p.entry%int64(j.size)))
	return clientv3.OpPut(key, string(history.EncodeJournal(j.member, items)))
}

// landed records what p's batch left in etcd (under the writer's lock):
// the writes that committed are their slots' newest; its entry holds their
// records, if any did; a handover that committed ends its slot here.
func (j *journalIndex) landed(p *plan) {
	for _, fw := range p.landed {
		key := fw.Claim.LeaderKey
		if s, ok := j.byLeader[key]; ok && j.slots[s].claim == fw.Claim {
			j.slots[s].lastRev = max(j.slots[s].lastRev, p.revs[key])
		}
		for _, r := range fw.Records {
			if js := j.slots[r.Slot]; js != nil && js.claim == fw.Claim && *r.Stored.Seq > js.newest {
				js.newest, js.limit = *r.Stored.Seq, r.Limit
			}
		}
	}
	if p.entry >= 0 && len(p.landed) > 0 {
		e := entry{number: p.entry}
		for _, fw := range p.landed {
			for _, r := range fw.Records {
				js := j.slots[r.Slot]
				if js == nil || js.claim != fw.Claim {
					continue // handed over or claimed again: the record is not needed
				}
				e.records = append(e.records, held{js, *r.Stored.Seq})
				js.recent = append(js.recent, heldAt{*r.Stored.Seq, p.entry})
				if len(js.recent) == 2*maxHandoverCopies {
					js.recent = append(js.recent[:0], js.recent[maxHandoverCopies:]...)
				}
			}
		}
		j.entries[p.entry%int64(j.size)] = e
	}
	for _, fw := range p.landed {
		if s, ok := j.byLeader[fw.Claim.LeaderKey]; ok && fw.Handover && j.slots[s].claim == fw.Claim && p.copiedAll(fw.Claim) {
			j.drop(s)
		}
	}
}

func (j *journalIndex) drop(s shard.Slot) {
	if js := j.slots[s]; js != nil {
		delete(j.byLeader, js.claim.LeaderKey)
		delete(j.slots, s)
	}
}

// copiedAll reports whether the handover of claim in p copied every record
// of its slot still needed: it made every copy it planned, and planned
// fewer than maxHandoverCopies. One that did not (its records could not be
// read back, or the slot keeps more) leaves its slot's records needed: they
// are copied before their entries are reused, unless the next holder has
// taken the slot over by then (copyBatch).
func (p *plan) copiedAll(claim fencing.Claim) bool {
	planned := len(p.handover[claim])
	return len(p.handoverOps[claim]) == planned && planned < maxHandoverCopies
}

// errTakenOver answers a copy whose slot a newer holder has taken over.
var errTakenOver = errors.New("fenced: copy not needed: the slot was taken over")

// notCopied answers a copy refused because the slot's state key was put
// after the slot's lastRev, by this member (stateRev: when).
type notCopied struct{ stateRev int64 }

func (e notCopied) Error() string {
	return fmt.Sprintf("fenced: copy refused: the state key was put at revision %d", e.stateRev)
}
