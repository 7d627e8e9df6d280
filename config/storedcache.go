package config

import (
	"context"
	"fmt"
	"sync"

	"github.com/kira-scheduler/kira/internal/keyspace"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// StoredCache keeps the last stored catalog read through it, by the
// catalog head's revision: while the catalog is unchanged a read costs
// etcd one key without its value, not the whole catalog (up to
// MaxStoredCatalogBytes). A catalog in the single key of the previous
// layout, or one this version cannot read, is read whole each time, as is
// every read through a nil StoredCache. Safe for concurrent use; the Stored
// it returns is shared and must not be changed. Held by TestStoredCacheReadsTheCatalogOncePerRevision.
type StoredCache struct {
	mu   sync.Mutex
	last *Stored
}

// Read is Read(ctx, kv, cluster, rev), from the cache when the catalog
// head at rev (0: the latest) is the one last read.
func (c *StoredCache) Read(ctx context.Context, kv clientv3.KV, cluster string, rev int64) (*Stored, error) {
	if c == nil {
		return Read(ctx, kv, cluster, rev)
	}
	opts := []clientv3.OpOption{clientv3.WithKeysOnly()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := kv.Get(ctx, keyspace.CatalogHead(cluster), opts...)
	if err != nil {
		return nil, fmt.Errorf("config: load catalog: %w", err)
	}
	if rev == 0 {
		rev = resp.Header.Revision
	}
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	if len(resp.Kvs) == 1 && last != nil && last.Revision == resp.Kvs[0].ModRevision {
		return last, nil
	}
	s, err := Read(ctx, kv, cluster, rev)
	if err == nil && s.head && s.Catalog != nil {
		c.mu.Lock()
		c.last = s
		c.mu.Unlock()
	}
	return s, err
}
