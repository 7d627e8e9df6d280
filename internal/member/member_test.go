package member

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }

func join(t *testing.T, cli *clientv3.Client, id string, now func() time.Time) *Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := Join(ctx, cli, Config{Cluster: "t", TTL: 2 * time.Second, Record: Record{ID: id, Name: id}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Leave(context.Background()) })
	return m
}

// waitView waits until the latest view satisfies ok.
func waitView(t *testing.T, v *Views, ok func(View) bool) View {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		if view := v.Latest(); ok(view) {
			return view
		}
		select {
		case <-v.Changed():
		case <-deadline:
			t.Fatalf("view never satisfied the condition; latest %+v", v.Latest())
		}
	}
}

func runViews(t *testing.T, cli *clientv3.Client) *Views {
	t.Helper()
	v := NewViews(cli, "t")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); v.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return v
}

func TestIDsAreUniquePerProcessStart(t *testing.T) {
	a, b := NewID(), NewID()
	if a == b || !strings.Contains(a, "-") {
		t.Fatalf("NewID gave %q and %q", a, b)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []Config{
		{Cluster: "c", Record: Record{ID: "x"}, TTL: time.Second},
		{Cluster: "c", Record: Record{ID: "x"}, TTL: 2500 * time.Millisecond},
		{Cluster: "", Record: Record{ID: "x"}, TTL: 2 * time.Second},
		{Cluster: "c", Record: Record{ID: "x"}, TTL: 3 * time.Second, Margin: time.Second},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted", c)
		}
	}
}

// Views follow joins, leaves and lease loss, and are stamped with rising revisions.
func TestViewsFollowMembership(t *testing.T) {
	cluster := etcdtest.Start(t)
	cli := cluster.Client(t)
	views := runViews(t, cli)
	a := join(t, cli, "a", nil)
	b := join(t, cli, "b", nil)
	v1 := waitView(t, views, func(v View) bool { return v.Contains("a") && v.Contains("b") })

	if err := a.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	v2 := waitView(t, views, func(v View) bool { return !v.Contains("a") && v.Contains("b") })
	if v2.Revision <= v1.Revision {
		t.Fatalf("view revision did not rise: %d then %d", v1.Revision, v2.Revision)
	}
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after Leave")
	}

	// Losing the lease behind the member's back removes it and closes Done.
	if _, err := cli.Revoke(context.Background(), b.Lease()); err != nil {
		t.Fatal(err)
	}
	waitView(t, views, func(v View) bool { return len(v.Members) == 0 })
	select {
	case <-b.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the lease was revoked")
	}
	if b.Trusted(time.Now()) {
		t.Fatal("member with a revoked lease is still trusted")
	}
}

// The trust window is last ack + TTL − margin on the injected clock.
func TestDeadlineFollowsKeepaliveAcks(t *testing.T) {
	cluster := etcdtest.Start(t)
	cli := cluster.Client(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	m := join(t, cli, "a", clock)
	first := m.Deadline()
	if !m.Trusted(clock()) {
		t.Fatal("fresh member not trusted")
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	if m.Trusted(first) {
		t.Fatal("trusted at its own deadline")
	}
	// Real keepalives keep arriving (every TTL/3); each moves the deadline to
	// the injected now + TTL − margin.
	deadline := time.After(10 * time.Second)
	for !m.Deadline().After(first) {
		select {
		case <-deadline:
			t.Fatal("deadline never advanced with keepalive acks")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if got, want := m.Deadline(), clock().Add(2*time.Second-2*time.Second/6); !got.Equal(want) {
		t.Fatalf("Deadline = %v; want %v", got, want)
	}
}

// The member's own renewals, every TTL/3, keep its lease alive: the lease
// outlives two TTLs, and each renewal moves the trust window on.
func TestRenewKeepsTheLeaseAlive(t *testing.T) {
	cluster := etcdtest.Start(t)
	cli := cluster.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ttl = 2 * time.Second
	lease, err := cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	m := &Member{cfg: Config{TTL: ttl, Now: time.Now}, cli: cli}
	m.lastAck.Store(&granted)
	renewCtx, stop := context.WithCancel(context.Background())
	m.wg.Add(1)
	acks := make(chan *clientv3.LeaseKeepAliveResponse, 1)
	go m.renew(renewCtx, lease.ID, acks)
	defer func() { stop(); m.wg.Wait() }()

	// Six renewals span 4s, twice the TTL.
	last, renewals := m.Deadline(), 0
	for renewals < 6 {
		select {
		case <-ctx.Done():
			t.Fatalf("only %d renewals were acknowledged", renewals)
		case <-time.After(20 * time.Millisecond):
		}
		if d := m.Deadline(); d.After(last) {
			last, renewals = d, renewals+1
		}
	}
	ttlResp, err := cli.TimeToLive(ctx, lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ttlResp.TTL <= 0 {
		t.Fatalf("lease expired %s after its grant although renewed (TTL left %d)", time.Since(granted), ttlResp.TTL)
	}
}
