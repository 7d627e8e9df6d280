package scheduler

import (
	"context"
	"sync"

	"github.com/kira-scheduler/kira/history"
	"github.com/kira-scheduler/kira/journal"
	"github.com/kira-scheduler/kira/keyspace"
	"github.com/kira-scheduler/kira/shard"
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
	bell     chan struct{}

	// hold, if set (by tests, before Run), keeps the reads queued until it
	// is closed.
	hold chan struct{}

	mu    sync.Mutex
	queue []*slotRead
	txns  int // transactions committed, for tests
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
	return &takeoverReads{kv: kv, cluster: cluster, journals: journals, bell: make(chan struct{}, 1)}
}

// read is slot s's state key, ring and triggers, read in one transaction
// with the other slots queued; it gives up when ctx ends.
func (r *takeoverReads) read(ctx context.Context, s shard.Slot) (*slotRead, error) {
	q := &slotRead{slot: s, done: make(chan struct{})}
	r.mu.Lock()
	r.queue = append(r.queue, q)
	r.mu.Unlock()
	select {
	case r.bell <- struct{}{}:
	default:
	}
	select {
	case <-q.done:
		return q, q.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run commits the queued reads until ctx ends, waiting for the
// transactions in flight before it returns.
func (r *takeoverReads) run(ctx context.Context) {
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	if r.hold != nil {
		select {
		case <-r.hold:
		case <-ctx.Done():
			return
		}
	}
	free := make(chan struct{}, maxReadTxns)
	for {
		select {
		case free <- struct{}{}: // a transaction may go: it takes what is queued now
		case <-ctx.Done():
			return
		}
		b := r.take()
		if len(b) == 0 {
			<-free
			select {
			case <-r.bell:
			case <-ctx.Done():
				return
			}
			continue
		}
		inFlight.Add(1)
		go func() {
			defer inFlight.Done()
			r.commit(ctx, b)
			<-free
		}()
	}
}

// take takes up to maxSlotsPerRead reads off the queue, oldest first.
func (r *takeoverReads) take() []*slotRead {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := min(len(r.queue), maxSlotsPerRead)
	b := r.queue[:n:n]
	r.queue = r.queue[n:]
	return b
}

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
	r.mu.Lock()
	r.txns++
	r.mu.Unlock()
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
