package httpfence

import (
	"context"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// A store whose session lease was lost (revoked here; expired after a long
// partition) starts a new session at its next hold instead of failing every
// request from then on.
func TestEtcdStoreOutlivesItsSession(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	s := NewEtcdStore(cli, "/svc/fences/", concurrency.WithTTL(5))
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	hold := func(token int64) {
		t.Helper()
		_, ok, release, err := s.Hold(ctx, "billing/3", fencing.Token(token))
		if err != nil || !ok {
			t.Fatalf("hold %d: admitted %v, %v", token, ok, err)
		}
		release()
	}
	hold(17)
	first, err := s.liveSession()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, first.Lease()); err != nil {
		t.Fatal(err)
	}
	kiratest.WaitUntil(t, "the session to end", 10*time.Second, func() bool {
		select {
		case <-first.Done():
			return true
		default:
			return false
		}
	})
	hold(42)
	if second, _ := s.liveSession(); second == first {
		t.Fatal("the store kept its dead session")
	}
	if highest, ok, err := s.Admit(ctx, "billing/3", 17); ok || err != nil || highest != 42 {
		t.Fatalf("stale token after the new session: highest %d, admitted %v, %v", highest, ok, err)
	}
}
