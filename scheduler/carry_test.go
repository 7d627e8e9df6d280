package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/etcdtest"
	"github.com/kira-scheduler/kira/history"
	"github.com/kira-scheduler/kira/jobs"
	"github.com/kira-scheduler/kira/keyspace"
	"github.com/kira-scheduler/kira/operator"
	"github.com/kira-scheduler/kira/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// gatedKV holds the commits of transactions at a gate while it is closed,
// in front of a real etcd: a writer whose etcd is slow, on cue.
type gatedKV struct {
	clientv3.KV
	blocked chan struct{} // a commit reached the closed gate

	mu   sync.Mutex
	gate chan struct{} // nil while open
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
	gate := t.kv.gate
	t.kv.mu.Unlock()
	if gate != nil {
		t.kv.blocked <- struct{}{}
		select {
		case <-gate:
		case <-t.ctx.Done():
			return nil, t.ctx.Err()
		}
	}
	return t.Txn.Commit()
}

// A fire skipped while the slot's run waits for etcd to record its start
// is not written on its own: its record goes in the key of the slot's next
// record, and none is lost.
func TestSkipsWhileAStartIsUnrecordedGoWithTheNextWrite(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	clock := NewManualClock(t0)
	cat := catalog("carry", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop",
		Misfire: config.MisfireSkip, Overlap: config.OverlapSkip}))
	rec := newRecorder()
	gk := &gatedKV{blocked: make(chan struct{}, 16)}
	n := startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{ttl: 600 * time.Second, clock: clock, memberNow: clock.Now,
		writerKV: func(kv clientv3.KV) clientv3.KV { gk.KV = kv; return gk }})
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
	ids, err := operator.RequestRun(ctx, cli, "carry", []shard.Slot{{Job: "tick"}})
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
		hist, err := operator.ReadHistory(ctx, cli, "carry", "tick", 0, 50)
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
	// The skip is carried in the run's own key, not a key of its own.
	resp, err := cli.Get(ctx, keyspace.SlotHistory("carry", shard.Slot{Job: "tick"}), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		st, err := history.DecodeEntry("carry", kv)
		if err != nil {
			t.Fatal(err)
		}
		if st.ExecutionID == skipped[0] {
			t.Fatalf("the skip has a key of its own: %s", kv.Key)
		}
		if st.ExecutionID == ids[0] && (st.Skipped == nil || st.Skipped.ExecutionID != skipped[0]) {
			t.Fatalf("the manual run's record carries %+v; want the skip %s", st.Skipped, skipped[0])
		}
	}
}

// Skips of a slot whose record is still waiting in the writer's queue (etcd
// is behind) are added to that record: past capacity a skip costs etcd no
// key of its own, and the history still accounts for every fire.
func TestSkipsWaitingForEtcdAreMerged(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	clock := NewManualClock(t0)
	cat := catalog("merge", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "block",
		Misfire: config.MisfireSkip, Overlap: config.OverlapSkip}))
	release := make(chan struct{})
	block := func(ctx context.Context) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	rec := newRecorder()
	gk := &gatedKV{blocked: make(chan struct{}, 16)}
	n := startNode(t, cli, cat, rec, jobs.Handlers{"block": block}, nodeOpts{ttl: 600 * time.Second, clock: clock, memberNow: clock.Now,
		writerKV: func(kv clientv3.KV) clientv3.KV { gk.KV = kv; return gk }})
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
		hist, err := operator.ReadHistory(ctx, cli, "merge", "tick", 0, 50)
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
