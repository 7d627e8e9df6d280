package scheduler

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// How a campaign's first attempt shares a transaction. A member that starts,
// or takes a failed member's share, campaigns for thousands of slots within
// seconds. Alone, each campaign costs etcd three requests: the election's
// transaction, a read for earlier candidates and a read confirming the key
// (confirmLeadership). Instead, the first attempts queued together go in
// one transaction: for each slot, the election's own transaction (create
// the member's key under its lease if it does not exist, else read it) and
// a read of the election's first-created key. A slot whose first key is the
// member's is won at that key's create revision: etcd shows in one revision
// that no earlier candidate exists and that the key stands under the
// member's lease (the put is refused under a lease that has ended, and a
// key of an ended lease is deleted). Any other slot campaigns alone, as
// concurrency.Election does, and waits for the earlier keys to go. Held by
// TestCandidaciesShareTransactions and TestCandidacyBehindAnotherWaits.

// maxCandidaciesPerTxn is how many slots one transaction stands for. Each
// takes two of etcd's default 128 operations, and its nested transaction
// takes its operations from what the top level leaves.
const maxCandidaciesPerTxn = 42

// maxCandidacyTxns bounds the candidacy transactions in flight.
const maxCandidacyTxns = 2

// candidacy is one campaign's first attempt, and what it learned.
type candidacy struct {
	prefix string // the election's prefix, ending in "/"
	key    string // the member's key in it
	value  string
	lease  clientv3.LeaseID

	won  bool  // key is the first-created key of prefix
	rev  int64 // key's create revision, when won
	err  error
	done chan struct{} // closed once answered
}

// candidacies queues the first attempts of campaigns and commits them.
type candidacies struct {
	*batches[*candidacy]
	kv clientv3.KV
}

func newCandidacies(kv clientv3.KV) *candidacies {
	c := &candidacies{kv: kv}
	c.batches = newBatches(maxCandidaciesPerTxn, maxCandidacyTxns, c.commit)
	return c
}

// stand puts the session's candidacy in the election of prefix (without
// its trailing "/") and returns the election won, or nil when an earlier
// candidate's key stands: the campaign then goes on alone. It gives up when
// ctx ends.
func (c *candidacies) stand(ctx context.Context, session *concurrency.Session, prefix, value string) (*concurrency.Election, error) {
	q := &candidacy{prefix: prefix + "/", value: value, lease: session.Lease(), done: make(chan struct{})}
	q.key = candidacyKey(prefix, q.lease)
	c.add(q)
	select {
	case <-q.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if q.err != nil || !q.won {
		return nil, q.err
	}
	return concurrency.ResumeElection(session, q.prefix, q.key, q.rev), nil
}

// commit stands for b's slots in one transaction and answers each.
func (c *candidacies) commit(ctx context.Context, b []*candidacy) {
	ctx, cancel := context.WithTimeout(ctx, raiseTimeout)
	defer cancel()
	ops := make([]clientv3.Op, 0, 2*len(b))
	for _, q := range b {
		ops = append(ops,
			clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(q.key), "=", 0)},
				[]clientv3.Op{clientv3.OpPut(q.key, q.value, clientv3.WithLease(q.lease))},
				[]clientv3.Op{clientv3.OpGet(q.key)}),
			clientv3.OpGet(q.prefix, append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...))
	}
	resp, err := c.kv.Txn(ctx).Then(ops...).Commit()
	for i, q := range b {
		if err != nil {
			q.err = err
		} else {
			q.won, q.rev = firstIsOwn(q, resp.Responses[2*i].GetResponseTxn(), resp.Responses[2*i+1].GetResponseRange().Kvs)
		}
		close(q.done)
	}
}

// firstIsOwn tells whether q's key is the first of its election with q's
// value, and its create revision. A key of ours that stood with another
// value is left to the campaign alone, which proclaims the value.
func firstIsOwn(q *candidacy, own *pb.TxnResponse, first []*mvccpb.KeyValue) (bool, int64) {
	if own == nil || len(first) != 1 || string(first[0].Key) != q.key || clientv3.LeaseID(first[0].Lease) != q.lease {
		return false, 0
	}
	if !own.Succeeded {
		kvs := own.Responses[0].GetResponseRange().Kvs
		if len(kvs) != 1 || string(kvs[0].Value) != q.value {
			return false, 0
		}
	}
	return true, first[0].CreateRevision
}

// candidacyKey is the key a session's lease stands under in the election of
// prefix, as concurrency.Election names it.
func candidacyKey(prefix string, lease clientv3.LeaseID) string {
	return fmt.Sprintf("%s/%x", prefix, lease)
}
