package jobs

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var exec1 = Execution{
	Job: "reconcile", Partition: 3, Partitions: 12, Token: 4711, Member: "host-abc",
	ScheduledTime: time.Date(2026, 11, 29, 12, 0, 5, 123, time.UTC),
}

func init() { exec1.ID = ExecutionID(exec1.Job, exec1.Partition, exec1.ScheduledTime) }

func TestExecutionIDIsDeterministic(t *testing.T) {
	at := exec1.ScheduledTime
	same := ExecutionID("reconcile", 3, at.In(time.FixedZone("X", 3600)))
	if same != exec1.ID {
		t.Fatalf("same fire, different ids: %s vs %s", same, exec1.ID)
	}
	for _, other := range []string{
		ExecutionID("reconcile", 4, at),
		ExecutionID("reconcile", 3, at.Add(time.Nanosecond)),
		ExecutionID("reconcil", 3, at),
	} {
		if other == exec1.ID {
			t.Fatal("different fires share an id")
		}
	}
}

func TestCommandGetsEnvironment(t *testing.T) {
	c := &Command{Argv: []string{"sh", "-c", "env | grep ^KIRA_ | sort"}}
	before := time.Now()
	res := c.Execute(context.Background(), exec1)
	if res.Outcome != Succeeded || res.Code != 0 {
		t.Fatalf("result %+v", res)
	}
	if res.ProcessStarted.Before(before) || res.ProcessStarted.After(time.Now()) {
		t.Errorf("process started at %v, not during Execute (from %v)", res.ProcessStarted, before)
	}
	for _, want := range []string{
		"KIRA_JOB=reconcile", "KIRA_PARTITION=3", "KIRA_PARTITIONS=12", "KIRA_FENCING_TOKEN=4711",
		"KIRA_EXECUTION_ID=" + exec1.ID, "KIRA_SCHEDULED_TIME=2026-11-29T12:00:05.000000123Z", "KIRA_MEMBER=host-abc",
	} {
		if !strings.Contains(res.OutputTail, want+"\n") {
			t.Errorf("output lacks %s:\n%s", want, res.OutputTail)
		}
	}
}

func TestCommandFailureKeepsTailAndExitCode(t *testing.T) {
	c := &Command{Argv: []string{"sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done; exit 3"}}
	res := c.Execute(context.Background(), exec1)
	if res.Outcome != Failed || res.Code != 3 {
		t.Fatalf("result %+v", res)
	}
	if len(res.OutputTail) > OutputTailBytes || !strings.HasSuffix(res.OutputTail, "line1999\n") {
		t.Fatalf("tail of %d bytes ends %q", len(res.OutputTail), res.OutputTail[len(res.OutputTail)-20:])
	}
	if res := (&Command{Argv: []string{"/no/such/program"}}).Execute(context.Background(), exec1); res.Outcome != Failed || !res.ProcessStarted.IsZero() {
		t.Fatalf("missing program: %+v", res)
	}
}

// A program found on PATH is found there once, and searched for again after
// a start fails: removed from where it was found, it runs from where it is
// now. It reads an empty standard input each run, and sees the name it was
// given as its argv[0], not the path found.
func TestCommandFindsItsProgramOnPathAgainAfterAFailedStart(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	t.Setenv("PATH", first+string(os.PathListSeparator)+second+string(os.PathListSeparator)+os.Getenv("PATH"))
	script := "#!/bin/sh\nread line; echo \"read $? from $(dirname $0)\"\n" // $0: the path run
	if err := os.WriteFile(filepath.Join(first, "kira-test-program"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Command{Argv: []string{"kira-test-program"}}
	run := func() Result { return c.Execute(context.Background(), exec1) }
	for range 2 {
		if res := run(); res.Outcome != Succeeded || res.OutputTail != "read 1 from "+first+"\n" {
			t.Fatalf("result %+v; want the program in %s run, at EOF on its input", res, first)
		}
	}
	if p := c.found.Load(); p == nil || *p != filepath.Join(first, "kira-test-program") {
		t.Fatalf("found %v; want the path kept", p)
	}
	if err := os.Rename(filepath.Join(first, "kira-test-program"), filepath.Join(second, "kira-test-program")); err != nil {
		t.Fatal(err)
	}
	if res := run(); res.Outcome != Failed || !res.ProcessStarted.IsZero() {
		t.Fatalf("result %+v; want a failed start from the path kept", res)
	}
	if res := run(); res.Outcome != Succeeded || res.OutputTail != "read 1 from "+second+"\n" {
		t.Fatalf("result %+v; want the program found again in %s", res, second)
	}
	sh := &Command{Argv: []string{"sh", "-c", "echo $0"}}
	for range 2 {
		if res := sh.Execute(context.Background(), exec1); res.OutputTail != "sh\n" {
			t.Fatalf("result %+v; want argv[0] as given", res)
		}
	}
	if sh.found.Load() == nil {
		t.Fatal("sh's path not kept")
	}
}

// A command that leaves a process holding its output ends after KillGrace,
// with the output read so far, not when that process ends.
func TestCommandDoesNotWaitForItsOutputPastKillGrace(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "left.pid")
	c := &Command{Argv: []string{"sh", "-c", "echo before; sleep 60 & echo $! > " + pidFile + "; echo after"}, KillGrace: 100 * time.Millisecond}
	start := time.Now()
	res := c.Execute(context.Background(), exec1)
	if pid, err := os.ReadFile(pidFile); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(pid))); err == nil {
			syscall.Kill(n, syscall.SIGKILL)
		}
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("waited %v for the output of a process left behind", took)
	}
	if res.OutputTail != "before\nafter\n" || !errors.Is(res.Err, exec.ErrWaitDelay) {
		t.Fatalf("result %+v; want the output and exec.ErrWaitDelay", res)
	}
}

// WithStarted's function is called once the process has started, while it
// still runs, and also when it could not start.
func TestCommandSaysWhenItsProcessStarted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	ctx = WithStarted(ctx, func() {
		calls++
		cancel() // the command would run for a minute otherwise
	})
	res := (&Command{Argv: []string{"sleep", "60"}}).Execute(ctx, exec1)
	if calls != 1 || res.Outcome != Cancelled || res.ProcessStarted.IsZero() {
		t.Fatalf("called %d times, result %+v; want once, a started process cancelled", calls, res)
	}
	calls = 0
	res = (&Command{Argv: []string{"/no/such/program"}}).Execute(WithStarted(context.Background(), func() { calls++ }), exec1)
	if calls != 1 || res.Outcome != Failed {
		t.Fatalf("missing program: called %d times, result %+v; want once, failed", calls, res)
	}
}

// A timeout or a cancellation kills the whole process group, grandchildren included.
func TestCommandKilledWithItsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	c := &Command{Argv: []string{"sh", "-c", "sleep 60 & echo $! > " + pidFile + "; wait"}}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res := c.Execute(ctx, exec1)
	if res.Outcome != TimedOut {
		t.Fatalf("outcome %s; want timed_out", res.Outcome)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(data))
	kiratest.WaitUntil(t, "the grandchild "+pid+" gone", 5*time.Second, func() bool {
		// A killed, reaped grandchild has no /proc entry; a zombie shows state Z.
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		return err != nil || strings.Contains(string(stat), ") Z ")
	})

	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if res := (&Command{Argv: []string{"sleep", "60"}}).Execute(ctx2, exec1); res.Outcome != Cancelled {
		t.Fatalf("cancelled run outcome %s", res.Outcome)
	}
}

func TestHTTPSendsHeadersAndClassifiesStatus(t *testing.T) {
	var got http.Header
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.WriteHeader(status)
		w.Write([]byte("body"))
	}))
	defer srv.Close()
	h := &HTTP{Spec: config.HTTPSpec{URL: srv.URL, Method: "POST", Headers: map[string]string{"X-Team": "billing"}}}
	res := h.Execute(context.Background(), exec1)
	if res.Outcome != Succeeded || res.Code != 200 || res.OutputTail != "body" {
		t.Fatalf("result %+v", res)
	}
	for k, v := range map[string]string{"Kira-Job": "reconcile", "Kira-Partition": "3", "Kira-Fencing-Token": "4711", "Idempotency-Key": exec1.ID, "X-Team": "billing",
		"Kira-Scheduled-Time": exec1.ScheduledTimeText(), "Kira-Member": exec1.Member} {
		if got.Get(k) != v {
			t.Errorf("header %s = %q; want %q", k, got.Get(k), v)
		}
	}
	for code, want := range map[int]Outcome{500: Failed, 409: Fenced, 204: Succeeded} {
		status = code
		if res := h.Execute(context.Background(), exec1); res.Outcome != want {
			t.Errorf("status %d: outcome %s; want %s", code, res.Outcome, want)
		}
	}
}

func TestHTTPTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res := (&HTTP{Spec: config.HTTPSpec{URL: srv.URL, Method: "GET"}}).Execute(ctx, exec1)
	if res.Outcome != TimedOut {
		t.Fatalf("outcome %s; want timed_out", res.Outcome)
	}
}

func TestHandlerSeesTokenAndExecution(t *testing.T) {
	var seen Execution
	var tok fencing.Token
	handlers := Handlers{"check": func(ctx context.Context) error {
		seen, _ = FromContext(ctx)
		tok, _ = fencing.FromContext(ctx)
		return nil
	}, "fenced": func(ctx context.Context) error {
		return errors.Join(errors.New("write refused"), ErrFenced)
	}, "panics": func(ctx context.Context) error { panic("boom") }}
	ex, err := ForJob(config.Job{Name: "j", Handler: "check"}, handlers)
	if err != nil {
		t.Fatal(err)
	}
	if res := ex.Execute(context.Background(), exec1); res.Outcome != Succeeded || seen.ID != exec1.ID || tok != 4711 {
		t.Fatalf("result %+v, execution %+v, token %v", res, seen, tok)
	}
	if res := handlers["fenced"].Execute(context.Background(), exec1); res.Outcome != Fenced {
		t.Fatalf("fenced handler outcome %s", res.Outcome)
	}
	if res := handlers["panics"].Execute(context.Background(), exec1); res.Outcome != Failed {
		t.Fatalf("panicking handler outcome %s", res.Outcome)
	}
	if _, err := ForJob(config.Job{Name: "j", Handler: "missing"}, handlers); !errors.Is(err, ErrUnknownHandler) {
		t.Fatalf("unknown handler error %v", err)
	}
}

// TestHTTPKeepsItsConnectionsForTheNextFire: a member's slots of one job fire
// together, so their requests reach one receiver at once; the next fire must
// find those connections kept (net/http's default keeps 2 a host) instead of
// dialling them all again.
func TestHTTPKeepsItsConnectionsForTheNextFire(t *testing.T) {
	const together = 64
	var (
		mu      sync.Mutex
		dialled int
		arrived int
		all     = make(chan struct{})
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		wait := all
		if arrived++; arrived%together == 0 {
			close(all)
			all = make(chan struct{})
		}
		mu.Unlock()
		select { // every request of a fire is open at once
		case <-wait:
		case <-time.After(5 * time.Second):
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			dialled++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	defer pool.CloseIdleConnections()
	h := &HTTP{Spec: config.HTTPSpec{URL: srv.URL, Method: "POST"}}
	fire := func() int {
		mu.Lock()
		before := dialled
		mu.Unlock()
		var wg sync.WaitGroup
		for range together {
			wg.Go(func() {
				if res := h.Execute(context.Background(), exec1); res.Outcome != Succeeded {
					t.Errorf("result %+v", res)
				}
			})
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return dialled - before
	}
	if n := fire(); n != together {
		t.Fatalf("the first fire opened %d connections; want %d (its requests were not all open at once)", n, together)
	}
	if n := fire(); n != 0 {
		t.Fatalf("the second fire opened %d new connections; want 0: the first fire's were not kept", n)
	}
}

// The built-in handler noop resolves for a catalog job and succeeds.
func TestBuiltinNoopSucceeds(t *testing.T) {
	ex, err := ForJob(config.Job{Name: "try", Handler: "noop"}, Builtin())
	if err != nil {
		t.Fatal(err)
	}
	if res := ex.Execute(context.Background(), Execution{Job: "try", ID: "try-1"}); res.Outcome != Succeeded || res.Err != nil {
		t.Fatalf("noop: %+v, want a success", res)
	}
}
