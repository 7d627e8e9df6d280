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
// is not written on its own: its record goes with the slot's next write, and
// none is lost.
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
	for range 2 {
		e := advance(t, rec, clock, 10*time.Second)
		if e.Kind != Skipped || e.Reason != "previous run still running" {
			t.Fatalf("fire at %v: %s %q; want skipped, previous run still running", e.At, e.Kind, e.Reason)
		}
		skipped = append(skipped, e.Execution.ID)
	}
	queued, _ := n.sched.writer.Queued()
	if queued != 0 {
		t.Fatalf("%d writes queued behind the unrecorded start; want the skips carried, none queued", queued)
	}

	gk.open()
	waitKind(t, rec, "the manual run", 1, func(e Event) bool { return e.Kind == Finished && e.Cause == history.CauseManual })
	want := map[string]string{ids[0]: "succeeded", skipped[0]: history.OutcomeSkipped, skipped[1]: history.OutcomeSkipped}
	waitUntil(t, "the run's and both skips' records", 10*time.Second, func() bool {
		hist, err := operator.ReadHistory(ctx, cli, "carry", "tick", 0, 50)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, r := range hist {
			if o, ok := want[r.ExecutionID]; ok && o == r.Outcome {
				found++
			}
		}
		return found == len(want)
	})
}
