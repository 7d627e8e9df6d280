package etcdtest

import (
	"context"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// CountingKV counts the reads (Get) and transactions (Txn) sent through a
// client's KV, as etcd's namespace package wraps one, and can fail the next
// reads as an etcd that does not answer in time would.
type CountingKV struct {
	clientv3.KV
	Gets, Txns atomic.Int64
	// FailGets is how many of the next reads fail with etcd's request
	// timeout, without reaching etcd.
	FailGets atomic.Int64
}

// CountRequests puts a CountingKV in front of cli's KV and returns it.
func CountRequests(cli *clientv3.Client) *CountingKV {
	c := &CountingKV{KV: cli.KV}
	cli.KV = c
	return c
}

func (c *CountingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	c.Gets.Add(1)
	if c.FailGets.Add(-1) >= 0 {
		return nil, rpctypes.ErrTimeout
	}
	c.FailGets.Store(0)
	return c.KV.Get(ctx, key, opts...)
}

func (c *CountingKV) Txn(ctx context.Context) clientv3.Txn {
	c.Txns.Add(1)
	return c.KV.Txn(ctx)
}

// Requests is the reads and transactions counted.
func (c *CountingKV) Requests() int64 { return c.Gets.Load() + c.Txns.Load() }
