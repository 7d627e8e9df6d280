package client_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/api"
	"github.com/kira-scheduler/kira/client"
	"github.com/kira-scheduler/kira/internal/etcdtest"
)

// failing passes a request to the API once fail has been counted down to
// zero; before, it answers 503, as a member whose etcd is away would, or
// with drop set closes the connection unanswered, as a member restarting.
type failing struct {
	fail atomic.Int64 // requests to refuse before the API answers
	drop atomic.Bool
	seen atomic.Int64 // requests received
	next http.Handler
}

func (f *failing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.seen.Add(1)
	if f.fail.Add(-1) < 0 {
		f.next.ServeHTTP(w, r)
		return
	}
	if f.drop.Load() {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	http.Error(w, `{"error": "etcd: unavailable"}`, http.StatusServiceUnavailable)
}

// Reads are sent once by default; WithReadRetries sends them again while
// they fail for a reason that may pass (503, no answer), up to its
// attempts, and not past ctx; a write is never sent again.
func TestReadRetries(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	storeCatalog(t, cli, "cluster: client\njobs:\n  - {name: tick, schedule: '@hourly', command: ['true']}\n")
	f := &failing{}
	srv := serveAPI(t, cli, api.Config{}, func(h http.Handler) http.Handler { f.next = h; return f })
	ctx := context.Background()
	once := newClient(t, srv, nil, client.WithToken(token))
	retried := newClient(t, srv, nil, client.WithToken(token), client.WithReadRetries(3, 10*time.Millisecond))

	for _, tc := range []struct {
		what       string
		c          *client.Client
		call       func(*client.Client) error
		fail, sent int64
		ok         bool
	}{
		{"a read, by default", once, status, 1, 1, false},
		{"a read that passes on the third attempt", retried, status, 2, 3, true},
		{"a read that fails every attempt", retried, status, 5, 3, false},
		{"a write", retried, pause, 1, 1, false},
		{"a read refused for good", retried, missing, 0, 1, false},
	} {
		f.fail.Store(tc.fail)
		f.seen.Store(0)
		err := tc.call(tc.c)
		if (err == nil) != tc.ok || f.seen.Load() != tc.sent {
			t.Errorf("%s: %d requests sent, error %v; want %d, ok %v", tc.what, f.seen.Load(), err, tc.sent, tc.ok)
		}
	}

	f.drop.Store(true)
	f.fail.Store(3) // Go's transport itself sends a GET again on a dropped connection it had reused
	if err := status(newClient(t, srv, nil, client.WithReadRetries(5, 10*time.Millisecond))); err != nil {
		t.Fatalf("a read whose connections were dropped: %v", err)
	}
	f.fail.Store(100)
	patient := newClient(t, srv, nil, client.WithReadRetries(100, time.Hour))
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := patient.Status(short); err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("a read retried past its ctx: %v after %s", err, time.Since(start))
	}
	if _, err := client.New(srv.URL, client.WithReadRetries(0, time.Second)); err == nil {
		t.Fatal("WithReadRetries(0, 1s) accepted")
	}
}

func status(c *client.Client) error { _, err := c.Status(context.Background()); return err }

func pause(c *client.Client) error { _, err := c.Pause(context.Background(), "tick"); return err }

func missing(c *client.Client) error { _, err := c.Job(context.Background(), "nope"); return err }
