package scheduler

import (
	"context"

	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/history/journal"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/batch"
	"github.com/kira-scheduler/kira/internal/shard"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// How the slots taken over together are read. A takeover reads its slot's
// records in the journals, state key, ring and manual triggers
// (readTakeover); a member that joins or takes a failed member's place does
// that for thousands of slots within seconds. Those reads share
// transactions: each transaction reads the slots queued when it goes, up
// to maxSlotsPerRead, with at most maxReadTxns in flight, so under load a
// takeover's read waits at most for the transactions ahead of it, and
// alone it goes at once. The journals are read first (journal.SlotsNow),
// and the slots' keys at the journals' revision: a slot's reads are of one
// revision. Held by TestTakeoverReadsShareTransactions and
// TestTakeoverFindsARecordMovedToTheRingWhileItReads.

// maxSlotsPerRead is how many slots one transaction reads: three reads
// each, within etcd's default 128 operations.
const maxSlotsPerRead = 42

// maxReadTxns bounds the read transactions in flight.
const maxReadTxns = 2

// takeoverReads queues the reads of slots taken over and commits them.
type takeoverReads struct {
	kv       clientv3.KV
	cluster  string
	journals *journal.Cache
	queue    *batch.Queue[*slotRead]
}

// slotRead is a slot's state key, ring, triggers and records in journals,
// once read, and the revision they were read at.
type slotRead struct {
	slot                  shard.Slot
	state, ring, triggers []*mvccpb.KeyValue
	journaled             []history.Slotted
	revision              int64
	err                   error
	done                  chan struct{} // closed once read
}

func newTakeoverReads(kv clientv3.KV, cluster string, journals *journal.Cache) *takeoverReads {
	r := &takeoverReads{kv: kv, cluster: cluster, journals: journals}
	r.queue = batch.New(maxSlotsPerRead, maxReadTxns, r.commit)
	return r
}

// read is slot s's state key, ring and triggers, read in one transaction
// with the other slots queued; it gives up when ctx ends.
func (r *takeoverReads) read(ctx context.Context, s shard.Slot) (*slotRead, error) {
	q := &slotRead{slot: s, done: make(chan struct{})}
	r.queue.Put(q)
	select {
	case <-q.done:
		return q, q.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run commits the queued reads until ctx ends.
func (r *takeoverReads) run(ctx context.Context) { r.queue.Run(ctx) }

// commit reads b's slots' records in journals, then their keys in one
// transaction at the journals' revision, and answers each.
func (r *takeoverReads) commit(ctx context.Context, b []*slotRead) {
	ctx, cancel := context.WithTimeout(ctx, raiseTimeout) // as long as its takeovers wait
	defer cancel()
	slots := make([]shard.Slot, len(b))
	for i, q := range b {
		slots[i] = q.slot
	}
	journaled, rev, err := r.journals.SlotsNow(ctx, slots)
	var resp *clientv3.TxnResponse
	if err == nil {
		at := clientv3.WithRev(rev)
		ops := make([]clientv3.Op, 0, 3*len(b))
		for _, q := range b {
			ops = append(ops, clientv3.OpGet(keyspace.State(r.cluster, q.slot), at),
				clientv3.OpGet(keyspace.SlotHistory(r.cluster, q.slot), clientv3.WithPrefix(), at), triggersOp(r.cluster, q.slot, at))
		}
		resp, err = r.kv.Txn(ctx).Then(ops...).Commit()
	}
	for i, q := range b {
		if err != nil {
			q.err = err
		} else {
			q.revision, q.journaled = rev, journaled[q.slot]
			q.state = resp.Responses[3*i].GetResponseRange().Kvs
			q.ring = resp.Responses[3*i+1].GetResponseRange().Kvs
			q.triggers = resp.Responses[3*i+2].GetResponseRange().Kvs
		}
		close(q.done)
	}
}
