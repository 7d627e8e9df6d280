package scheduler

import (
	"context"
	"errors"
	"testing"

	"github.com/kira-scheduler/kira/etcdtest"
	"github.com/kira-scheduler/kira/fencing"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// One batch may hold two writes of one key (etcd refuses that in one
// transaction) and writes whose claim no longer holds: every write still
// gets the right answer, and the others are committed.
func TestWriterBatchesRepeatedKeysAndLostClaims(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	held, err := cli.Put(ctx, "/leader/held", "me")
	if err != nil {
		t.Fatal(err)
	}
	good := fencing.Claim{LeaderKey: "/leader/held", Token: fencing.Token(held.Header.Revision)}
	lost := fencing.Claim{LeaderKey: "/leader/gone", Token: good.Token} // no such key: fenced
	w := newStateWriter(cli)
	put := func(c fencing.Claim, k, v string) fencedWrite {
		return fencedWrite{claim: c, ops: []clientv3.Op{clientv3.OpPut(k, v)}, done: make(chan error, 1)}
	}
	writes := []fencedWrite{
		put(good, "/s/a", "1"),
		put(lost, "/s/b", "1"),
		put(good, "/s/c", "1"),
		put(good, "/s/a", "2"), // the same key again: ends the batch
	}
	for _, fw := range writes {
		w.queue <- fw
	}
	first := <-w.queue
	w.commit(ctx, w.batch(first))
	for i, want := range []error{nil, fencing.ErrFenced, nil, nil} {
		if err := <-writes[i].done; !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Fatalf("write %d: %v; want %v", i, err, want)
		}
	}
	for k, want := range map[string]string{"/s/a": "2", "/s/c": "1"} {
		resp, _ := cli.Get(ctx, k)
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want {
			t.Fatalf("%s = %v; want %s", k, resp.Kvs, want)
		}
	}
	if resp, _ := cli.Get(ctx, "/s/b"); len(resp.Kvs) != 0 {
		t.Fatal("a write under a lost claim was committed")
	}
}
