package etcdtest

import (
	"context"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// CountingKV counts the reads (Get) and transactions (Txn) sent through a
// client's KV, as etcd's namespace package wraps one.
type CountingKV struct {
	clientv3.KV
	Gets, Txns atomic.Int64
}

// CountRequests puts a CountingKV in front of cli's KV and returns it.
func CountRequests(cli *clientv3.Client) *CountingKV {
	c := &CountingKV{KV: cli.KV}
	cli.KV = c
	return c
}

func (c *CountingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	c.Gets.Add(1)
	return c.KV.Get(ctx, key, opts...)
}

func (c *CountingKV) Txn(ctx context.Context) clientv3.Txn {
	c.Txns.Add(1)
	return c.KV.Txn(ctx)
}

// Requests is the reads and transactions counted.
func (c *CountingKV) Requests() int64 { return c.Gets.Load() + c.Txns.Load() }
