// Package journal reads members' journals, and its doc is the map of the
// path a record takes through them (the contract it keeps: go doc ./internal/history).
//
//  1. Written. Each member's fenced writer (internal/scheduler/internal/fenced: Writer,
//     Record, and its index of the journal) puts the records of one
//     transaction in the next entry of the member's journal
//     (keyspace.JournalEntry, a ring of 1,024 keys per member), each record
//     committed only while its slot's claim holds, without a state: the
//     transaction puts the slot's state in its state key; the encoding is
//     history.EncodeJournal.
//  2. Kept. Before the writer reuses an entry it copies the records still
//     among their slots' newest committed to the slots' rings
//     (keyspace.HistoryEntry), also after their claim ended, until a newer
//     holder has taken the slot over; a resign copies its slot's newest
//     records and puts its state key in the transaction that deletes the
//     leader key.
//  3. Read by a new holder. scheduler.readTakeover reads the journals
//     through a Cache (SlotsNow), after the win, and the slot's state key,
//     ring and triggers at the same revision
//     (internal/scheduler/internal/takeoverread); history.NewestState
//     picks the state (the state key's, unless an earlier version's
//     record carries a newer one), and the new holder's first write
//     copies the records found only in journals to the ring
//     (internal/scheduler/takeover.go).
//  4. Read for history. kira history, kira jobs and the API read rings and
//     journals (package ops); history.Gather keeps each record once.
//  5. Swept. Once every slot with records in a departed member's journal
//     has a state key of a later holder, a member deletes that journal, as
//     it read it (internal/scheduler/journals.go).
//
// A Cache holds every journal as of a revision and is brought forward by
// reading only the entries written since: the keys and their revisions
// first (etcd answers from its index), then the values of those that
// changed. Held by TestCacheReadsOnlyWhatChanged.
package journal

import (
	"context"
	"slices"
	"sync"

	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Cache is the cluster's journals as of a revision; safe for concurrent use.
//
// It keeps each entry as etcd holds it, indexed by slot, and decodes only
// the records asked for: a takeover under load asks for a few slots of
// journals that hold hundreds of thousands of records, of which a second's
// entries changed since the last read
// (docs/decisions/0028-journal-cache-indexed-by-slot.md; BenchmarkCacheRefresh).
type Cache struct {
	kv      clientv3.KV
	cluster string

	mu      sync.Mutex
	rev     int64 // 0: empty
	entries map[string]entry
	bySlot  map[shard.Slot][]placed
	// fetched counts the entries read since the cache was made, for tests.
	fetched int
	users   int // Hold less Release
}

// entry is a journal entry as of the cache's revision.
type entry struct {
	rev   int64
	slots []shard.Slot // each slot with records in it, once
}

// placed is a record of slot in a journal entry, still encoded.
type placed struct {
	key, member string // the entry's key, the journal's member
	rev         int64  // the entry's revision
	item        history.EncodedItem
}

// Hold and Release bracket the reads of the takeovers that share the
// cache (the slots a member takes at once share its reads of the journals):
// the last Release empties it, so a member keeps no journal in memory
// between takeovers.
func (c *Cache) Hold() {
	c.mu.Lock()
	c.users++
	c.mu.Unlock()
}

// Release ends a Hold; see Hold.
func (c *Cache) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.users--; c.users == 0 {
		c.rev, c.entries, c.bySlot = 0, nil, nil
	}
}

// NewCache is an empty cache of cluster's journals.
func NewCache(kv clientv3.KV, cluster string) *Cache {
	return &Cache{kv: kv, cluster: cluster}
}

// Slot is slot s's records in journals, as of a revision no older than
// atLeast, each with its entry's revision.
func (c *Cache) Slot(ctx context.Context, s shard.Slot, atLeast int64) ([]history.Slotted, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.refresh(ctx, atLeast); err != nil {
		return nil, err
	}
	return decoded(c.bySlot[s], nil), nil
}

// SlotsNow is the records in journals of each of slots, as of the revision
// it returns, read now: after every write committed before the call. A
// takeover reads the slot's ring and state at that same revision, so a
// record moved from a journal to the ring meanwhile is found in one of the
// two (TestTakeoverFindsARecordMovedToTheRingWhileItReads).
func (c *Cache) SlotsNow(ctx context.Context, slots []shard.Slot) (map[shard.Slot][]history.Slotted, int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.refresh(ctx, c.rev+1); err != nil {
		return nil, 0, err
	}
	out := make(map[shard.Slot][]history.Slotted, len(slots))
	for _, s := range slots {
		out[s] = decoded(c.bySlot[s], nil)
	}
	return out, c.rev, nil
}

// Records are the records in journals of the slots keep accepts, as of a
// revision no older than atLeast (0: now).
func (c *Cache) Records(ctx context.Context, atLeast int64, keep func(shard.Slot) bool) ([]history.Slotted, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.refresh(ctx, max(atLeast, c.rev+1)); err != nil {
		return nil, err
	}
	var out []history.Slotted
	for s, ps := range c.bySlot {
		if keep(s) {
			out = decoded(ps, out)
		}
	}
	return out, nil
}

// decoded appends the records of ps to out. A record that cannot be
// decoded was not written by a member and holds nothing: it is left out.
func decoded(ps []placed, out []history.Slotted) []history.Slotted {
	for _, p := range ps {
		if st, err := p.item.Decode(p.member); err == nil {
			out = append(out, history.Slotted{Slot: p.item.Slot, Stored: st, Revision: p.rev})
		}
	}
	return out
}

// Clear empties the cache, to free its memory.
func (c *Cache) Clear() {
	c.mu.Lock()
	c.rev, c.entries, c.bySlot = 0, nil, nil
	c.mu.Unlock()
}

// maxGets bounds the reads of one transaction (etcd allows 128 operations).
const maxGets = 128

// GetEach reads keys (each with opts) in transactions of up to 128 reads,
// and returns what each read found, in the order of keys.
func GetEach(ctx context.Context, kv clientv3.KV, keys []string, opts ...clientv3.OpOption) ([][]*mvccpb.KeyValue, error) {
	out := make([][]*mvccpb.KeyValue, 0, len(keys))
	for len(keys) > 0 {
		n := min(len(keys), maxGets)
		gets := make([]clientv3.Op, n)
		for i, k := range keys[:n] {
			gets[i] = clientv3.OpGet(k, opts...)
		}
		resp, err := kv.Txn(ctx).Then(gets...).Commit()
		if err != nil {
			return nil, err
		}
		for _, r := range resp.Responses {
			out = append(out, r.GetResponseRange().Kvs)
		}
		keys = keys[n:]
	}
	return out, nil
}

// refresh brings the cache to a revision no older than atLeast, unless it
// is there already: it lists the journals' keys, reads the entries whose
// revision changed, and re-indexes only those.
func (c *Cache) refresh(ctx context.Context, atLeast int64) error {
	if c.rev > 0 && c.rev >= atLeast {
		return nil
	}
	keys, err := c.kv.Get(ctx, keyspace.Journals(c.cluster), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	rev := keys.Header.Revision
	if c.entries == nil {
		c.entries, c.bySlot = map[string]entry{}, map[shard.Slot][]placed{}
	}
	present := make(map[string]bool, len(keys.Kvs))
	var changed []string
	for _, kv := range keys.Kvs {
		k := string(kv.Key)
		present[k] = true
		if e, ok := c.entries[k]; !ok || e.rev != kv.ModRevision {
			changed = append(changed, k)
		}
	}
	read, err := GetEach(ctx, c.kv, changed, clientv3.WithRev(rev))
	if err != nil {
		return err
	}
	for k := range c.entries {
		if !present[k] {
			c.unindex(k)
		}
	}
	for _, kvs := range read {
		for _, kv := range kvs {
			c.unindex(string(kv.Key))
			c.index(kv)
		}
	}
	c.rev = rev
	return nil
}

// index adds entry kv to the cache. A key not written by a member holds
// no slot's records: it is kept without any, so it is not read again
// until it changes.
func (c *Cache) index(kv *mvccpb.KeyValue) {
	key := string(kv.Key)
	e := entry{rev: kv.ModRevision}
	member, ok := keyspace.ParseJournalEntry(c.cluster, key)
	items, err := history.SplitJournal(kv.Value)
	if ok && err == nil {
		c.fetched++
		for _, it := range items {
			ps := c.bySlot[it.Slot]
			if len(ps) == 0 || ps[len(ps)-1].key != key {
				e.slots = append(e.slots, it.Slot)
			}
			c.bySlot[it.Slot] = append(ps, placed{key: key, member: member, rev: kv.ModRevision, item: it})
		}
	}
	c.entries[key] = e
}

// unindex removes entry key from the cache.
func (c *Cache) unindex(key string) {
	e, ok := c.entries[key]
	if !ok {
		return
	}
	for _, s := range e.slots {
		ps := slices.DeleteFunc(c.bySlot[s], func(p placed) bool { return p.key == key })
		if len(ps) == 0 {
			delete(c.bySlot, s)
		} else {
			c.bySlot[s] = ps
		}
	}
	delete(c.entries, key)
}
