package kira

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/jobs"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }

// A member run through the public entry point runs the catalog's Go
// handler, and Run returns nil once its context ends.
func TestRunRunsAGoHandler(t *testing.T) {
	etcd := etcdtest.Start(t)
	cat, err := config.Parse("test catalog", []byte(`cluster: root
membership:
  lease_ttl: 3s
jobs:
  - name: once
    schedule: "@every 1s"
    handler: once
`))
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{}, 1)
	once := func(ctx context.Context) error {
		select {
		case ran <- struct{}{}:
		default:
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			Etcd:     Etcd{Endpoints: etcd.Endpoints()},
			Catalog:  cat,
			Name:     "root-test",
			Handlers: jobs.Handlers{"once": once},
			Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	}()
	select {
	case <-ran:
	case err := <-done:
		t.Fatalf("Run returned before the handler ran: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the handler did not run within 30s")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of its context ending")
	}
}
