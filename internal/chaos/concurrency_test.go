package chaos

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/jobs"
)

const limitedCatalog = `cluster: selftest
pools: {shared: 2}
jobs:
  - {name: quota, schedule: "@every 1s", partitions: 6, max_running: 2, command: ["true"]}
  - {name: left, schedule: "@every 1s", partitions: 2, pool: shared, command: ["true"]}
  - {name: right, schedule: "@every 1s", partitions: 2, pool: shared, command: ["true"]}
  - {name: free, schedule: "@every 1s", partitions: 6, command: ["true"]}
`

// run marks one run in the log: its Hold, then (end) its Write or End.
func (h *attemptLog) mark(kind Kind, job string, part int, token fencing.Token, member string, scheduled time.Time, out Outcome) {
	h.add(kind, job, part, token, member, scheduled, t0.Add(time.Duration(h.seq)*time.Millisecond), out)
}

// The checker counts, per limit, the runs between their start mark (Hold)
// and their end mark (Write of the same run, or End): runs that follow one
// another pass; one run too many fails, whatever ends it later and
// whichever member ran it; the runs of a pool's jobs count together; the
// runs of an unlimited job do not count.
func TestCheckerCountsConcurrentRuns(t *testing.T) {
	cat, err := config.Parse("limited.yaml", []byte(limitedCatalog))
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Catalog: cat, From: t0, To: t0}
	s := t0.Add(time.Second)

	ok := &attemptLog{}
	ok.mark(Hold, "quota", 0, 10, "a", s, Noted)
	ok.mark(Hold, "quota", 1, 11, "b", s, Noted)
	ok.mark(Write, "quota", 0, 10, "a", s, Accepted)
	ok.mark(Hold, "quota", 2, 12, "c", s, Noted)
	ok.mark(End, "quota", 1, 11, "b", s, Gone) // cancelled: its member lost the slot
	ok.mark(Hold, "quota", 1, 21, "c", s, Noted)
	ok.mark(Write, "quota", 2, 12, "c", s, Stale) // fenced, but its work is done
	ok.mark(Hold, "quota", 3, 13, "a", s, Noted)
	for p := range 6 {
		ok.mark(Hold, "free", p, 30, "a", s, Noted)
	}
	ok.mark(Hold, "left", 0, 40, "a", s, Noted)
	ok.mark(Hold, "right", 0, 41, "b", s, Noted)
	ok.mark(Write, "left", 0, 40, "a", s, Accepted)
	ok.mark(Hold, "right", 1, 42, "c", s, Noted)
	rep := Check(ok.as, spec)
	if !rep.OK() || rep.Concurrent["job/quota"] != 2 || rep.Concurrent["pool/shared"] != 2 || rep.Concurrent["job/free"] != 0 {
		t.Fatalf("runs within their limits: %v; most at once %v", rep.Violations, rep.Concurrent)
	}

	// A run of a frozen member counts until its work is done: a third run
	// beginning before that is one too many.
	frozen := &attemptLog{}
	frozen.mark(Hold, "quota", 0, 10, "a", s, Noted) // a is frozen from here on
	frozen.mark(Hold, "quota", 1, 11, "b", s, Noted)
	frozen.mark(Hold, "quota", 2, 12, "c", s, Noted) // after a's lease expired, but a's work goes on
	frozen.mark(Write, "quota", 0, 10, "a", s, Stale)
	rep = Check(frozen.as, spec)
	if rep.OK() || !strings.Contains(rep.Violations[0], "job/quota: 3 runs at once, over its limit of 2, when quota/2") || rep.Concurrent["job/quota"] != 3 {
		t.Fatalf("three runs at once: %v", rep.Violations)
	}

	// The pool's jobs count together; a replay of the same execution id by
	// a new holder is a run of its own.
	pool := &attemptLog{}
	pool.mark(Hold, "left", 0, 40, "a", s, Noted)
	pool.mark(Hold, "left", 0, 50, "b", s, Noted)
	pool.mark(Hold, "right", 1, 42, "c", s, Noted)
	rep = Check(pool.as, spec)
	if len(rep.Violations) != 1 || !strings.Contains(rep.Violations[0], "pool/shared: 3 runs at once, over its limit of 2, when right/1") {
		t.Fatalf("three runs of a pool of 2: %v", rep.Violations)
	}
}

// POST /hold marks a Hold, holds the request for its work, and writes
// through the fence; a request whose client goes away ends with an End.
func TestWitnessHold(t *testing.T) {
	w := NewWitness()
	srv := httptest.NewServer(w)
	defer srv.Close()
	s := t0.Add(time.Second)
	request := func(ctx context.Context, part int, work string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/hold?work="+work, http.NoBody)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(jobs.HeaderJob, "quota")
		req.Header.Set(jobs.HeaderPartition, string(rune('0'+part)))
		req.Header.Set(fencing.HeaderToken, "7")
		req.Header.Set(jobs.HeaderIdempotencyKey, jobs.ExecutionID("quota", part, s))
		req.Header.Set(jobs.HeaderScheduledTime, s.Format(time.RFC3339Nano))
		req.Header.Set(jobs.HeaderMember, "a")
		return http.DefaultClient.Do(req)
	}
	resp, err := request(context.Background(), 0, "50ms")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("hold answered %d", resp.StatusCode)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer cancel() // the test fails below unless the request was held first
		w.WaitFor(10*time.Second, func(a Attempt) bool { return a.Kind == Hold && a.Partition == 1 })
	}()
	if _, err := request(ctx, 1, "1h"); err == nil {
		t.Fatal("a request cancelled while held answered")
	}
	if _, ok := w.WaitFor(10*time.Second, func(a Attempt) bool { return a.Kind == End && a.Partition == 1 && a.Outcome == Gone }); !ok {
		// It may have been logged before WaitFor began: look in the log.
		found := false
		for _, a := range w.Attempts() {
			found = found || a.Kind == End && a.Partition == 1
		}
		if !found {
			t.Fatalf("no End for the cancelled run: %+v", w.Attempts())
		}
	}
	var kinds []string
	for _, a := range w.Attempts() {
		kinds = append(kinds, string(a.Kind)+"/"+string(a.Outcome))
	}
	if got := strings.Join(kinds, " "); got != "hold/noted write/accepted hold/noted end/gone" {
		t.Fatalf("log %s", got)
	}
}
