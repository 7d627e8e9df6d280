package permit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }

// pools returns n members' permits, each on a lease of its own, kept alive
// until the test ends unless keepAlive is false.
func pools(t *testing.T, cli *clientv3.Client, n int, ttl int64, keepAlive bool) ([]*Pools, []clientv3.LeaseID) {
	t.Helper()
	var out []*Pools
	var leases []clientv3.LeaseID
	for range n {
		g, err := cli.Grant(context.Background(), ttl)
		if err != nil {
			t.Fatal(err)
		}
		if keepAlive {
			ctx, cancel := context.WithCancel(context.Background())
			if _, err := cli.KeepAlive(ctx, g.ID); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cancel)
		}
		p := New(cli, "t", g.ID)
		t.Cleanup(func() { p.Close(time.Second) })
		out, leases = append(out, p), append(leases, g.ID)
	}
	return out, leases
}

func keys(t *testing.T, cli *clientv3.Client, pool string) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), keyspace.Pool("t", pool), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// Fires of three members ask a pool of 2 at once: never more than 2 hold a
// permit, every one gets its turn, and every key is deleted after.
func TestPermitsBoundConcurrentHolders(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ps, _ := pools(t, cli, 3, 10, true)
	l := config.Limit{Pool: "pool/p", N: 2}
	var holding, most, done atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 18)
	for i := range 18 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pm, err := ps[i%3].Acquire(context.Background(), l, fmt.Sprint(i))
			if err != nil {
				errs <- err
				return
			}
			n := holding.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(30 * time.Millisecond)
			holding.Add(-1)
			pm.Release()
			done.Add(1)
		}()
	}
	kiratest.WaitUntil(t, "every fire to hold its permit once", 30*time.Second, func() bool { return done.Load()+int32(len(errs)) == 18 })
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if m := most.Load(); m != 2 {
		t.Fatalf("at most %d held at once; want 2 (the limit, reached)", m)
	}
	kiratest.WaitUntil(t, "the released keys to be deleted", 10*time.Second, func() bool { return keys(t, cli, "pool/p") == 0 })
}

// Waiters hold their permits in the order they asked, across members; a
// waiter that gives up leaves no key behind.
func TestWaitersAreServedInArrivalOrder(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ps, _ := pools(t, cli, 2, 10, true)
	l := config.Limit{Pool: "job/j", N: 1}
	first, err := ps[0].Acquire(context.Background(), l, "first")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 3)
	var wg sync.WaitGroup
	ask := func(p *Pools, name string, ctx context.Context) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pm, err := p.Acquire(ctx, l, name)
			if err != nil {
				got <- name + ": " + err.Error()
				return
			}
			got <- name
			time.Sleep(20 * time.Millisecond)
			pm.Release()
		}()
	}
	defer wg.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i, name := range []string{"second", "gives-up", "third"} {
		c := context.Background()
		if name == "gives-up" {
			c = ctx
		}
		ask(ps[(i+1)%2], name, c)
		kiratest.WaitUntil(t, name+"'s key", 10*time.Second, func() bool { return keys(t, cli, "job/j") == int64(i+2) })
	}
	cancel()
	kiratest.WaitUntil(t, "the key of the waiter that gave up to go", 10*time.Second, func() bool { return keys(t, cli, "job/j") == 3 })
	if g := kiratest.Receive(t, got, 10*time.Second, "the waiter that gave up"); g != "gives-up: "+context.Canceled.Error() {
		t.Fatalf("got %q", g)
	}
	first.Release()
	for _, want := range []string{"second", "third"} {
		if g := kiratest.Receive(t, got, 10*time.Second, want); g != want {
			t.Fatalf("got %q, want %q", g, want)
		}
	}
}

// A permit whose member's lease is revoked, or expires, is freed for the
// next waiter; a waiter whose own lease goes gets ErrLost.
func TestPermitOfARevokedLeaseIsFreed(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ps, leases := pools(t, cli, 2, 10, true)
	expiring, _ := pools(t, cli, 1, 2, false)
	l := config.Limit{Pool: "pool/w", N: 1}
	if _, err := ps[0].Acquire(context.Background(), l, "revoked"); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		pm, err := ps[1].Acquire(context.Background(), l, "next")
		pm.Release()
		got <- err
	}()
	kiratest.WaitUntil(t, "the waiter's key", 10*time.Second, func() bool { return keys(t, cli, "pool/w") == 2 })
	if _, err := cli.Revoke(context.Background(), leases[0]); err != nil {
		t.Fatal(err)
	}
	if err := kiratest.Receive(t, got, 10*time.Second, "the permit freed by the revoke"); err != nil {
		t.Fatal(err)
	}

	// Expiry: the holder's lease is not kept alive.
	if _, err := expiring[0].Acquire(context.Background(), l, "expires"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	go func() {
		pm, err := ps[1].Acquire(context.Background(), l, "after expiry")
		pm.Release()
		got <- err
	}()
	if err := kiratest.Receive(t, got, 15*time.Second, "the permit freed by the expiry"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("freed after %s, before the 2s lease could expire", took)
	}

	// A waiter whose own lease is revoked.
	if _, err := ps[1].Acquire(context.Background(), l, "holder"); err != nil {
		t.Fatal(err)
	}
	lost, lostLease := pools(t, cli, 1, 10, true)
	go func() {
		_, err := lost[0].Acquire(context.Background(), l, "lost")
		got <- err
	}()
	kiratest.WaitUntil(t, "the doomed waiter's key", 10*time.Second, func() bool { return keys(t, cli, "pool/w") == 2 })
	if _, err := cli.Revoke(context.Background(), lostLease[0]); err != nil {
		t.Fatal(err)
	}
	if err := kiratest.Receive(t, got, 10*time.Second, "the waiter to see its key gone"); !errors.Is(err, ErrLost) {
		t.Fatalf("got %v, want ErrLost", err)
	}
}

// A waiter whose pool's watch has stopped (as a stream the network broke
// without closing it) still gets the permit once the holder's key is gone:
// it reads its place again every recheck.
func TestAWaiterGetsAPermitItsWatchMissed(t *testing.T) {
	defer func(d time.Duration) { recheck = d }(recheck)
	recheck = 200 * time.Millisecond
	cli := etcdtest.Start(t).Client(t)
	ps, _ := pools(t, cli, 2, 10, true)
	l := config.Limit{Pool: "missed", N: 1}
	first, err := ps[0].Acquire(context.Background(), l, "first")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		pm, err := ps[1].Acquire(context.Background(), l, "second")
		if err == nil {
			pm.Release()
		}
		got <- err
	}()
	kiratest.WaitUntil(t, "the second waits in the pool", 5*time.Second, func() bool { return keys(t, cli, "missed") == 2 })
	ps[1].mu.Lock()
	ps[1].pools["missed"].stop() // its watch ends: no delete will ring it
	ps[1].mu.Unlock()
	if _, err := cli.Delete(context.Background(), first.Key()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter never read its place again after its watch stopped")
	}
	first.Release()
}
