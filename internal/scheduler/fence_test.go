package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/fencing/httpfence"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/highwater"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
)

// calls records the requests a protected service received, in order.
type calls struct {
	mu  sync.Mutex
	log []string // "path token"
}

func (c *calls) add(r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, r.URL.Path+" "+r.Header.Get(fencing.HeaderToken))
}

func (c *calls) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.log...)
}

// The job's fence_url and the OnAcquire hook run with the new token before
// the slot's first execution; the execution carries the same token.
func TestFencesRaisedBeforeFirstExecution(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	var seen calls
	guard := httpfence.New(httpfence.NewMemoryStore(), nil)
	srv := httptest.NewServer(guard.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen.add(r) })))
	defer srv.Close()
	cat := catalog("raise", config.Job{Name: "sync", Schedule: "@every 1s", Partitions: 1,
		HTTP: &config.HTTPSpec{URL: srv.URL + "/run", Method: "POST"}, FenceURL: srv.URL + "/fence"})
	rec := newRecorder()
	var hookMu sync.Mutex
	var hooked []fencing.Claim
	startNode(t, cli, cat, rec, nil, nodeOpts{cfg: Config{OnAcquire: func(ctx context.Context, s shard.Slot, c fencing.Claim) error {
		if got, _ := fencing.ClaimFromContext(ctx); got != c {
			t.Errorf("hook context carries %+v; want %+v", got, c)
		}
		hookMu.Lock()
		hooked = append(hooked, c)
		hookMu.Unlock()
		return nil
	}}})
	evs := rec.waitFor(t, "two finished executions", 15*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool { return e.Kind == Finished }) >= 2
	})
	var token fencing.Token
	for _, e := range evs {
		if e.Kind == Acquired {
			token = e.Token
			break
		}
	}
	log := seen.all()
	if len(log) < 3 || log[0] != "/fence "+token.String() {
		t.Fatalf("service saw %v; want /fence %s first", log, token)
	}
	for _, l := range log[1:] {
		if l != "/run "+token.String() {
			t.Fatalf("service saw %v; every run must carry token %s", log, token)
		}
	}
	hookMu.Lock()
	defer hookMu.Unlock()
	if len(hooked) != 1 || hooked[0].Token != token || !strings.HasPrefix(hooked[0].LeaderKey, keyspace.Election("raise", shard.Slot{Job: "sync"})) {
		t.Fatalf("OnAcquire calls %+v; want one with token %d", hooked, token)
	}
	// Raised comes after Acquired and before the first Started.
	order := []EventKind{}
	for _, e := range evs {
		if e.Kind == Acquired || e.Kind == Raised || e.Kind == Started {
			order = append(order, e.Kind)
		}
	}
	if len(order) < 3 || order[0] != Acquired || order[1] != Raised || order[2] != Started {
		t.Fatalf("event order %v; want acquired, raised, started", order)
	}
}

// Slots won whose takeover has not finished (here, an OnAcquire hook that
// waits) are counted by TakingOver, and no longer once they are raised.
func TestSlotsTakingOverAreCounted(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	cat := catalog("takingover", config.Job{Name: "sync", Schedule: "@every 1h", Handler: "noop", Partitions: 2})
	rec := newRecorder()
	release := make(chan struct{})
	n := startNode(t, cli, cat, rec, nil, nodeOpts{cfg: Config{
		Handlers:  jobs.Handlers{"noop": noop},
		OnAcquire: func(ctx context.Context, _ shard.Slot, _ fencing.Claim) error { return blockUntil(release)(ctx) },
	}})
	waitKind(t, rec, "both slots won", 2, func(e Event) bool { return e.Kind == Acquired })
	waitUntil(t, "two slots taking over", 10*time.Second, func() bool { return n.sched.TakingOver() == 2 })
	close(release)
	waitKind(t, rec, "both slots raised", 2, func(e Event) bool { return e.Kind == Raised })
	waitUntil(t, "no slot taking over", 10*time.Second, func() bool { return n.sched.TakingOver() == 0 })
}

// If the fence cannot be raised, nothing runs: the slot is given up and
// tried again later.
func TestFailedRaiseStartsNothing(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	cat := catalog("noraise", config.Job{Name: "sync", Schedule: "@every 1s", Handler: "noop"})
	rec := newRecorder()
	startNode(t, cli, cat, rec, nil, nodeOpts{cfg: Config{
		Handlers:  jobs.Handlers{"noop": noop},
		OnAcquire: func(context.Context, shard.Slot, fencing.Claim) error { return errors.New("database unreachable") },
	}})
	evs := rec.waitFor(t, "the slot given up twice", 20*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool { return e.Kind == Released && strings.Contains(e.Reason, "fence not raised") }) >= 2
	})
	if n := count(evs, func(e Event) bool { return e.Kind == Started || e.Kind == Raised }); n != 0 {
		t.Fatalf("%d executions or raises with a fence that was never raised", n)
	}
}

// A 409 from a guard means a newer token was seen: the member stops the
// slot's work, gives the slot up, and comes back (if still preferred) with a
// higher token, which the guard then accepts.
func TestConflictGivesTheSlotUp(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	var mu sync.Mutex
	conflicts := 1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if conflicts > 0 {
			conflicts--
			w.WriteHeader(http.StatusConflict)
		}
	}))
	defer srv.Close()
	cat := catalog("conflict", config.Job{Name: "sync", Schedule: "@every 1s", HTTP: &config.HTTPSpec{URL: srv.URL, Method: "POST"}})
	rec := newRecorder()
	startNode(t, cli, cat, rec, nil, nodeOpts{cfg: Config{}})
	evs := rec.waitFor(t, "a success after the conflict", 20*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool { return e.Kind == Finished && e.Result.Outcome == jobs.Succeeded }) > 0
	})
	var fencedToken, okToken fencing.Token
	released := false
	for _, e := range evs {
		switch {
		case e.Kind == Finished && e.Result.Outcome == jobs.Fenced:
			fencedToken = e.Token
		case e.Kind == Released && e.Reason == "fenced by a protected resource":
			released = true
		case e.Kind == Finished && e.Result.Outcome == jobs.Succeeded && okToken == 0:
			okToken = e.Token
		}
	}
	if fencedToken == 0 || !released || okToken <= fencedToken {
		t.Fatalf("fenced with %d, released %v, then succeeded with %d; want a release and a higher token", fencedToken, released, okToken)
	}
}

// lockedLog is a log written by the scheduler's goroutines and read by the test.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A slot won under a token Admit refuses (at or below the member's
// high-water mark) is not led at all: no event, no state read, no fence, no
// execution; it is campaigned for again, and fires once a token is
// admitted. A fence that refuses a newly won token (it has seen a higher
// one) is logged at ERROR in the words of a revision that went back.
func TestRefusedTokensStartNothing(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	var mu sync.Mutex
	var held, refusedByFence, admitted fencing.Token
	logs := &lockedLog{}
	cat := catalog("admit", config.Job{Name: "sync", Schedule: "@every 1s", Handler: "noop"})
	rec := newRecorder()
	startNode(t, cli, cat, rec, nil, nodeOpts{cfg: Config{
		Handlers: jobs.Handlers{"noop": noop},
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
		Admit: func(token int64) error {
			mu.Lock()
			defer mu.Unlock()
			if held == 0 { // the first win only
				held = fencing.Token(token)
				return fmt.Errorf("%w: token %d", highwater.ErrHeld, token)
			}
			return nil
		},
		OnAcquire: func(_ context.Context, _ shard.Slot, c fencing.Claim) error {
			mu.Lock()
			defer mu.Unlock()
			if refusedByFence == 0 {
				refusedByFence = c.Token
				return fmt.Errorf("%w: the resource saw a higher token", fencing.ErrFenced)
			}
			admitted = c.Token
			return nil
		},
	}})
	evs := rec.waitFor(t, "an execution after a refused token and a refused fence", 20*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool { return e.Kind == Finished && e.Result.Outcome == jobs.Succeeded }) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if held == 0 || refusedByFence <= held || admitted <= refusedByFence {
		t.Fatalf("held %d, refused by the fence %d, then admitted %d: want each above the one before", held, refusedByFence, admitted)
	}
	for _, e := range evs {
		if e.Token == held {
			t.Errorf("an event of the refused token %d: %s %s", held, e.Kind, e.Reason)
		}
		if (e.Kind == Started || e.Kind == Raised) && e.Token <= refusedByFence {
			t.Errorf("%s under token %d, refused by the fence", e.Kind, e.Token)
		}
	}
	if out := logs.String(); !strings.Contains(out, "level=ERROR msg=\"a fence refused the newly won token") || !strings.Contains(out, "kira etcd snapshot restore") {
		t.Fatalf("the refused fence is not logged at ERROR with the fix:\n%s", out)
	}
}

// A takeover read that waits its turn in the reads' queue for longer than
// the raise timeout is still answered, and the slot raised: only the
// fences and each read's own transaction are bounded by the timeout. A
// member taking tens of thousands of slots at once queues their reads for
// that long, and giving them up for it only started their campaigns over.
func TestAQueuedTakeoverReadOutlastsTheRaiseTimeout(t *testing.T) {
	defer func(d time.Duration) { raiseTimeout = d }(raiseTimeout)
	raiseTimeout = 200 * time.Millisecond
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	cat := catalog("queued", config.Job{Name: "sync", Schedule: "@every 1h", Handler: "noop"})
	rec := newRecorder()
	hold := make(chan struct{})
	n := startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{holdReads: hold})
	waitKind(t, rec, "the slot won", 1, func(e Event) bool { return e.Kind == Acquired })
	kiratest.WaitUntil(t, "the slot taking over", 10*time.Second, func() bool { return n.sched.TakingOver() == 1 })
	select { // the read waits in the queue for longer than the raise timeout
	case <-time.After(3 * raiseTimeout):
	case <-n.done:
		t.Fatal("the scheduler stopped")
	}
	close(hold)
	evs := waitKind(t, rec, "the slot raised", 1, func(e Event) bool { return e.Kind == Raised })
	if n := count(evs, func(e Event) bool { return e.Kind == Released }); n != 0 {
		t.Fatalf("the slot was given up %d times while its read waited in the queue", n)
	}
}
