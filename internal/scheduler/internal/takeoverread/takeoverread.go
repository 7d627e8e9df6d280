// Package takeoverread reads the slots a member takes over: each slot's
// records in the journals, its state key, its ring and its manual
// triggers, at one revision, in transactions shared with the other slots
// taken over at the same time. What a new holder makes of what it read is
// the scheduler's (readTakeover).
package takeoverread

import (
	"context"
	"time"

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

// Queue queues the reads of slots taken over and commits them.
type Queue struct {
	kv       clientv3.KV
	cluster  string
	journals *journal.Cache
	timeout  time.Duration
	queue    *batch.Queue[*Slot]
}

// Slot is a slot's state key, ring, triggers and records in journals,
// once read, and the revision they were read at.
type Slot struct {
	slot                  shard.Slot
	State, Ring, Triggers []*mvccpb.KeyValue
	Journaled             []history.Slotted
	Revision              int64
	err                   error
	done                  chan struct{} // closed once read
}

// New returns a queue that reads the slots of cluster on kv, their records
// in journals first. Each transaction is bounded by timeout (the
// scheduler's raiseTimeout, as long as its takeovers wait); a read waiting
// its turn in the queue is not.
func New(kv clientv3.KV, cluster string, journals *journal.Cache, timeout time.Duration) *Queue {
	r := &Queue{kv: kv, cluster: cluster, journals: journals, timeout: timeout}
	r.queue = batch.New(maxSlotsPerRead, maxReadTxns, r.commit)
	return r
}

// Hold, called (by tests) before Run, keeps the reads queued until c is
// closed.
func (r *Queue) Hold(c chan struct{}) { r.queue.Hold = c }

// Read is slot s's state key, ring and triggers, read in one transaction
// with the other slots queued; it gives up when ctx ends.
func (r *Queue) Read(ctx context.Context, s shard.Slot) (*Slot, error) {
	q := &Slot{slot: s, done: make(chan struct{})}
	r.queue.Put(q)
	select {
	case <-q.done:
		return q, q.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Run commits the queued reads until ctx ends.
func (r *Queue) Run(ctx context.Context) { r.queue.Run(ctx) }

// commit reads b's slots' records in journals, then their keys in one
// transaction at the journals' revision, and answers each.
func (r *Queue) commit(ctx context.Context, b []*Slot) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
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
			q.Revision, q.Journaled = rev, journaled[q.slot]
			q.State = resp.Responses[3*i].GetResponseRange().Kvs
			q.Ring = resp.Responses[3*i+1].GetResponseRange().Kvs
			q.Triggers = resp.Responses[3*i+2].GetResponseRange().Kvs
		}
		close(q.done)
	}
}

// triggersOp reads the manual triggers waiting for slot s, oldest first.
func triggersOp(cluster string, s shard.Slot, opts ...clientv3.OpOption) clientv3.Op {
	opts = append([]clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)}, opts...)
	return clientv3.OpGet(keyspace.Triggers(cluster, s), opts...)
}
