package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/scheduler/internal/fenced"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }

// recorder collects events and lets tests wait for them.
type recorder struct {
	mu      sync.Mutex
	events  []Event
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1)} }

func (r *recorder) add(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// waitFor waits until cond holds over the events seen so far.
func (r *recorder) waitFor(t *testing.T, what string, timeout time.Duration, cond func([]Event) bool) []Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if evs := r.all(); cond(evs) {
			return evs
		}
		select {
		case <-r.changed:
		case <-deadline:
			for _, e := range r.all() {
				t.Logf("%s %s %s token=%d exec=%s reason=%s", e.Member[len(e.Member)-4:], e.Kind, e.Slot, e.Token, e.Execution.ScheduledTimeText(), e.Reason)
			}
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func count(evs []Event, keep func(Event) bool) int {
	n := 0
	for _, e := range evs {
		if keep(e) {
			n++
		}
	}
	return n
}

// filter is the events of evs that keep keeps.
func filter(evs []Event, keep func(Event) bool) []Event {
	var out []Event
	for _, e := range evs {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

type node struct {
	id     string
	member *member.Member
	views  *member.Views
	sched  *Scheduler
	cancel context.CancelFunc
	done   chan error
	stop   func() error // graceful: stop the scheduler, then leave
}

type nodeOpts struct {
	ttl       time.Duration
	grace     time.Duration // default 5s
	clock     clock.Clock
	memberNow func() time.Time
	// manual runs the scheduler and the trust window on this clock, with a
	// long lease TTL (trusted for 600s of manual time after its last real
	// keepalive), so a test can move the clock by minutes.
	manual *clock.Manual
	// gate, if set, stands in front of the state writer's KV: its commits
	// wait at the gate (see gatedKV).
	gate *gatedKV
	// holdReads, if set, keeps the takeover reads queued until closed.
	holdReads chan struct{}
	cfg       Config // Handlers, OnAcquire, …; Clock, OnEvent and Grace are set by startNode
	armed     func(shard.Slot)
	assign    func() // the scheduler's assignHook
	// readsFormat is the newest history format the member record
	// publishes: history.NewestFormat if 0, none if -1 (as a version
	// before history.FormatCompact).
	readsFormat int
	writerKV    func(clientv3.KV) clientv3.KV // wraps the state writer's KV (a gate in front of etcd)
	labels      map[string]string             // the member's labels (placement)
}

// startNode is the one way a test starts a running member: it joins the
// cluster, runs a Scheduler for cat with handlers (cfg.Handlers if nil) and
// the options of o, and stops gracefully at the end of the test.
func startNode(t *testing.T, cli *clientv3.Client, cat *config.Catalog, rec *recorder, handlers jobs.Handlers, o nodeOpts) *node {
	t.Helper()
	if o.manual != nil {
		o.clock, o.memberNow = o.manual, o.manual.Now
		if o.ttl == 0 {
			o.ttl = 600 * time.Second
		}
	}
	if o.gate != nil {
		o.writerKV = func(kv clientv3.KV) clientv3.KV { o.gate.KV = kv; return o.gate }
	}
	if o.ttl == 0 {
		o.ttl = 2 * time.Second
	}
	m := joinTestMember(t, cli, cat.Cluster, o)
	id := m.ID()
	views := member.NewViews(cli, cat.Cluster)
	cfg := o.cfg
	if o.grace == 0 {
		o.grace = 5 * time.Second
	}
	if handlers != nil {
		cfg.Handlers = handlers
	}
	cfg.Clock, cfg.OnEvent, cfg.Grace = o.clock, rec.add, o.grace
	s, err := New(m, views, cat, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.armedHook, s.assignHook = o.armed, o.assign
	s.reads.Hold(o.holdReads)
	if o.writerKV != nil {
		s.writer = fenced.NewWriter(o.writerKV(s.cli))
		s.writer.UseJournal(s.member.Cluster(), s.member.ID(), s.cfg.JournalEntries)
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	viewsCtx, stopViews := context.WithCancel(context.Background())
	viewsDone := make(chan struct{})
	go func() { views.Run(viewsCtx); close(viewsDone) }()
	n := &node{id: id, member: m, views: views, sched: s, cancel: stopRun, done: make(chan error, 1)}
	go func() { n.done <- s.Run(runCtx) }()
	var once sync.Once
	var stopErr error
	n.stop = func() error {
		once.Do(func() {
			stopRun()
			stopErr = kiratest.Receive(t, n.done, 30*time.Second, "the scheduler's Run to return")
			leaveCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			m.Leave(leaveCtx) // bounded: a test may have stopped etcd
			cancel()
			stopViews()
			kiratest.Receive(t, viewsDone, 10*time.Second, "the views to stop")
		})
		return stopErr
	}
	t.Cleanup(func() { n.stop() })
	debugNodes[t] = append(debugNodes[t], n)
	return n
}

// joinTestMember joins cluster as a new member with o's TTL, clock and
// published history format. The caller leaves.
func joinTestMember(t testing.TB, cli *clientv3.Client, cluster string, o nodeOpts) *member.Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	published := member.Record{ID: member.NewID(), HistoryFormat: history.NewestFormat, Labels: o.labels}
	if o.readsFormat != 0 {
		published.HistoryFormat = max(0, o.readsFormat)
	}
	m, err := member.Join(ctx, cli, member.Config{Cluster: cluster, TTL: o.ttl, Record: published, Now: o.memberNow})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func catalog(cluster string, jobsSpec ...config.Job) *config.Catalog {
	for i := range jobsSpec {
		if jobsSpec[i].Partitions == 0 {
			jobsSpec[i].Partitions = 1
		}
	}
	return &config.Catalog{Cluster: cluster, Membership: config.Membership{LeaseTTL: 2 * time.Second}, Jobs: jobsSpec}
}

func noop(context.Context) error { return nil }

// ringOwners computes who the assignment prefers for every slot of cat
// among nodes (the catalog's jobs have no placement).
func ringOwners(t *testing.T, cat *config.Catalog, nodes ...*node) map[shard.Slot]string {
	t.Helper()
	var ids []string
	for _, n := range nodes {
		ids = append(ids, n.id)
	}
	var js []shard.Job
	for _, j := range cat.Jobs {
		js = append(js, shard.Job{Name: j.Name, Partitions: j.Partitions, Members: ids})
	}
	a, err := shard.Assign(js)
	if err != nil {
		t.Fatal(err)
	}
	out := map[shard.Slot]string{}
	for _, j := range cat.Jobs {
		for p := 0; p < j.Partitions; p++ {
			s := shard.Slot{Job: j.Name, Partition: p}
			out[s] = a.Owner(s)
		}
	}
	return out
}

// leadersMatch reports whether each slot is led by exactly the ring's choice.
func leadersMatch(want map[shard.Slot]string, nodes ...*node) bool {
	got := map[shard.Slot][]string{}
	for _, n := range nodes {
		for s := range n.sched.Leading() {
			got[s] = append(got[s], n.id)
		}
	}
	if len(got) != len(want) {
		return false
	}
	for s, owner := range want {
		if len(got[s]) != 1 || got[s][0] != owner {
			return false
		}
	}
	return true
}

// waitUntil is kiratest.WaitUntil that dumps every node's slots first when
// it gives up.
func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	if !kiratest.Poll(timeout, cond) {
		debugDump(t)
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Members joining one by one: every slot ends up led by exactly the member the
// assignment prefers; the first member releases what it is no longer preferred for;
// etcd agrees: each slot's lowest election key is its leader's, with the token
// as its create revision.
func TestEachSlotLedOnceAndSpread(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	cat := catalog("spread", config.Job{Name: "work", Schedule: "@every 1s", Partitions: 60, Handler: "noop"})
	rec := newRecorder()
	h := jobs.Handlers{"noop": noop}
	a := startNode(t, cli, cat, rec, h, nodeOpts{})
	waitUntil(t, "one member leading all slots", 15*time.Second, func() bool { return leadersMatch(ringOwners(t, cat, a), a) })
	b := startNode(t, cli, cat, rec, h, nodeOpts{})
	c := startNode(t, cli, cat, rec, h, nodeOpts{})
	want := ringOwners(t, cat, a, b, c)
	waitUntil(t, "slots spread over three members", 15*time.Second, func() bool { return leadersMatch(want, a, b, c) })

	for _, n := range []*node{a, b, c} {
		if l := len(n.sched.Leading()); l != 20 {
			t.Errorf("member %s leads %d of the 60 slots, want 20: leadership is not split evenly", n.id, l)
		}
	}
	if count(rec.all(), func(e Event) bool { return e.Kind == Released && e.Member == a.id }) == 0 {
		t.Error("first member never released a slot to the newcomers")
	}
	ctx := context.Background()
	for _, n := range []*node{a, b, c} {
		for s, tok := range n.sched.Leading() {
			resp, err := cli.Get(ctx, keyspace.Election(cat.Cluster, s)+"/", clientv3.WithFirstCreate()...)
			if err != nil || len(resp.Kvs) == 0 {
				t.Fatalf("slot %v: no election key: %v", s, err)
			}
			kv := resp.Kvs[0]
			if string(kv.Value) != n.id || fencing.Token(kv.CreateRevision) != tok {
				t.Fatalf("slot %v: etcd leader %s at %d; member %s believes token %d", s, kv.Value, kv.CreateRevision, n.id, tok)
			}
		}
	}
	// Executions carry the token of the election they were started under.
	rec.waitFor(t, "executions on every member", 15*time.Second, func(evs []Event) bool {
		for _, n := range []*node{a, b, c} {
			if count(evs, func(e Event) bool { return e.Kind == Started && e.Member == n.id }) == 0 {
				return false
			}
		}
		return true
	})
	for _, e := range rec.all() {
		if e.Kind == Started && (e.Execution.Token != e.Token || !e.Token.Valid()) {
			t.Fatalf("execution %+v carries token %d under election token %d", e.Execution, e.Execution.Token, e.Token)
		}
	}
}

// A slot's token never changes while one member holds it, across many lease
// renewals, and rises when the lease is lost and another member takes over.
func TestTokenStableOnRenewalRisesOnFailover(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	cat := catalog("token", config.Job{Name: "once", Schedule: "@every 1s", Handler: "noop"})
	rec := newRecorder()
	h := jobs.Handlers{"noop": noop}
	a := startNode(t, cli, cat, rec, h, nodeOpts{})
	b := startNode(t, cli, cat, rec, h, nodeOpts{})
	slot := shard.Slot{Job: "once"}
	want := ringOwners(t, cat, a, b)
	leader, other := a, b
	if want[slot] == b.id {
		leader, other = b, a
	}
	waitUntil(t, "the preferred member to lead", 15*time.Second, func() bool { return leadersMatch(want, a, b) })
	first := leader.sched.Leading()[slot]
	// Four executions span more than a TTL of 2s: at least three renewals.
	evs := rec.waitFor(t, "four executions by the leader", 20*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool { return e.Kind == Started && e.Member == leader.id && e.Token == first }) >= 4
	})
	if n := count(evs, func(e Event) bool { return e.Kind == Started && e.Member == leader.id && e.Token != first }); n != 0 {
		t.Fatalf("token changed while the leader held the slot (%d executions with another token)", n)
	}

	// Kill the leader's session behind its back.
	before := len(rec.all())
	if _, err := cli.Revoke(context.Background(), leader.member.Lease()); err != nil {
		t.Fatal(err)
	}
	evs = rec.waitFor(t, "the other member to take over", 15*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool { return e.Kind == Acquired && e.Member == other.id && e.Slot == slot }) > 0
	})
	for _, e := range evs[before:] {
		if e.Kind == Acquired && e.Member == other.id && e.Token <= first {
			t.Fatalf("token did not rise on failover: %d then %d", first, e.Token)
		}
	}
	select {
	case err := <-leader.done:
		if !errors.Is(err, member.ErrSessionLost) {
			t.Fatalf("leader's Run returned %v; want ErrSessionLost", err)
		}
		leader.done <- err
	case <-time.After(10 * time.Second):
		t.Fatal("leader kept running after losing its session")
	}
	// Whichever it noticed first (its key deleted, its record gone from the
	// view, its session done), the old leader gave the slot up.
	if _, still := leader.sched.Leading()[slot]; still {
		t.Fatal("old leader still believes it leads the slot")
	}
	if n := count(rec.all(), func(e Event) bool {
		return (e.Kind == Lost || e.Kind == Released) && e.Member == leader.id && e.Slot == slot && e.Token == first
	}); n == 0 {
		t.Fatal("old leader never reported giving the slot up")
	}
}

// A graceful stop hands the slot over in far less than a TTL: the lease
// revoke deletes the leader key at once instead of letting it expire.
func TestGracefulStopHandsOverAtOnce(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	const ttl = 10 * time.Second
	cat := catalog("handover", config.Job{Name: "once", Schedule: "@every 1s", Handler: "noop"})
	rec := newRecorder()
	h := jobs.Handlers{"noop": noop}
	a := startNode(t, cli, cat, rec, h, nodeOpts{ttl: ttl})
	b := startNode(t, cli, cat, rec, h, nodeOpts{ttl: ttl})
	slot := shard.Slot{Job: "once"}
	want := ringOwners(t, cat, a, b)
	waitUntil(t, "the preferred member to lead", 20*time.Second, func() bool { return leadersMatch(want, a, b) })
	leader, other := a, b
	if want[slot] == b.id {
		leader, other = b, a
	}
	stopped := time.Now()
	if err := leader.stop(); err != nil {
		t.Fatalf("graceful stop returned %v", err)
	}
	rec.waitFor(t, "takeover", ttl, func(evs []Event) bool {
		return count(evs, func(e Event) bool { return e.Kind == Acquired && e.Member == other.id && e.Slot == slot }) > 0
	})
	if took := time.Since(stopped); took > ttl/2 {
		t.Fatalf("handover took %s; a resign should not wait for the %s TTL", took, ttl)
	}
}

// A member that stops hearing keepalive acks (its etcd is gone) gives up
// when its trust window closes, by its own clock: the scheduling clock (manual
// here) stands still, so nothing but the trust deadline can end it. What was
// due before the deadline ran; nothing ran after it.
func TestNothingStartsAfterLeaseDeadline(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 900_000_000, time.UTC)
	clock := clock.NewManual(t0)
	cat := catalog("deadline", config.Job{Name: "once", Schedule: "@every 1s", Handler: "count"})
	var mu sync.Mutex
	var ran []time.Time
	h := jobs.Handlers{"count": func(ctx context.Context) error {
		e, _ := jobs.FromContext(ctx)
		mu.Lock()
		ran = append(ran, e.ScheduledTime)
		mu.Unlock()
		return nil
	}}
	rec := newRecorder()
	n := startNode(t, cli, cat, rec, h, nodeOpts{clock: clock})
	rec.waitFor(t, "acquired and ready to fire", 15*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool { return e.Kind == Raised }) > 0
	})
	clock.Advance(100 * time.Millisecond) // 12:00:01.000: inside the window
	rec.waitFor(t, "the first run to finish", 10*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool { return e.Kind == Finished }) == 1
	})
	etcd.Stop(0) // no more keepalive acks
	stopped := time.Now()
	select {
	case err := <-n.done:
		if !errors.Is(err, ErrUntrusted) && !errors.Is(err, member.ErrSessionLost) {
			t.Fatalf("Run returned %v; want ErrUntrusted", err)
		}
		t.Logf("gave up %s after etcd's Stop returned (TTL 2s): %v", time.Since(stopped).Round(time.Millisecond), err)
		n.done <- err
	case <-time.After(10 * time.Second):
		t.Fatal("member kept running past its lease deadline")
	}
	clock.Advance(5 * time.Second) // fires fall due: nobody is there to start them
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 1 || !ran[0].Equal(time.Date(2026, 11, 29, 12, 0, 1, 0, time.UTC)) {
		t.Fatalf("runs at %v; want only 12:00:01", ran)
	}
	if count(rec.all(), func(e Event) bool { return e.Kind == Started }) != 1 {
		t.Fatal("an execution started after the lease deadline")
	}
}

// Losing a slot cancels its running execution.
func TestSessionLossCancelsRunningExecutions(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	cat := catalog("cancel", config.Job{Name: "slow", Schedule: "@every 1s", Handler: "block"})
	started := make(chan struct{}, 16)
	h := jobs.Handlers{"block": func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}}
	rec := newRecorder()
	n := startNode(t, cli, cat, rec, h, nodeOpts{})
	select {
	case <-started:
	case <-time.After(15 * time.Second):
		t.Fatal("execution never started")
	}
	if _, err := cli.Revoke(context.Background(), n.member.Lease()); err != nil {
		t.Fatal(err)
	}
	evs := rec.waitFor(t, "the execution to end", 10*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool { return e.Kind == Finished }) > 0
	})
	for _, e := range evs {
		if e.Kind == Finished && e.Result.Outcome != jobs.Cancelled {
			t.Fatalf("execution ended %s; want cancelled", e.Result.Outcome)
		}
	}
}

var debugNodes = map[*testing.T][]*node{}

func debugDump(t *testing.T) {
	for _, n := range debugNodes[t] {
		for id, sl := range n.sched.slots {
			t.Logf("%s %s state=%s wanted=%v running=%d heap=%d token=%d view=%v", n.id[len(n.id)-4:], id, sl.phase, sl.wanted, len(sl.runs), sl.heapIndex, sl.token, n.views.Latest())
		}
	}
}

// Each execution is an OpenTelemetry span carrying job, partition, token,
// execution id and lateness; its history record keeps the span's trace id
// when the span is sampled, and none when it is not.
func TestExecutionsAreTraced(t *testing.T) {
	for _, sampled := range []bool{true, false} {
		t.Run(fmt.Sprintf("sampled=%v", sampled), func(t *testing.T) { testExecutionsAreTraced(t, sampled) })
	}
}

func testExecutionsAreTraced(t *testing.T, sampled bool) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	spans := tracetest.NewSpanRecorder()
	sampler := sdktrace.AlwaysSample()
	if !sampled {
		sampler = sdktrace.NeverSample()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans), sdktrace.WithSampler(sampler))
	defer tp.Shutdown(context.Background())

	cat := catalog("traced", config.Job{Name: "traced", Schedule: "@every 1s", Handler: "noop"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := member.Join(ctx, cli, member.Config{Cluster: cat.Cluster, TTL: 2 * time.Second, Record: member.Record{ID: member.NewID(), HistoryFormat: history.NewestFormat}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Leave(context.Background())
	views := member.NewViews(cli, cat.Cluster)
	rec := newRecorder()
	s, err := New(m, views, cat, Config{Handlers: jobs.Handlers{"noop": noop}, OnEvent: rec.add, Tracer: tp.Tracer("test")})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); views.Run(runCtx) }()
	go func() { defer wg.Done(); s.Run(runCtx) }()
	evs := rec.waitFor(t, "a finished execution", 15*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool { return e.Kind == Finished }) > 0
	})
	var fin Event
	for _, e := range evs {
		if e.Kind == Finished {
			fin = e
			break
		}
	}
	var recorded *history.Record
	waitUntil(t, "the execution's record", 10*time.Second, func() bool {
		hist, err := ops.ReadHistory(context.Background(), cli, cat.Cluster, "traced", 0, -1)
		for i := range hist {
			if err == nil && hist[i].ExecutionID == fin.Execution.ID {
				recorded = &hist[i]
			}
		}
		return recorded != nil
	})
	stop()
	wg.Wait()
	if !sampled {
		if recorded.TraceID != "" || len(spans.Ended()) != 0 {
			t.Fatalf("unsampled: the record keeps trace id %q; %d spans recorded", recorded.TraceID, len(spans.Ended()))
		}
		return
	}
	for _, sp := range spans.Ended() {
		attrs := map[string]string{}
		for _, kv := range sp.Attributes() {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		if attrs["kira.execution_id"] != fin.Execution.ID {
			continue
		}
		want := map[string]string{
			"kira.job": "traced", "kira.partition": "0", "kira.fencing_token": fin.Token.String(),
			"kira.outcome": "succeeded", "kira.member": m.ID(),
		}
		for k, v := range want {
			if attrs[k] != v {
				t.Errorf("span attribute %s = %q; want %q", k, attrs[k], v)
			}
		}
		if _, ok := attrs["kira.lateness_ns"]; !ok {
			t.Error("span has no lateness")
		}
		if id := sp.SpanContext().TraceID().String(); recorded.TraceID != id || fin.TraceID != id {
			t.Errorf("the record keeps trace id %q, the event %q; the span's is %s", recorded.TraceID, fin.TraceID, id)
		}
		return
	}
	t.Fatalf("no span for execution %s among %d spans", fin.Execution.ID, len(spans.Ended()))
}

// A candidacy key of ours that no campaign of ours owns (a cancelled
// campaign's create that reached etcd after its withdrawing delete) is
// deleted, or the slot's preferred member would wait behind it forever.
func TestOrphanedCandidacyKeyIsDeleted(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	cat := catalog("orphan", config.Job{Name: "idle", Schedule: "@hourly", Handler: "noop", Partitions: 20})
	rec := newRecorder()
	h := jobs.Handlers{"noop": noop}
	a := startNode(t, cli, cat, rec, h, nodeOpts{})
	b := startNode(t, cli, cat, rec, h, nodeOpts{})
	var slot shard.Slot
	waitUntil(t, "a and b share the slots", 15*time.Second, func() bool {
		la, lb := a.sched.Leading(), b.sched.Leading()
		for id := range lb {
			slot = id
		}
		return len(la)+len(lb) == 20 && len(la) > 0 && len(lb) > 0
	})
	// Plant the orphan: a's key in the election of a slot b leads.
	key := fmt.Sprintf("%s/%x", keyspace.Election("orphan", slot), a.member.Lease())
	if _, err := cli.Put(context.Background(), key, a.id, clientv3.WithLease(a.member.Lease())); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a deletes its orphaned key", 15*time.Second, func() bool {
		resp, err := cli.Get(context.Background(), key)
		return err == nil && len(resp.Kvs) == 0
	})
}

// Campaigns that talk to etcd at once are bounded (maxCampaigning), and a
// campaign waiting for another member's key gives its place up after
// campaignHold: slots held by a member that is gone but whose lease has not
// expired yet do not keep a free slot waiting for that lease.
func TestCampaignsWaitingForAKeyDoNotHoldUpFreeSlots(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	const blocked, free = 3 * maxCampaigning, 20
	cat := catalog("bound",
		config.Job{Name: "held", Schedule: "@hourly", Partitions: blocked, Handler: "noop"},
		config.Job{Name: "free", Schedule: "@hourly", Partitions: free, Handler: "noop"})
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Revoke(ctx, lease.ID)
	for p := range blocked {
		key := fmt.Sprintf("%s/%x", keyspace.Election(cat.Cluster, shard.Slot{Job: "held", Partition: p}), lease.ID)
		if _, err := cli.Put(ctx, key, "gone-member", clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	rec := newRecorder()
	a := startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{})
	waitUntil(t, "every free slot led while the held ones wait", 20*time.Second, func() bool {
		n := 0
		for s := range a.sched.Leading() {
			if s.Job == "held" {
				t.Fatalf("slot %v led while another member's key is first", s)
			}
			n++
		}
		return n == free
	})
}
