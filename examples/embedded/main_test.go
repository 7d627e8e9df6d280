package main

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/jobs"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }

// The embedded member runs every partition of the service's job, and stops
// when its context ends.
func TestEmbeddedMemberRunsTheServicesJob(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]bool{}
	all := make(chan struct{})
	work := func(ctx context.Context) error {
		e, _ := jobs.FromContext(ctx)
		mu.Lock()
		defer mu.Unlock()
		seen[e.Partition] = true
		if len(seen) == e.Partitions && e.Token.Valid() {
			select {
			case <-all:
			default:
				close(all)
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), work) }()
	select {
	case <-all:
	case err := <-done:
		t.Fatalf("run returned early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("not every partition ran within 30s: %v", seen)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return within 30s of its context ending")
	}
}
