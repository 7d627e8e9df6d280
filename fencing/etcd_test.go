package fencing

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }

// campaign wins the election at prefix for a new session and returns its claim.
func campaign(t *testing.T, cli *clientv3.Client, prefix string) (*concurrency.Session, Claim) {
	t.Helper()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e := concurrency.NewElection(s, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Campaign(ctx, "member"); err != nil {
		t.Fatal(err)
	}
	return s, Claim{LeaderKey: e.Key(), Token: Token(e.Rev())}
}

func TestEtcdGuardRejectsPausedExLeader(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	sessA, claimA := campaign(t, cli, "/kira/t/election/job/0")
	guardA, err := NewEtcdGuard(cli, claimA)
	if err != nil {
		t.Fatal(err)
	}
	// A fresh key: the leader's first write is accepted.
	if err := guardA.Put(ctx, "/data/balance", "100"); err != nil {
		t.Fatalf("leader's first write: %v", err)
	}
	// A pauses; its lease ends (revoked here, as expiry would), B takes over.
	if _, err := cli.Revoke(ctx, sessA.Lease()); err != nil {
		t.Fatal(err)
	}
	_, claimB := campaign(t, cli, "/kira/t/election/job/0")
	if claimB.Token <= claimA.Token {
		t.Fatalf("token did not rise: %d then %d", claimA.Token, claimB.Token)
	}
	guardB, _ := NewEtcdGuard(cli, claimB)
	if err := guardB.Put(ctx, "/data/balance", "90"); err != nil {
		t.Fatalf("new leader's write: %v", err)
	}
	// A wakes up and writes with its old claim.
	if err := guardA.Put(ctx, "/data/balance", "100"); !errors.Is(err, ErrFenced) {
		t.Fatalf("ex-leader's late write: %v; want ErrFenced", err)
	}
	if err := guardA.Delete(ctx, "/data/balance"); !errors.Is(err, ErrFenced) {
		t.Fatalf("ex-leader's late delete: %v; want ErrFenced", err)
	}
	resp, _ := cli.Get(ctx, "/data/balance")
	if string(resp.Kvs[0].Value) != "90" {
		t.Fatalf("balance = %s; the stale write got through", resp.Kvs[0].Value)
	}
}

func TestEtcdGuardNeedsAClaim(t *testing.T) {
	if _, err := NewEtcdGuard(nil, Claim{Token: 3}); !errors.Is(err, ErrNoLeaderKey) {
		t.Fatalf("guard without leader key: %v", err)
	}
	if _, err := EtcdGuardFromContext(context.Background(), nil); !errors.Is(err, ErrNoLeaderKey) {
		t.Fatalf("guard from empty context: %v", err)
	}
	ctx := WithClaim(context.Background(), Claim{LeaderKey: "/k", Token: 9})
	if g, err := EtcdGuardFromContext(ctx, nil); err != nil || g.claim.Token != 9 {
		t.Fatalf("guard from context: %v", err)
	}
}
