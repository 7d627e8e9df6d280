// Package journal reads members' journals: the keys where a member's fenced
// writer puts the records of many slots, one key per transaction
// (history.FormatJournal, fenced.Record). A slot's records are in its ring
// and in these; a reader needs both (history.NewestState, history.Gather).
//
// A Cache holds every journal as of a revision and is brought forward by
// reading only the entries written since: the keys and their revisions
// first (etcd answers from its index), then the values of those that
// changed. Held by TestCacheReadsOnlyWhatChanged.
package journal

import (
	"context"
	"sync"

	"github.com/kira-scheduler/kira/history"
	"github.com/kira-scheduler/kira/keyspace"
	"github.com/kira-scheduler/kira/shard"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Cache is the cluster's journals as of a revision; safe for concurrent use.
type Cache struct {
	kv      clientv3.KV
	cluster string

	mu      sync.Mutex
	rev     int64 // 0: empty
	entries map[string]entry
	bySlot  map[shard.Slot][]history.Slotted
	// fetched counts the entries read since the cache was made, for tests.
	fetched int
}

type entry struct {
	rev   int64
	items []history.JournalItem
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
	return c.bySlot[s], nil
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
			out = append(out, ps...)
		}
	}
	return out, nil
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
// is there already.
func (c *Cache) refresh(ctx context.Context, atLeast int64) error {
	if c.rev > 0 && c.rev >= atLeast {
		return nil
	}
	keys, err := c.kv.Get(ctx, keyspace.Journals(c.cluster), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	rev := keys.Header.Revision
	entries := make(map[string]entry, len(keys.Kvs))
	var changed []string
	for _, kv := range keys.Kvs {
		if e, ok := c.entries[string(kv.Key)]; ok && e.rev == kv.ModRevision {
			entries[string(kv.Key)] = e
		} else {
			changed = append(changed, string(kv.Key))
		}
	}
	read, err := GetEach(ctx, c.kv, changed, clientv3.WithRev(rev))
	if err != nil {
		return err
	}
	for _, kvs := range read {
		for _, kv := range kvs {
			items, err := history.JournalItems(c.cluster, kv)
			if err != nil {
				continue // not written by a member: it holds no slot's records
			}
			entries[string(kv.Key)] = entry{rev: kv.ModRevision, items: items}
			c.fetched++
		}
	}
	bySlot := map[shard.Slot][]history.Slotted{}
	for _, e := range entries {
		for _, it := range e.items {
			bySlot[it.Slot] = append(bySlot[it.Slot], history.Slotted{Slot: it.Slot, Stored: it.Stored, Revision: e.rev})
		}
	}
	c.rev, c.entries, c.bySlot = rev, entries, bySlot
	return nil
}
