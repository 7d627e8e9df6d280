package notify

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// quiet is the notifier's logger in tests: OnResult reports the same.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// results collects what OnResult reports.
type results struct {
	mu  sync.Mutex
	all []Result
}

func (r *results) add(x Result) { r.mu.Lock(); r.all = append(r.all, x); r.mu.Unlock() }
func (r *results) get() []Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Result(nil), r.all...)
}

// start runs a notifier of cfg until the test ends.
func start(t *testing.T, cfg Config) (*Notifier, *results) {
	rs := &results{}
	cfg.OnResult, cfg.Logger = rs.add, quiet
	n := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); kiratest.Receive(t, done, 10*time.Second, "the notifier to stop") })
	return n, rs
}

func message(id, outcome string) Message {
	code := 3
	return Message{Record: history.Record{Job: "billing", Partition: 2, ExecutionID: id, Outcome: outcome, Attempt: 2, ExitCode: &code, OutputTail: "boom\n"}, Cluster: "c", Link: "http://m:8080/v1/jobs/billing/executions/" + id}
}

// A matching execution is POSTed once as JSON, with its id as
// Idempotency-Key and the rule's headers (${NAME} expanded); an outcome the
// rule does not name is not sent.
func TestDeliversMatchingOutcomes(t *testing.T) {
	got := make(chan *http.Request, 10)
	bodies := make(chan Message, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m Message
		json.NewDecoder(r.Body).Decode(&m)
		got <- r
		bodies <- m
	}))
	defer srv.Close()
	n, rs := start(t, Config{LookupEnv: func(k string) (string, bool) { return map[string]string{"TOKEN": "s3cret"}[k], k == "TOKEN" }})
	rules := []config.NotifyRule{{On: []string{"failed", "missed"}, Webhook: srv.URL + "/hook", Headers: map[string]string{"Authorization": "Bearer ${TOKEN}"}}}
	n.Notify(rules, message("e1", "succeeded"))
	n.Notify(rules, message("e2", "failed"))
	r := kiratest.Receive(t, got, 10*time.Second, "the webhook's request")
	m := kiratest.Receive(t, bodies, time.Second, "its body")
	if r.Method != "POST" || r.URL.Path != "/hook" || r.Header.Get("Idempotency-Key") != "e2" || r.Header.Get("Authorization") != "Bearer s3cret" || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("request %s %s %v", r.Method, r.URL, r.Header)
	}
	if m.Job != "billing" || m.Partition != 2 || m.ExecutionID != "e2" || m.Outcome != "failed" || *m.ExitCode != 3 || m.Attempt != 2 || m.OutputTail != "boom\n" || !strings.HasSuffix(m.Link, "/e2") {
		t.Fatalf("message %+v", m)
	}
	kiratest.WaitUntil(t, "the delivery reported", 5*time.Second, func() bool { return len(rs.get()) == 1 })
	if res := rs.get()[0]; res.Err != nil || res.Attempts != 1 || res.Job != "billing" || res.Partition != 2 {
		t.Fatalf("result %+v", res)
	}
	select {
	case r := <-got:
		t.Fatalf("a second request, for %s", r.Header.Get("Idempotency-Key"))
	case <-time.After(300 * time.Millisecond):
	}
}

// A failing receiver (503) is retried with backoff until it answers; one
// that refuses (400) is not retried; one that never answers in time is
// given up at the deadline, and each end is reported.
func TestRetriesAndGivesUp(t *testing.T) {
	var flaky atomic.Int32
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/flaky":
			if flaky.Add(1) < 3 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		case "/refuse":
			w.WriteHeader(http.StatusBadRequest)
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		}
	}))
	defer srv.Close()
	defer close(stop)
	n, rs := start(t, Config{AttemptTimeout: 200 * time.Millisecond, Deadline: 1500 * time.Millisecond, Backoff: 100 * time.Millisecond})
	for _, path := range []string{"/flaky", "/refuse", "/slow"} {
		n.Notify([]config.NotifyRule{{On: []string{"failed"}, Webhook: srv.URL + path}}, message(path, "failed"))
	}
	kiratest.WaitUntil(t, "three results", 10*time.Second, func() bool { return len(rs.get()) == 3 })
	by := map[string]Result{}
	for _, r := range rs.get() {
		by[strings.TrimPrefix(r.Webhook, srv.URL)] = r
	}
	if r := by["/flaky"]; r.Err != nil || r.Attempts != 3 {
		t.Errorf("flaky: %+v", r)
	}
	if r := by["/refuse"]; r.Err == nil || r.Attempts != 1 || !strings.Contains(r.Err.Error(), "400") {
		t.Errorf("refuse: %+v", r)
	}
	if r := by["/slow"]; r.Err == nil || r.Attempts < 2 || !strings.Contains(r.Err.Error(), "gave up") {
		t.Errorf("slow: %+v", r)
	}
}

// Notify never blocks, whatever the receiver does: with a receiver that
// hangs and a full queue, the messages that do not fit are reported at
// once, and those queued when the notifier stops are reported too.
func TestNeverBlocksAndNeverDropsSilently(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	rs := &results{}
	n := New(Config{Queue: 10, Workers: 1, OnResult: rs.add, Logger: quiet})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	rules := []config.NotifyRule{{On: []string{"failed"}, Webhook: srv.URL}}
	begin := time.Now()
	for i := range 100 {
		n.Notify(rules, message(strings.Repeat("x", i+1), "failed"))
	}
	if took := time.Since(begin); took > time.Second {
		t.Fatalf("100 Notify calls took %s", took)
	}
	kiratest.WaitUntil(t, "the overflow reported", 5*time.Second, func() bool { return len(rs.get()) >= 89 })
	cancel()
	kiratest.Receive(t, done, 10*time.Second, "Run to return")
	all := rs.get()
	failed := 0
	for _, r := range all {
		if r.Err != nil {
			failed++
		}
	}
	if len(all) != 100 || failed != 100 {
		t.Fatalf("%d results, %d failed; want every one of 100 reported failed", len(all), failed)
	}
}
