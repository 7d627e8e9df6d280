// Package permit bounds how many runs of a concurrency limit
// (config.Limit: a job's max_running, or a catalog pool) run at once across
// the cluster.
//
// It is etcd's ordered-keys semaphore, as concurrency.Mutex is for one
// holder: a fire that wants to run puts a key of its own under the pool's
// prefix, bound to its member's lease, and holds a permit once its key is
// among the first N of the prefix by create revision. Keys are only ever
// added after the existing ones, so a key among the first N stays there
// until it is deleted: at no revision do more than N keys hold permits, and
// no count has to be compared in a transaction (etcd cannot count in one).
// Waiters are served in the order their keys were created: the order they
// arrived in. A key is deleted when its run ends, or with its member's lease.
//
// A permit is only as good as its member's lease: the scheduler checks the
// lease is trusted after the permit is held and before the run starts, and
// cancels its runs when the trust window closes, before etcd can expire the
// lease and free their permits. Held by TestPermitsBoundConcurrentHolders,
// TestWaitersAreServedInArrivalOrder and TestPermitOfARevokedLeaseIsFreed.
package permit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrLost is returned by Acquire when the waiting key is gone: its lease
// expired or somebody deleted it.
var ErrLost = errors.New("permit: the waiting key is gone (its lease expired, or it was deleted)")

// recheck is how long a waiter waits for its pool's watch before it reads
// its place again anyway: a watch stream that the network broke without
// closing it misses deletes, and a fire must not wait for good on one it
// missed. A variable for TestAWaiterGetsAPermitItsWatchMissed.
var recheck = 5 * time.Second

// Pools are one member's permits: every key they put is bound to its lease.
// Fires waiting in one pool share one watch of the pool's prefix.
type Pools struct {
	cli     *clientv3.Client
	cluster string
	lease   clientv3.LeaseID
	seq     atomic.Uint64

	ctx      context.Context // ends with Close: the watches, and the deletes' retries
	cancel   context.CancelFunc
	watches  sync.WaitGroup
	releases sync.WaitGroup

	mu     sync.Mutex
	closed bool
	pools  map[string]*pool // by config.Limit.Pool, while a fire waits in it
}

// pool is one pool's watch, shared by the fires of this member waiting in it.
type pool struct {
	waiters int
	changed chan struct{} // closed (and replaced) whenever a key may have gone
	stop    context.CancelFunc
}

// New returns the permits of the member whose lease is lease.
func New(cli *clientv3.Client, cluster string, lease clientv3.LeaseID) *Pools {
	ctx, cancel := context.WithCancel(context.Background())
	return &Pools{cli: cli, cluster: cluster, lease: lease, ctx: ctx, cancel: cancel, pools: map[string]*pool{}}
}

// Permit is one run's key in a pool: held once Acquire returned it, until
// Release.
type Permit struct {
	p    *Pools
	key  string
	once sync.Once
}

// Key is the permit's etcd key.
func (pm *Permit) Key() string { return pm.key }

// Acquire puts a key for the run in l's pool (value says whose it is) and
// waits until it holds one of the pool's l.N permits, or ctx ends (its key
// is then deleted). Errors from etcd are retried until ctx ends.
func (p *Pools) Acquire(ctx context.Context, l config.Limit, value string) (*Permit, error) {
	if !l.Limited() {
		return nil, fmt.Errorf("permit: %q limits nothing", l.Pool)
	}
	pm := &Permit{p: p, key: keyspace.Permit(p.cluster, l.Pool, int64(p.lease), p.seq.Add(1))}
	changed, done := p.follow(l.Pool)
	defer done()
	ch := changed()
	rev, held, err := pm.put(ctx, l, value)
	again := time.NewTimer(recheck)
	defer again.Stop()
	for err == nil && !held {
		select {
		case <-ch:
			ch = changed()
			held, err = pm.held(ctx, l, rev)
		case <-again.C: // a delete the watch missed
			again.Reset(recheck)
			held, err = pm.held(ctx, l, rev)
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil {
		pm.Release()
		return nil, err
	}
	return pm, nil
}

// put creates the key under the lease, or finds it created by an attempt
// whose answer was lost, and returns its create revision and whether it
// holds a permit already: the pool's first keys are read in the same
// transaction (which sees its own put), so a fire that need not wait pays
// one round trip to start and one to end.
func (pm *Permit) put(ctx context.Context, l config.Limit, value string) (int64, bool, error) {
	var rev int64
	var held bool
	err := retry(ctx, func(ctx context.Context) error {
		first := pm.firstKeys(l)
		resp, err := pm.p.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(pm.key), "=", 0)).
			Then(clientv3.OpPut(pm.key, value, clientv3.WithLease(pm.p.lease)), first).
			Else(clientv3.OpGet(pm.key, clientv3.WithKeysOnly()), first).Commit()
		switch {
		case err != nil:
			return err
		case resp.Succeeded:
			rev = resp.Header.Revision
		default:
			rev = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
		}
		held = pm.among(resp.Responses[1].GetResponseRange().Kvs)
		return nil
	})
	return rev, held, err
}

// firstKeys reads the first l.N keys of the pool by create revision: the
// keys that hold its permits.
func (pm *Permit) firstKeys(l config.Limit) clientv3.Op {
	return clientv3.OpGet(keyspace.Pool(pm.p.cluster, l.Pool), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(int64(l.N)))
}

// among reports whether the permit's key is one of kvs.
func (pm *Permit) among(kvs []*mvccpb.KeyValue) bool {
	for _, kv := range kvs {
		if string(kv.Key) == pm.key {
			return true
		}
	}
	return false
}

// held reports whether the key is among the first l.N keys of its pool by
// create revision; ErrLost if the key is gone.
func (pm *Permit) held(ctx context.Context, l config.Limit, rev int64) (bool, error) {
	var held, exists bool
	err := retry(ctx, func(ctx context.Context) error {
		resp, err := pm.p.cli.Txn(ctx).Then(pm.firstKeys(l), clientv3.OpGet(pm.key, clientv3.WithCountOnly())).Commit()
		if err != nil {
			return err
		}
		held, exists = pm.among(resp.Responses[0].GetResponseRange().Kvs), resp.Responses[1].GetResponseRange().Count > 0
		return nil
	})
	switch {
	case err != nil:
		return false, err
	case !exists:
		return false, ErrLost
	}
	return held, nil
}

// Release deletes the permit's key, off the caller's goroutine, trying
// again while etcd fails and the Pools are open: a key left behind would
// hold a permit as long as the member lives. After Close the member's lease
// revoke deletes it. Safe on nil and more than once.
func (pm *Permit) Release() {
	if pm == nil {
		return
	}
	pm.once.Do(func() {
		p := pm.p
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			return
		}
		p.releases.Add(1)
		go func() {
			defer p.releases.Done()
			_ = retry(p.ctx, func(ctx context.Context) error {
				_, err := p.cli.Delete(ctx, pm.key)
				return err
			})
		}()
	})
}

// follow registers a waiter in the pool, starting the pool's watch for the
// first; changed returns the channel closed at the pool's next change, done
// unregisters the waiter.
func (p *Pools) follow(name string) (changed func() <-chan struct{}, done func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pl, ok := p.pools[name]
	if !ok {
		ctx, stop := context.WithCancel(p.ctx)
		pl = &pool{changed: make(chan struct{}), stop: stop}
		p.pools[name] = pl
		if !p.closed { // after Close, the waiter's own context ends its wait
			p.watches.Add(1)
			go p.watch(ctx, name, pl)
		}
	}
	pl.waiters++
	changed = func() <-chan struct{} {
		p.mu.Lock()
		defer p.mu.Unlock()
		return pl.changed
	}
	done = func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if pl.waiters--; pl.waiters == 0 {
			pl.stop()
			delete(p.pools, name)
		}
	}
	return changed, done
}

// watch rings the pool's waiters at each delete under its prefix, and each
// time the watch (re)starts, since deletes before it started were not seen.
func (p *Pools) watch(ctx context.Context, name string, pl *pool) {
	defer p.watches.Done()
	for ctx.Err() == nil {
		wch := p.cli.Watch(clientv3.WithRequireLeader(ctx), keyspace.Pool(p.cluster, name), clientv3.WithPrefix(),
			clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
		for range wch {
			p.ring(pl)
		}
		p.ring(pl)
		sleep(ctx, retryBackoff)
	}
}

func (p *Pools) ring(pl *pool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(pl.changed)
	pl.changed = make(chan struct{})
}

// Close waits up to bound for the deletes of released permits, then stops
// them and the watches. Waiters must have returned first.
func (p *Pools) Close(bound time.Duration) {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.releases.Wait(); close(done) }()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	p.cancel()
	<-done
	p.watches.Wait()
}

// retryBackoff is the first pause before an etcd call is tried again; it
// doubles up to maxBackoff.
const (
	retryBackoff = 50 * time.Millisecond
	maxBackoff   = time.Second
	callTimeout  = 5 * time.Second
)

// retry calls f until it succeeds or ctx ends, each call bounded by
// callTimeout.
func retry(ctx context.Context, f func(context.Context) error) error {
	for wait := retryBackoff; ; wait = min(2*wait, maxBackoff) {
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		err := f(callCtx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !sleep(ctx, wait) {
			return ctx.Err()
		}
	}
}

// sleep waits for d or ctx, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
