// Package candidacy runs a member's campaigns for slots: a slot nobody else
// stands in is won in one etcd request, shared with the campaigns of other
// slots queued at the same time, and a slot with an earlier candidate is
// campaigned for as concurrency.Election does (Queue.Campaign).
package candidacy

import (
	"context"
	"time"

	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/batch"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// How a slot's election is won in one request, shared with other slots.
// concurrency.Election's Campaign costs etcd three requests when nobody
// else stands: its transaction, a read for earlier candidates, and our read
// confirming the key (confirmLeadership); a member taking 100,000 slots
// sends 300,000. standFirst's candidacy is one nested transaction of the
// slot's own: the election's own create-if-absent of the member's key under
// its lease, and a read of the election's first-created key. When that key
// is the member's, under its lease and with its value, the slot is won at
// the key's create revision: etcd shows in one revision that no earlier
// candidate stands and that the key stands under a live lease (a put under
// an ended lease is refused, and an ended lease's keys are deleted), which
// is what Campaign's wait and confirmLeadership establish between them. Any
// other answer leaves the key in place and the campaign goes on as
// concurrency.Election does.
//
// The candidacies queued together go in one transaction, up to
// maxStandsPerTxn, as the takeover reads do (package batch): a member
// taking thousands of slots sends etcd one proposal for each batch, not
// each slot. Slots won in one transaction share its revision, so their
// fencing tokens are equal; a token orders the leaders of one slot, never
// two slots. Held by TestCandidacyWonInOneTransaction,
// TestCandidaciesShareTransactions and TestCandidacyBehindAnotherWaits.

// maxStandsPerTxn is how many candidacies one transaction holds: a nested
// transaction each, within etcd's default 128 operations (a nested
// transaction may hold 128 less its parent's).
const maxStandsPerTxn = 64

// standTimeout bounds a candidacy transaction; a campaign whose
// transaction failed is retried (the scheduler's campaignRetry).
const standTimeout = 10 * time.Second

// Queue queues the first transactions of campaigns and commits them.
type Queue struct {
	kv    clientv3.KV
	queue *batch.Queue[*candidacy]
}

// candidacy is one campaign's first transaction, and its answer: the
// nested transaction's responses.
type candidacy struct {
	prefix, key, value string
	lease              clientv3.LeaseID
	answer             []*pb.ResponseOp
	err                error
	done               chan struct{} // closed once answered
}

// New returns a queue that commits candidacies on kv, with at most
// inFlight of them in flight at once: the candidacy transactions in flight
// together hold as many candidacies as the campaigns that may talk to etcd
// at once (the scheduler's maxCampaigning).
func New(kv clientv3.KV, inFlight int) *Queue {
	c := &Queue{kv: kv}
	c.queue = batch.New(maxStandsPerTxn, max(inFlight/maxStandsPerTxn, 1), c.commit)
	return c
}

// Run commits the queued candidacies until ctx ends.
func (c *Queue) Run(ctx context.Context) { c.queue.Run(ctx) }

// Campaign wins the election of prefix for session, or fails. It stands
// in one transaction shared with other slots (standFirst); a slot with an
// earlier candidate campaigns as concurrency.Election does, waits for the
// earlier keys to go, and confirms it still holds its key. An error may
// leave the member's key put: the caller deletes it.
func (c *Queue) Campaign(ctx context.Context, session *concurrency.Session, prefix, value string) (*concurrency.Election, error) {
	e, err := c.standFirst(ctx, session, prefix, value)
	if err != nil || e != nil {
		return e, err
	}
	e = concurrency.NewElection(session, prefix)
	if err := e.Campaign(ctx, value); err != nil {
		return nil, err
	}
	return e, confirmLeadership(ctx, session, e)
}

// confirmLeadership guards against phantom leadership: Campaign can return
// after the session's lease already expired, so check the session and that
// our key still exists with the revision we were elected at.
func confirmLeadership(ctx context.Context, session *concurrency.Session, e *concurrency.Election) error {
	select {
	case <-session.Done():
		return member.ErrSessionLost
	default:
	}
	resp, err := session.Client().Get(ctx, e.Key())
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != e.Rev() || clientv3.LeaseID(resp.Kvs[0].Lease) != session.Lease() {
		return concurrency.ErrElectionNotLeader
	}
	return nil
}

// standFirst puts session's candidacy in the election of prefix (without
// its trailing "/") with value, and returns the election won, or nil when
// the key is not the first of its election (or stands with another
// value): the caller campaigns on. An error may leave the key put; the
// caller deletes it (the scheduler's deleteCandidacy). When ctx ends first, a candidacy
// still queued is withdrawn; one already sent is waited for, so that the
// caller's delete follows its put.
func (c *Queue) standFirst(ctx context.Context, session *concurrency.Session, prefix, value string) (*concurrency.Election, error) {
	lease := session.Lease()
	q := &candidacy{prefix: prefix, key: keyspace.CandidacyIn(prefix, int64(lease)), value: value, lease: lease, done: make(chan struct{})}
	c.queue.Put(q)
	select {
	case <-q.done:
	case <-ctx.Done():
		if c.queue.Withdraw(q) {
			return nil, ctx.Err()
		}
		<-q.done // sent: its commit answers it within standTimeout
	}
	if q.err != nil {
		return nil, q.err
	}
	rev, won := firstIsOwn(q.answer, q.key, value, lease)
	if !won {
		return nil, nil
	}
	select {
	case <-session.Done():
		return nil, member.ErrSessionLost
	default:
	}
	return concurrency.ResumeElection(session, prefix+"/", q.key, rev), nil
}

// commit sends b's candidacies in one transaction, and answers each.
func (c *Queue) commit(ctx context.Context, b []*candidacy) {
	ctx, cancel := context.WithTimeout(ctx, standTimeout)
	defer cancel()
	ops := make([]clientv3.Op, len(b))
	for i, q := range b {
		ops[i] = clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(q.key), "=", 0)},
			[]clientv3.Op{clientv3.OpPut(q.key, q.value, clientv3.WithLease(q.lease)), firstCandidate(q.prefix)},
			[]clientv3.Op{firstCandidate(q.prefix)})
	}
	resp, err := c.kv.Txn(ctx).Then(ops...).Commit()
	for i, q := range b {
		if q.err = err; err == nil {
			q.answer = resp.Responses[i].GetResponseTxn().GetResponses()
		}
		close(q.done)
	}
}

// firstCandidate reads the first-created key of the election of prefix.
func firstCandidate(prefix string) clientv3.Op {
	return clientv3.OpGet(prefix+"/", append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...)
}

// firstIsOwn tells whether a candidacy's answer found key first in its
// election, under lease and with value (a key of an earlier attempt with
// another value is not: Campaign proclaims ours), and the key's create
// revision. The first-created key is the answer's last read.
func firstIsOwn(answer []*pb.ResponseOp, key, value string, lease clientv3.LeaseID) (int64, bool) {
	first := rangeOf(answer, len(answer)-1)
	if len(first) != 1 || string(first[0].Key) != key || clientv3.LeaseID(first[0].Lease) != lease || string(first[0].Value) != value {
		return 0, false
	}
	return first[0].CreateRevision, true
}

// rangeOf is the keys of the i-th response, when it is a read.
func rangeOf(rs []*pb.ResponseOp, i int) []*mvccpb.KeyValue {
	if i < 0 || i >= len(rs) || rs[i].GetResponseRange() == nil {
		return nil
	}
	return rs[i].GetResponseRange().Kvs
}
