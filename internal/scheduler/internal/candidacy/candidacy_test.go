package candidacy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runCandidacies commits the candidacies of campaigns on cli until the
// test ends; hold, if not nil, keeps them queued until it is closed.
func runCandidacies(t *testing.T, cli *clientv3.Client, hold chan struct{}) *Queue {
	t.Helper()
	c := New(cli, 256) // the scheduler's maxCampaigning
	c.queue.Hold = hold
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		kiratest.Receive(t, done, 10*time.Second, "the candidacies to stop")
	})
	return c
}

func testSession(t *testing.T, cli *clientv3.Client) *concurrency.Session {
	t.Helper()
	session, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { session.Close() })
	return session
}

// A campaign nobody else stands in costs etcd one request, and wins the
// leadership concurrency.Election agrees with: the election's leader is
// the member's key, at the revision won, with the member's value; and it
// resigns. A key the lease left earlier with another value is not won in
// that request: the campaign proclaims its value, as Campaign does.
func TestCandidacyWonInOneTransaction(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session := testSession(t, cli)
	counted := etcdtest.CountRequests(cli)
	c := runCandidacies(t, cli, nil)
	const slots = 20
	won := make([]*concurrency.Election, slots)
	for p := range slots {
		e, err := c.Campaign(ctx, session, fmt.Sprintf("/e/%d", p), "m")
		if err != nil {
			t.Fatalf("slot %d: %v", p, err)
		}
		won[p] = e
	}
	if n := counted.Requests(); n != slots {
		t.Fatalf("%d requests for %d uncontested campaigns; want one each", n, slots)
	}
	for p, e := range won {
		leader, err := concurrency.NewElection(session, fmt.Sprintf("/e/%d", p)).Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if kv := leader.Kvs[0]; string(kv.Key) != e.Key() || kv.CreateRevision != e.Rev() || string(kv.Value) != "m" {
			t.Fatalf("slot %d: won as %s at %d; the election's leader is %s at %d (%q)", p, e.Key(), e.Rev(), kv.Key, kv.CreateRevision, kv.Value)
		}
	}
	resigned := won[0].Key()
	if err := won[0].Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if resp, err := cli.Get(ctx, resigned); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("after resigning, the key is %v (err %v); want gone", resp, err)
	}

	stale := keyspace.CandidacyIn("/e/stale", int64(session.Lease()))
	put, err := cli.Put(ctx, stale, "old", clientv3.WithLease(session.Lease()))
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.Campaign(ctx, session, "/e/stale", "m")
	if err != nil {
		t.Fatal(err)
	}
	got, err := cli.Get(ctx, stale)
	if err != nil {
		t.Fatal(err)
	}
	if e.Rev() != put.Header.Revision || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "m" {
		t.Fatalf("over a key of the lease's with another value: won at %d with %v; want %d with value m", e.Rev(), got.Kvs, put.Header.Revision)
	}
}

// A campaign behind another member's earlier key waits, and wins once that
// key is gone, under the create revision of the key its transaction put.
// A campaign under an ended lease wins nothing and puts nothing.
func TestCandidacyBehindAnotherWaits(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, second := testSession(t, cli), testSession(t, cli)
	c := runCandidacies(t, cli, nil)

	held, err := c.Campaign(ctx, first, "/e/x", "a")
	if err != nil {
		t.Fatal(err)
	}
	campaigned := make(chan *concurrency.Election, 1)
	go func() {
		e, err := c.Campaign(ctx, second, "/e/x", "b")
		if err != nil {
			t.Errorf("the campaign behind: %v", err)
		}
		campaigned <- e
	}()
	key := keyspace.CandidacyIn("/e/x", int64(second.Lease()))
	var put *clientv3.GetResponse
	kiratest.WaitUntil(t, "the second candidacy's key to be put", 10*time.Second, func() bool {
		put, err = cli.Get(ctx, key)
		return err == nil && len(put.Kvs) == 1
	})
	select {
	case <-campaigned:
		t.Fatal("a campaign behind another's key won while that key stood")
	case <-time.After(300 * time.Millisecond):
	}
	if err := held.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	e := kiratest.Receive(t, campaigned, 10*time.Second, "the campaign behind to win")
	if e == nil || e.Key() != key || e.Rev() != put.Kvs[0].CreateRevision {
		t.Fatalf("the campaign behind won %v; want %s at %d", e, key, put.Kvs[0].CreateRevision)
	}

	ended := testSession(t, cli)
	if _, err := cli.Revoke(ctx, ended.Lease()); err != nil {
		t.Fatal(err)
	}
	if e, err := c.Campaign(ctx, ended, "/e/y", "c"); err == nil {
		t.Fatalf("a campaign under an ended lease won at %d", e.Rev())
	}
	if resp, err := cli.Get(ctx, "/e/y/", clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("an ended lease's campaign left %v (err %v); want no key", resp, err)
	}
}

// The first transactions of 200 campaigns queued together go in four
// transactions (64, 64, 64 and 8 candidacies). Each slot nobody else stands
// in is won at its transaction's revision, with the election's leader the
// member's key; a slot another member's key leads is not won in it, and
// its campaign waits behind that key; a campaign abandoned while its
// candidacy was queued puts no key.
func TestCandidaciesShareTransactions(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session, other := testSession(t, cli), testSession(t, cli)
	held, err := runCandidacies(t, cli, nil).Campaign(ctx, other, "/e/held", "other")
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	c := runCandidacies(t, cli, hold)
	const slots = 200
	type result struct {
		p   int
		e   *concurrency.Election
		err error
	}
	results := make(chan result, slots)
	for p := range slots {
		prefix := fmt.Sprintf("/e/%d", p)
		if p == 150 {
			prefix = "/e/held"
		}
		go func() {
			e, err := c.Campaign(ctx, session, prefix, "m")
			results <- result{p, e, err}
		}()
	}
	abandoned, abandon := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	kiratest.WaitUntil(t, "every candidacy queued", 10*time.Second, func() bool { return c.queue.Queued() == slots })
	go func() {
		_, err := c.Campaign(abandoned, session, "/e/abandoned", "m")
		gaveUp <- err
	}()
	kiratest.WaitUntil(t, "the last candidacy queued", 10*time.Second, func() bool { return c.queue.Queued() == slots+1 })
	abandon()
	if err := kiratest.Receive(t, gaveUp, 10*time.Second, "the abandoned campaign to return"); err == nil {
		t.Fatal("a campaign abandoned while queued won")
	}
	close(hold)

	byRev := map[int64]int{}
	for range slots - 1 {
		r := kiratest.Receive(t, results, 20*time.Second, "a campaign to win")
		if r.err != nil {
			t.Fatalf("slot %d: %v", r.p, r.err)
		}
		leader, err := concurrency.NewElection(session, fmt.Sprintf("/e/%d", r.p)).Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if kv := leader.Kvs[0]; string(kv.Key) != r.e.Key() || kv.CreateRevision != r.e.Rev() {
			t.Fatalf("slot %d: won as %s at %d; the election's leader is %s at %d", r.p, r.e.Key(), r.e.Rev(), kv.Key, kv.CreateRevision)
		}
		byRev[r.e.Rev()]++
	}
	if n := c.queue.Batches(); n != 4 || len(byRev) != 4 {
		t.Fatalf("%d transactions, slots won at %d revisions (%v); want 4 of each", n, len(byRev), byRev)
	}
	select {
	case r := <-results:
		t.Fatalf("slot %d won (err %v) while another member's key led its election", r.p, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := held.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if r := kiratest.Receive(t, results, 10*time.Second, "the campaign behind to win"); r.p != 150 || r.err != nil {
		t.Fatalf("slot %d won with %v; want the held slot, won", r.p, r.err)
	}
	if resp, err := cli.Get(ctx, "/e/abandoned/", clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the abandoned campaign left %v (err %v); want no key", resp, err)
	}
}
