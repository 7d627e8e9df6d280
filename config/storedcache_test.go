package config

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// countingKV counts the reads that return values (the whole catalog's),
// against a real etcd.
type countingKV struct {
	clientv3.KV
	withValues atomic.Int64
}

func (k *countingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if clientv3.OpGet(key, opts...).IsKeysOnly() {
		return k.KV.Get(ctx, key, opts...)
	}
	k.withValues.Add(1)
	return k.KV.Get(ctx, key, opts...)
}

// While the catalog is unchanged a read through the cache costs etcd only
// the head's revision; a change is read whole, and then cached in turn.
func TestStoredCacheReadsTheCatalogOncePerRevision(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	store := func(schedule string) {
		t.Helper()
		cat, err := Parse("c.yaml", []byte("cluster: c\njobs:\n  - {name: a, schedule: \""+schedule+"\", command: [\"true\"]}\n  - {name: b, schedule: \"@hourly\", command: [\"true\"]}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Apply(ctx, cli, cat, Source{By: ByApply}, false, false); err != nil {
			t.Fatal(err)
		}
	}
	store("@every 1m")
	kv := &countingKV{KV: cli}
	var cache StoredCache
	first, err := cache.Read(ctx, kv, "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	whole := kv.withValues.Load()
	for range 5 {
		again, err := cache.Read(ctx, kv, "c", 0)
		if err != nil || again != first {
			t.Fatalf("an unchanged catalog read again: %v, the same %v", err, again == first)
		}
	}
	if n := kv.withValues.Load(); n != whole {
		t.Fatalf("five reads of an unchanged catalog read values %d times; want none", n-whole)
	}
	store("@every 2m")
	changed, err := cache.Read(ctx, kv, "c", 0)
	if err != nil || changed.Revision <= first.Revision {
		t.Fatalf("after a change: %v, revision %d (before %d)", err, changed.Revision, first.Revision)
	}
	if j, _ := changed.Catalog.Job("a"); j.Schedule != "@every 2m" {
		t.Fatalf("after a change the cache answers job a's schedule %q", j.Schedule)
	}
	old, err := cache.Read(ctx, kv, "c", first.Revision)
	if err != nil || old.Revision != first.Revision {
		t.Fatalf("the catalog at the first revision: %v, revision %d", err, old.Revision)
	}
}
