package fenced

import (
	"context"
	"errors"
	"testing"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A guarded write in a batch applies its operations only while its guard
// holds, and says which: the batch's other writes commit either way.
func TestWriterGuardedWriteAppliesOnlyIfItsGuardHolds(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	a := heldClaim(t, cli, "/leader/a")
	b := heldClaim(t, cli, "/leader/b")
	c := heldClaim(t, cli, "/leader/c")
	trig, err := cli.Put(ctx, "/trigger/kept", "x")
	if err != nil {
		t.Fatal(err)
	}
	kept := clientv3.Compare(clientv3.CreateRevision("/trigger/kept"), "=", trig.Header.Revision)
	gone := clientv3.Compare(clientv3.CreateRevision("/trigger/cancelled"), "=", trig.Header.Revision)
	w := NewWriter(cli)
	writes := []Write{
		{Claim: a, Ops: []clientv3.Op{clientv3.OpPut("/s/a", "1"), clientv3.OpDelete("/trigger/kept")}, Guard: &kept, Done: make(chan error, 1)},
		{Claim: b, Ops: []clientv3.Op{clientv3.OpPut("/s/b", "1")}, Guard: &gone, Done: make(chan error, 1)},
		{Claim: c, Ops: []clientv3.Op{clientv3.OpPut("/s/c", "1")}, Done: make(chan error, 1)},
	}
	for _, fw := range writes {
		w.Enqueue(fw)
	}
	batch, keys := w.next()
	if len(batch) != 3 {
		t.Fatalf("batch has %d writes; want 3", len(batch))
	}
	w.commit(ctx, batch, nil)
	w.land(nil, keys)
	for i, want := range []error{nil, ErrGuard, nil} {
		select {
		case err := <-writes[i].Done: // answered by commit, before it returned
			if !errors.Is(err, want) && err != want {
				t.Errorf("write %d answered %v; want %v", i, err, want)
			}
		default:
			t.Errorf("write %d has no answer", i)
		}
	}
	for key, want := range map[string]int64{"/s/a": 1, "/trigger/kept": 0, "/s/b": 0, "/s/c": 1} {
		resp, err := cli.Get(ctx, key, clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count != want {
			t.Errorf("%s: %d keys; want %d", key, resp.Count, want)
		}
	}
}
