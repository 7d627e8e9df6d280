package ops

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/history/journal"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Rings is every history ring of a cluster as of its last read, and each
// slot's records gathered from it: a read fetches only the ring keys
// written since (etcd's mod revision), with a count of the keys that tells
// whether any was deleted (then it reads them all again), and gathers
// again only the slots whose ring changed or that have journal entries. A
// dashboard reads the whole history every refresh; at 10,000 slots a fire
// a minute, a refresh 2 s later fetches a few hundred keys, not 100,000.
// The cost is memory: the records, decoded and gathered, stay in the
// serving process (BenchmarkDashboardAt10000Slots;
// TestRingsFollowWritesAndDeletes).
type Rings struct {
	kv      clientv3.KV
	cluster string

	mu       sync.Mutex
	rev      int64                           // the revision of the last read; 0 before the first
	keys     []string                        // every ring key, sorted
	at       map[string]int                  // key -> its index in keys
	recs     []*history.Slotted              // by index: nil for a key that is no readable record
	slots    []shard.Slot                    // the slots of recs, in key order
	bySlotAt map[shard.Slot][]int            // a slot's indexes in recs
	gathered map[shard.Slot][]history.Record // history.Gather of a slot's ring alone
}

// NewRings returns an empty cache of the cluster's rings.
func NewRings(kv clientv3.KV, cluster string) *Rings {
	r := &Rings{kv: kv, cluster: cluster}
	r.reset()
	return r
}

func (r *Rings) reset() {
	r.rev, r.keys, r.at, r.recs = 0, nil, map[string]int{}, nil
	r.slots, r.bySlotAt, r.gathered = nil, map[shard.Slot][]int{}, map[shard.Slot][]history.Record{}
}

// Records is every record of the cluster's history, as readRecordsUnder of
// every ring and the journals (journals nil: a new cache) returns them, in
// the same order.
func (r *Rings) Records(ctx context.Context, journals *journal.Cache) ([]history.Record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	deleted, err := r.update(ctx)
	if err == nil && deleted { // a key was deleted: read them all again (a full read sees none)
		r.reset()
		_, err = r.update(ctx)
	}
	if err != nil {
		return nil, err
	}
	if journals == nil {
		journals = journal.NewCache(r.kv, r.cluster)
	}
	inJournals, err := journals.Records(ctx, r.rev, func(shard.Slot) bool { return true })
	if err != nil {
		return nil, err
	}
	journalOf := map[shard.Slot][]history.Slotted{}
	var journalOnly []shard.Slot
	for _, e := range inJournals {
		if journalOf[e.Slot] == nil && r.bySlotAt[e.Slot] == nil {
			journalOnly = append(journalOnly, e.Slot)
		}
		journalOf[e.Slot] = append(journalOf[e.Slot], e)
	}
	out := make([]history.Record, 0, len(r.recs)+len(inJournals))
	for _, s := range r.slots {
		if j := journalOf[s]; j != nil {
			out = append(out, history.Gather(r.ring(s), j)...)
			continue
		}
		g, ok := r.gathered[s]
		if !ok {
			g = history.Gather(r.ring(s), nil)
			r.gathered[s] = g
		}
		out = append(out, g...)
	}
	for _, s := range journalOnly {
		out = append(out, history.Gather(nil, journalOf[s])...)
	}
	return out, nil
}

// update reads the keys written since the last read into the cache, and
// reports whether the cache holds a key etcd no longer has.
func (r *Rings) update(ctx context.Context) (deleted bool, err error) {
	prefix := keyspace.Cluster(r.cluster) + "history/"
	resp, err := r.kv.Txn(ctx).Then(
		clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithMinModRev(r.rev+1)),
		clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return false, err
	}
	changed, count := resp.Responses[0].GetResponseRange(), resp.Responses[1].GetResponseRange().Count
	// A changed key of a slot already known gathers that slot again alone; a
	// new key, or one whose record became readable or unreadable, all.
	regroup, dirty := false, map[shard.Slot]bool{}
	for _, kv := range changed.Kvs {
		key := string(kv.Key)
		var rec *history.Slotted
		if st, s, ok := decodeRing(r.cluster, prefix, kv); ok {
			rec = &history.Slotted{Slot: s, Stored: st, Revision: kv.ModRevision}
		}
		i, known := r.at[key]
		switch {
		case !known:
			r.at[key] = len(r.keys)
			r.keys, r.recs = append(r.keys, key), append(r.recs, rec)
			regroup = true
		case rec == nil || r.recs[i] == nil:
			r.recs[i], regroup = rec, true
		default:
			r.recs[i], dirty[rec.Slot] = rec, true
		}
	}
	switch {
	case regroup:
		r.sort()
		r.group()
		clear(r.gathered)
	default:
		for s := range dirty {
			delete(r.gathered, s)
		}
	}
	r.rev = resp.Header.Revision
	// Every key etcd has is in the cache, so it holds more only if one
	// was deleted.
	return int64(len(r.keys)) != count, nil
}

// sort puts keys in order, with recs and at following.
func (r *Rings) sort() {
	idx := make([]int, len(r.keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(r.keys[a], r.keys[b]) })
	keys, recs := make([]string, len(idx)), make([]*history.Slotted, len(idx))
	for n, i := range idx {
		keys[n], recs[n] = r.keys[i], r.recs[i]
		r.at[keys[n]] = n
	}
	r.keys, r.recs = keys, recs
}

// group sets slots and bySlotAt from recs.
func (r *Rings) group() {
	r.slots, r.bySlotAt = r.slots[:0], make(map[shard.Slot][]int, len(r.bySlotAt))
	for i, rec := range r.recs {
		if rec == nil {
			continue
		}
		if r.bySlotAt[rec.Slot] == nil {
			r.slots = append(r.slots, rec.Slot)
		}
		r.bySlotAt[rec.Slot] = append(r.bySlotAt[rec.Slot], i)
	}
}

// ring is slot s's ring records, in key order.
func (r *Rings) ring(s shard.Slot) []history.Slotted {
	out := make([]history.Slotted, len(r.bySlotAt[s]))
	for k, i := range r.bySlotAt[s] {
		out[k] = *r.recs[i]
	}
	return out
}
