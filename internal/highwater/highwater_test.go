package highwater

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }

// client is a client of endpoint whose linearizable answers feed mark.
func client(t *testing.T, endpoint string, mark *Mark) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(mark.Interceptor())}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func puts(t *testing.T, cli *clientv3.Client, n int) int64 {
	t.Helper()
	var rev int64
	for i := range n {
		resp, err := cli.Put(context.Background(), fmt.Sprintf("/k/%d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	return rev
}

// A member that moves from an etcd at revision ~40 to another at revision
// ~5 (a restore without the bump looks the same: the revision goes back)
// says so at ERROR with both revisions and the fix, holds every token up to
// the mark, and ends the hold once the revision passes the mark.
func TestRevisionGoingBackIsHeld(t *testing.T) {
	var logs bytes.Buffer
	mark := New(slog.New(slog.NewTextHandler(&logs, nil)))
	first, second := etcdtest.Start(t), etcdtest.Start(t)
	high := puts(t, client(t, first.Endpoints()[0], mark), 40)
	if got, falls := mark.State(); got != high || falls != 0 || mark.Holding() != "" {
		t.Fatalf("after 40 puts at revision %d: mark %d, falls %d, holding %q", high, got, falls, mark.Holding())
	}
	cli := client(t, second.Endpoints()[0], mark)
	low := puts(t, cli, 3)
	if _, falls := mark.State(); falls != 1 {
		t.Fatalf("revision went back from %d to %d: %d falls reported", high, low, falls)
	}
	if why := mark.Holding(); !strings.Contains(why, fmt.Sprintf("went back from %d to ", high)) {
		t.Fatalf("holding: %q", why)
	}
	if out := logs.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, fmt.Sprintf("revision_before=%d", high)) ||
		!strings.Contains(out, "kira etcd snapshot restore") || !strings.Contains(out, "cluster id changed") {
		t.Fatalf("log:\n%s", out)
	}
	if err := mark.Admit(high); !errors.Is(err, ErrHeld) {
		t.Fatalf("Admit(%d) = %v, want ErrHeld", high, err)
	}
	// Serializable reads are not used: a lagging member could answer them.
	if _, err := cli.Get(context.Background(), "/k/0", clientv3.WithSerializable()); err != nil {
		t.Fatal(err)
	}
	now := puts(t, cli, int(high-low)+1)
	if now <= high || mark.Holding() != "" || mark.Admit(now) != nil {
		t.Fatalf("revision %d passed the mark %d: holding %q, Admit %v", now, high, mark.Holding(), mark.Admit(now))
	}
	if _, falls := mark.State(); falls != 1 {
		t.Fatalf("%d falls after the revision rose again", falls)
	}
	if !strings.Contains(logs.String(), "holding ended") {
		t.Fatalf("the end of the hold is not logged:\n%s", logs.String())
	}
}

// A revision that keeps rising, even in another cluster, or the answers of
// concurrent requests observed out of order, are no fall.
func TestRisingRevisionIsNoFall(t *testing.T) {
	var logs bytes.Buffer
	mark := New(slog.New(slog.NewTextHandler(&logs, nil)))
	mark.Observe(1, 10)
	mark.Observe(1, 10)
	mark.Observe(1, 11)
	mark.Observe(2, 12)
	// The answers of two requests sent together arrive in either order.
	at := mark.sent()
	mark.observe(2, 14, at)
	mark.observe(2, 13, at)
	if got, falls := mark.State(); got != 14 || falls != 0 || mark.Holding() != "" || mark.Admit(1) != nil {
		t.Fatalf("mark %d, falls %d, holding %q", got, falls, mark.Holding())
	}
	if !strings.Contains(logs.String(), "cluster id changed") || strings.Contains(logs.String(), "ERROR") {
		t.Fatalf("log:\n%s", logs.String())
	}
	mark.Observe(2, 13)
	if _, falls := mark.State(); falls != 1 {
		t.Fatal("a fall after a cluster change is not reported")
	}
}

// The mark outlasts the process in its file: a member restarted after a
// restore without the bump still sees the fall; a bad file is an error
// naming it.
func TestMarkOutlastsARestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), FileName)
	mark, err := Load(file, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); mark.Run(ctx) }()
	mark.Observe(0xabc, 500)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	again, err := Load(file, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	again.Observe(0xabc, 20)
	if _, falls := again.State(); falls != 1 || again.Admit(500) == nil || again.Admit(501) != nil {
		t.Fatalf("after a restart: falls %d, Admit(500) %v", falls, again.Admit(500))
	}
	if err := os.WriteFile(file, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(file, nil); err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("a bad file: %v", err)
	}
}

// What a member pays on each answer of etcd: the mark read at the
// request's sending and updated at its answer, from many goroutines.
func BenchmarkObserveAnswer(b *testing.B) {
	mark := New(slog.New(slog.DiscardHandler))
	var rev atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			at := mark.sent()
			mark.observe(1, rev.Add(1), at)
		}
	})
}
