package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// gatedKV holds the commits of transactions at a gate while it is closed,
// or fails them while it refuses, in front of a real etcd: a writer whose
// etcd is slow, or refuses it, on cue.
type gatedKV struct {
	clientv3.KV
	blocked chan struct{} // a commit reached the closed gate; nil: not told

	// committed, if set, runs after every commit, once it is answered: a
	// write of another member that lands right after.
	committed func()

	mu     sync.Mutex
	gate   chan struct{} // nil while open
	refuse error         // non-nil: every commit fails with it
	lose   error         // non-nil: every commit is applied, then answered with it
	hurt   int           // commits held, refused or answered with lose
}

// losing makes every commit apply and then answer err, as etcd does when
// the answer of an applied request is lost (nil: answer again).
func (g *gatedKV) losing(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lose = err
}

// refusing makes every commit fail with err (nil: commit again).
func (g *gatedKV) refusing(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refuse = err
}

func (g *gatedKV) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
}

func (g *gatedKV) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.gate)
	g.gate = nil
}

func (g *gatedKV) Txn(ctx context.Context) clientv3.Txn {
	return &gatedTxn{Txn: g.KV.Txn(ctx), kv: g, ctx: ctx}
}

type gatedTxn struct {
	clientv3.Txn
	kv  *gatedKV
	ctx context.Context
}

func (t *gatedTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *gatedTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *gatedTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *gatedTxn) Commit() (*clientv3.TxnResponse, error) {
	t.kv.mu.Lock()
	gate, refuse, lose := t.kv.gate, t.kv.refuse, t.kv.lose
	if gate != nil || refuse != nil || lose != nil {
		t.kv.hurt++
	}
	t.kv.mu.Unlock()
	if refuse != nil {
		return nil, refuse
	}
	if gate != nil {
		if t.kv.blocked != nil {
			t.kv.blocked <- struct{}{}
		}
		select {
		case <-gate:
		case <-t.ctx.Done():
			return nil, t.ctx.Err()
		}
	}
	resp, err := t.Txn.Commit()
	if t.kv.committed != nil {
		t.kv.committed()
	}
	if err == nil && lose != nil {
		return nil, lose
	}
	return resp, err
}

// newGatedKV is a gate for nodeOpts.gate.
func newGatedKV() *gatedKV { return &gatedKV{blocked: make(chan struct{}, 16)} }

// blockUntil is a handler whose runs last until release is closed or they
// are cancelled.
func blockUntil(release <-chan struct{}) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
}

// storedOf is every record of slot s stored in etcd, in its ring or in a
// member's journal, each with the key that holds it.
func storedOf(t *testing.T, cli *clientv3.Client, cluster string, s shard.Slot) map[string][]history.Stored {
	t.Helper()
	ctx := context.Background()
	out := map[string][]history.Stored{}
	ring, err := cli.Get(ctx, keyspace.SlotHistory(cluster, s), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range ring.Kvs {
		st, err := history.DecodeEntry(cluster, kv)
		if err != nil {
			t.Fatal(err)
		}
		out[string(kv.Key)] = append(out[string(kv.Key)], st)
	}
	journals, err := cli.Get(ctx, keyspace.Journals(cluster), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range journals.Kvs {
		member, ok := keyspace.ParseJournalEntry(cluster, string(kv.Key))
		if !ok {
			continue
		}
		items, err := history.DecodeJournal(member, kv.Value)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			if it.Slot == s {
				out[string(kv.Key)] = append(out[string(kv.Key)], it.Stored)
			}
		}
	}
	return out
}

// carriedIn fails t if skip has a record of its own among stored, and
// reports whether run's record is there, carrying skip.
func carriedIn(t *testing.T, stored map[string][]history.Stored, run, skip string) bool {
	t.Helper()
	found := false
	for key, sts := range stored {
		for _, st := range sts {
			if st.ExecutionID == skip {
				t.Fatalf("the skip has a record of its own, in %s", key)
			}
			if st.ExecutionID == run {
				if st.Skipped == nil || st.Skipped.ExecutionID != skip {
					t.Fatalf("the run's record carries %+v; want the skip %s", st.Skipped, skip)
				}
				found = true
			}
		}
	}
	return found
}

// A fire skipped while the slot's run waits for etcd to record its start
// is not written on its own: its record goes in the key of the slot's next
// record, and none is lost.
func TestSkipsWhileAStartIsUnrecordedGoWithTheNextWrite(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	clock := clock.NewManual(t0)
	cat := catalog("carry", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop",
		Misfire: config.MisfireSkip, Overlap: config.OverlapSkip}))
	rec := newRecorder()
	gk := newGatedKV()
	n := startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{manual: clock, gate: gk})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	// The takeover's last write records the start of 12:00:10 ahead.
	waitUntil(t, "the writes of the takeover committed", 10*time.Second, func() bool {
		st, _, _, err := readAcquired(ctx, cli, "carry", shard.Slot{Job: "tick"})
		if err != nil {
			t.Fatal(err)
		}
		if !st.Started.Equal(sec(10)) {
			return false
		}
		queued, inFlight := n.sched.writer.Queued()
		return queued == 0 && inFlight == 0
	})

	gk.close()
	ids, err := ops.RequestRun(ctx, cli, "carry", []shard.Slot{{Job: "tick"}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-gk.blocked: // the manual run's start record waits at the gate
	case <-time.After(10 * time.Second):
		t.Fatal("the manual run's start was never written")
	}
	var skipped []string
	var last time.Time
	for range 2 {
		e := advance(t, rec, clock, 10*time.Second)
		if e.Kind != Skipped || e.Reason != "previous run still running" {
			t.Fatalf("fire at %v: %s %q; want skipped, previous run still running", e.At, e.Kind, e.Reason)
		}
		skipped = append(skipped, e.Execution.ID)
		last = e.Execution.ScheduledTime
	}
	queued, _ := n.sched.writer.Queued()
	if queued != 0 {
		t.Fatalf("%d writes queued behind the unrecorded start; want the skips carried, none queued", queued)
	}

	gk.open()
	waitKind(t, rec, "the manual run", 1, func(e Event) bool { return e.Kind == Finished && e.Cause == history.CauseManual })
	// The second skip was added to the first's carried record.
	want := map[string]string{ids[0]: "succeeded", skipped[0]: history.OutcomeSkipped}
	waitUntil(t, "the run's and the skips' records", 10*time.Second, func() bool {
		hist, err := ops.ReadHistory(ctx, cli, "carry", "tick", 0, 50)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, r := range hist {
			if r.ExecutionID == skipped[1] {
				t.Fatalf("the second skip has a record of its own: %+v", r)
			}
			if r.ExecutionID == skipped[0] && (r.Repeats != 1 || r.LastScheduledTime == nil || !r.LastScheduledTime.Equal(last)) {
				t.Fatalf("the first skip's record %+v; want it to stand for the second (repeats 1, last at %v)", r, last)
			}
			if o, ok := want[r.ExecutionID]; ok && o == r.Outcome {
				found++
			}
		}
		return found == len(want)
	})
	// The skip is carried in the run's own record, not a record of its own.
	if !carriedIn(t, storedOf(t, cli, "carry", shard.Slot{Job: "tick"}), ids[0], skipped[0]) {
		t.Fatal("the manual run's record is not stored")
	}
}

// Skips of a slot whose record is still waiting in the writer's queue (etcd
// is behind) are added to that record: past capacity a skip costs etcd no
// key of its own, and the history still accounts for every fire.
func TestSkipsWaitingForEtcdAreMerged(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	clock := clock.NewManual(t0)
	cat := catalog("merge", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "block",
		Misfire: config.MisfireSkip, Overlap: config.OverlapSkip}))
	release := make(chan struct{})
	block := blockUntil(release)
	rec := newRecorder()
	gk := newGatedKV()
	n := startNode(t, cli, cat, rec, jobs.Handlers{"block": block}, nodeOpts{manual: clock, gate: gk})
	waitKind(t, rec, "ready", 1, func(e Event) bool { return e.Kind == Raised })
	waitUntil(t, "the writes of the takeover committed", 10*time.Second, func() bool {
		queued, inFlight := n.sched.writer.Queued()
		return queued == 0 && inFlight == 0
	})
	if e := advance(t, rec, clock, 10*time.Second); e.Kind != Started {
		t.Fatalf("the fire at 12:00:10: %s; want started", e.Kind)
	}

	gk.close()
	var skips []Event
	for i := range 4 {
		e := advance(t, rec, clock, 10*time.Second)
		if e.Kind != Skipped || e.Reason != "previous run still running" {
			t.Fatalf("fire at %v: %s %q; want skipped, previous run still running", e.At, e.Kind, e.Reason)
		}
		skips = append(skips, e)
		if i == 0 {
			select { // the first skip's write has left the queue: it waits at the gate
			case <-gk.blocked:
			case <-time.After(10 * time.Second):
				t.Fatal("the first skip's record was never written")
			}
		}
	}
	if queued, _ := n.sched.writer.Queued(); queued != 1 {
		t.Fatalf("%d writes queued; want the second skip's, standing for the third and fourth too", queued)
	}
	gk.open()
	close(release)
	waitUntil(t, "the skips' records", 10*time.Second, func() bool {
		hist, err := ops.ReadHistory(ctx, cli, "merge", "tick", 0, 50)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]history.Record{}
		for _, r := range hist {
			byID[r.ExecutionID] = r
		}
		first, merged := byID[skips[0].Execution.ID], byID[skips[1].Execution.ID]
		if _, ok := byID[skips[2].Execution.ID]; ok {
			t.Fatalf("the third skip has a record of its own: %+v", hist)
		}
		if first.Outcome == "" || merged.Outcome == "" {
			return false
		}
		last := skips[3].Execution.ScheduledTime
		if first.Repeats != 0 || merged.Repeats != 2 || merged.LastScheduledTime == nil || !merged.LastScheduledTime.Equal(last) {
			t.Fatalf("skip records %+v and %+v; want the first alone and the second standing for two more, up to %v", first, merged, last)
		}
		return true
	})
}

// A fire skipped while the slot's run is running and the writer is behind
// (another slot's write has waited in its queue past behindAfter) is not
// written on its own either: past capacity the skips of runs that outlast
// their period would otherwise cost etcd as much as the runs, and the
// writer's queue would never drain. Its record goes with the run's result.
func TestSkipsWhileTheWriterIsBehindGoWithTheRunsResult(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	clock := clock.NewManual(t0)
	cat := catalog("behind",
		withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "block", Misfire: config.MisfireSkip, Overlap: config.OverlapSkip}),
		withDefaults(config.Job{Name: "other", Schedule: "@every 1h", Handler: "noop"}))
	release := make(chan struct{})
	block := blockUntil(release)
	rec := newRecorder()
	gk := newGatedKV()
	n := startNode(t, cli, cat, rec, jobs.Handlers{"block": block, "noop": noop}, nodeOpts{manual: clock, gate: gk})
	waitKind(t, rec, "ready", 2, func(e Event) bool { return e.Kind == Raised })
	waitUntil(t, "the writes of the takeover committed", 10*time.Second, func() bool {
		queued, inFlight := n.sched.writer.Queued()
		return queued == 0 && inFlight == 0
	})
	e := advance(t, rec, clock, 10*time.Second)
	if e.Kind != Started {
		t.Fatalf("the fire at 12:00:10: %s; want started", e.Kind)
	}
	run := e.Execution.ID

	// Another slot's two manual runs: the first's start waits at the gate,
	// the second's in the queue behind it, for longer than behindAfter.
	gk.close()
	other := []shard.Slot{{Job: "other"}}
	if _, err := ops.RequestRun(ctx, cli, "behind", other); err != nil {
		t.Fatal(err)
	}
	kiratest.Receive(t, gk.blocked, 10*time.Second, "the first manual run's start at the gate")
	if _, err := ops.RequestRun(ctx, cli, "behind", other); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the writer behind", 10*time.Second, n.sched.writer.Behind)
	if queued, oldest := n.sched.StateWrites(); queued != 1 || oldest < 250*time.Millisecond {
		t.Fatalf("state writes: %d queued, the oldest for %v; want the second manual run's, for 250 ms or more", queued, oldest)
	}

	e = advance(t, rec, clock, 10*time.Second)
	if e.Kind != Skipped || e.Reason != "previous run still running" {
		t.Fatalf("fire at %v: %s %q; want skipped, previous run still running", e.At, e.Kind, e.Reason)
	}
	if queued, _ := n.sched.writer.Queued(); queued != 1 {
		t.Fatalf("%d writes queued; want only the second manual run's, the skip carried", queued)
	}
	gk.open()
	close(release)
	waitUntil(t, "the run's record, carrying the skip", 10*time.Second, func() bool {
		return carriedIn(t, storedOf(t, cli, "behind", shard.Slot{Job: "tick"}), run, e.Execution.ID)
	})
}
