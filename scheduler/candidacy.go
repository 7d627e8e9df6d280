package scheduler

import (
	"context"

	"github.com/kira-scheduler/kira/keyspace"
	"github.com/kira-scheduler/kira/membership"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// How a slot's election is won in one request. concurrency.Election's
// Campaign costs etcd three requests when nobody else stands: its
// transaction, a read for earlier candidates, and our read confirming the
// key (confirmLeadership); a member taking 100,000 slots sends 300,000.
// standFirst sends one transaction, of the slot's own: the election's own
// create-if-absent of the member's key under its lease, and a read of the
// election's first-created key. When that key is the member's, under its
// lease and with its value, the slot is won at the key's create revision:
// etcd shows in one revision that no earlier candidate stands and that the
// key stands under a live lease (a put under an ended lease is refused,
// and an ended lease's keys are deleted), which is what Campaign's wait and
// confirmLeadership establish between them. Any other answer leaves the
// key in place and the campaign goes on as concurrency.Election does.
// Held by TestCandidacyWonInOneTransaction and
// TestCandidacyBehindAnotherWaits.

// standFirst puts session's candidacy in the election of prefix (without
// its trailing "/") with value, and returns the election won, or nil when
// the key is not the first of its election (or stands with another
// value): the caller campaigns on. An error may leave the key put; the
// caller deletes it (deleteCandidacy).
func standFirst(ctx context.Context, session *concurrency.Session, prefix, value string) (*concurrency.Election, error) {
	lease := session.Lease()
	key := keyspace.CandidacyIn(prefix, int64(lease))
	resp, err := session.Client().Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value, clientv3.WithLease(lease)), firstCandidate(prefix)).
		Else(firstCandidate(prefix)).
		Commit()
	if err != nil {
		return nil, err
	}
	rev, won := firstIsOwn(resp, key, value, lease)
	if !won {
		return nil, nil
	}
	select {
	case <-session.Done():
		return nil, membership.ErrSessionLost
	default:
	}
	return concurrency.ResumeElection(session, prefix+"/", key, rev), nil
}

// firstCandidate reads the first-created key of the election of prefix.
func firstCandidate(prefix string) clientv3.Op {
	return clientv3.OpGet(prefix+"/", append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...)
}

// firstIsOwn tells whether standFirst's transaction found key first in its
// election, under lease and with value (a key of an earlier attempt with
// another value is not: Campaign proclaims ours), and the key's create
// revision. The first-created key is the transaction's last read.
func firstIsOwn(resp *clientv3.TxnResponse, key, value string, lease clientv3.LeaseID) (int64, bool) {
	first := rangeOf(resp.Responses, len(resp.Responses)-1)
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
