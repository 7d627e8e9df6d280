package scheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/etcdtest"
	"github.com/kira-scheduler/kira/kiratest"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// The first attempts of 100 campaigns queued together go in three
// transactions (42, 42 and 16 slots). Each wins its own election at its
// key's create revision, a leadership concurrency.Election agrees with:
// the election's leader is the member's key, and it resigns.
func TestCandidaciesShareTransactions(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	c := newCandidacies(cli)
	const slots = 100
	won := make([]*concurrency.Election, slots)
	errs := make([]error, slots)
	var wg sync.WaitGroup
	wg.Add(slots)
	for p := range slots {
		go func() {
			defer wg.Done()
			won[p], errs[p] = c.stand(ctx, session, fmt.Sprintf("/e/%d", p), "m")
		}()
	}
	kiratest.WaitUntil(t, "every candidacy queued", 10*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queue) == slots
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { c.run(runCtx); close(done) }()
	wg.Wait()
	stop()
	kiratest.Receive(t, done, 10*time.Second, "the candidacies to stop")
	if c.txns != 3 {
		t.Fatalf("%d transactions for 100 candidacies queued together; want 3", c.txns)
	}
	for p := range slots {
		if errs[p] != nil || won[p] == nil {
			t.Fatalf("slot %d: won %v, err %v; want won", p, won[p], errs[p])
		}
		e := won[p]
		leader, err := concurrency.NewElection(session, fmt.Sprintf("/e/%d", p)).Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if kv := leader.Kvs[0]; string(kv.Key) != e.Key() || kv.CreateRevision != e.Rev() || string(kv.Value) != "m" {
			t.Fatalf("slot %d: won as %s at %d; the election's leader is %s at %d", p, e.Key(), e.Rev(), kv.Key, kv.CreateRevision)
		}
	}
	key := won[0].Key()
	if err := won[0].Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if resp, err := cli.Get(ctx, key); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("after resigning, the key is %v (err %v); want gone", resp, err)
	}
}

// A candidacy behind another member's earlier key is not won: the
// campaign goes on alone and wins once that key is gone, under the
// create revision of the key the shared transaction put. A candidacy whose
// key already stands first (an earlier attempt of the same lease) wins at
// that key's revision, as concurrency.Election does.
func TestCandidacyBehindAnotherWaits(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	runCtx, stop := context.WithCancel(ctx)
	c := newCandidacies(cli)
	done := make(chan struct{})
	go func() { c.run(runCtx); close(done) }()
	defer func() { stop(); kiratest.Receive(t, done, 10*time.Second, "the candidacies to stop") }()

	held, err := c.stand(ctx, first, "/e/x", "a")
	if err != nil || held == nil {
		t.Fatalf("the first candidacy: %v, %v; want won", held, err)
	}
	behind, err := c.stand(ctx, second, "/e/x", "b")
	if err != nil || behind != nil {
		t.Fatalf("a candidacy behind another: %v, %v; want not won", behind, err)
	}
	put, err := cli.Get(ctx, candidacyKey("/e/x", second.Lease()))
	if err != nil || len(put.Kvs) != 1 {
		t.Fatalf("the second candidacy's key: %v, %v; want put", put, err)
	}
	again, err := c.stand(ctx, first, "/e/x", "a")
	if err != nil || again == nil || again.Rev() != held.Rev() {
		t.Fatalf("the first lease standing again: %v, %v; want won at %d", again, err, held.Rev())
	}
	e := concurrency.NewElection(second, "/e/x")
	campaigned := make(chan error, 1)
	go func() { campaigned <- e.Campaign(ctx, "b") }()
	if err := held.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kiratest.Receive(t, campaigned, 10*time.Second, "the campaign behind to win"); err != nil {
		t.Fatal(err)
	}
	if e.Rev() != put.Kvs[0].CreateRevision {
		t.Fatalf("the campaign won at %d; want the shared transaction's put, %d", e.Rev(), put.Kvs[0].CreateRevision)
	}
}
