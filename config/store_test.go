package config

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/etcdtest"
	"github.com/kira-scheduler/kira/keyspace"
	"github.com/kira-scheduler/kira/kiratest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }

// A stored catalog this version cannot read (a field it does not know, as a
// newer version would store; JSON written by hand) is refused loudly, at
// start and when it arrives through the watch, and the one running stays.
func TestUnreadableStoredCatalogIsRefused(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	cat, err := Parse("c.yaml", []byte("cluster: c\njobs:\n  - {name: a, schedule: \"@every 1s\", command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	rev, _, err := Store(ctx, cli, cat)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var applied, refused []int64
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchStored(wctx, cli, "c", rev, func(_ *Catalog, r int64) { mu.Lock(); applied = append(applied, r); mu.Unlock() },
			func(r int64, err error) {
				if errors.Is(err, ErrUnreadableCatalog) {
					mu.Lock()
					refused = append(refused, r)
					mu.Unlock()
				}
			})
	}()
	defer func() { cancel(); kiratest.Receive(t, done, 10*time.Second, "WatchStored to return") }()
	for _, junk := range []string{
		`{"cluster":"c","jobs":[{"name":"a","schedule":"@every 1s","partitions":1,"quota":{"cpu":"2"}}]}`,
		`{not json`,
		`{"cluster":"c"}`,
	} {
		if _, err := cli.Put(ctx, keyspace.Catalog("c"), junk); err != nil {
			t.Fatal(err)
		}
	}
	kiratest.WaitUntil(t, "three versions refused", 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(refused) == 3 })
	mu.Lock()
	if len(applied) != 0 {
		t.Errorf("applied %v; want none", applied)
	}
	mu.Unlock()
	if _, _, err := LoadStored(ctx, cli, "c"); !errors.Is(err, ErrUnreadableCatalog) || !strings.Contains(err.Error(), "no cluster or no jobs") {
		t.Fatalf("LoadStored of junk: %v", err)
	}
	cli.Put(ctx, keyspace.Catalog("c"), `{"cluster":"c","jobs":[{"name":"a","quota":{}}]}`)
	if _, _, err := LoadStored(ctx, cli, "c"); err == nil || !strings.Contains(err.Error(), "does not know (stored by a newer version?)") {
		t.Fatalf("LoadStored of a newer version's catalog: %v", err)
	}
}
