package scheduler

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/chaos"
	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/jobs"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var writerSeed = flag.Uint64("writer.seed", 0, "TestRandomWriterFaults: the schedule's seed (0: drawn from the clock)")

var errInjected = errors.New("injected: etcd refused the transaction")

// runLog is what the handlers ran, as the chaos checker reads a witness's
// log: each run's execution, accepted, or a replay of an id already run.
type runLog struct {
	mu       sync.Mutex
	seq      int64
	attempts []chaos.Attempt
	seen     map[string]bool
}

func (l *runLog) handler(ctx context.Context) error {
	e, _ := jobs.FromContext(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	a := chaos.Attempt{Seq: l.seq, At: time.Now(), Kind: chaos.Write, Job: e.Job, Partition: e.Partition, Member: e.Member,
		Token: e.Token, ExecutionID: e.ID, Scheduled: e.ScheduledTime, Outcome: chaos.Accepted}
	if l.seen[e.ID] {
		a.Outcome = chaos.Replay
	}
	l.seen[e.ID] = true
	l.attempts = append(l.attempts, a)
	return nil
}

// misfireUnderWriterFaults is the policy TestRandomWriterFaults judges:
// fire-once, which may drop fires inside a fault's window, or with
// -writer.fireall fire-all, which drops none. Replays are judged the same
// way under both.
func misfireUnderWriterFaults() config.Misfire {
	if *writerFireAll {
		return config.MisfireFireAll
	}
	return config.MisfireFireOnce
}

var writerFireAll = flag.Bool("writer.fireall", false, "TestRandomWriterFaults: judge a fire-all job")

// TestRandomWriterFaults runs a schedule drawn from a seed of faults of
// one member's state writer alone (its transactions hang, or etcd refuses
// them, or applies them and the answers are lost, for a while) and graceful restarts, on three members whose journals
// have 8 keys (they wrap round every second), and holds what ran to the
// chaos suite's checker: no fire run twice but the in-doubt fire of a member
// whose writer failed or hung, re-run once by a new holder; nothing dropped
// outside the faults' windows. The seed is logged; -writer.seed replays it.
func TestRandomWriterFaults(t *testing.T) {
	seed := *writerSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("writer fault schedule seed %d: replay it with -writer.seed %d", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	cat := catalog("wfaults", withDefaults(config.Job{Name: "tick", Schedule: "@every 1s", Partitions: 6, Handler: "rec", Misfire: misfireUnderWriterFaults()}))
	log := &runLog{seen: map[string]bool{}}
	rec := newRecorder()
	h := jobs.Handlers{"rec": log.handler}
	type running struct {
		n  *node
		kv *gatedKV
	}
	start := func() running {
		kv := &gatedKV{}
		n := startNode(t, cli, cat, rec, h, nodeOpts{cfg: Config{JournalEntries: 8}, writerKV: func(real clientv3.KV) clientv3.KV { kv.KV = real; return kv }})
		return running{n, kv}
	}
	members := []running{start(), start(), start()}
	waitUntil(t, "every slot led", 30*time.Second, func() bool {
		return len(rec.all()) > 0 && count(rec.all(), func(e Event) bool { return e.Kind == Finished }) >= 6
	})
	from := time.Now().Truncate(time.Second).Add(time.Second)
	var faults []chaos.Fault
	for i := 0; i < 6; i++ {
		k := rng.IntN(len(members))
		m := members[k]
		at := time.Now()
		switch kind := []string{"stall", "fail", "lose", "restart"}[rng.IntN(4)]; kind {
		case "restart":
			if err := m.n.stop(); err != nil {
				t.Fatalf("graceful stop: %v", err)
			}
			members[k] = start()
			faults = append(faults, chaos.Fault{Name: fmt.Sprintf("restart %d", k), Start: at, Heal: time.Now()})
		default:
			d := time.Duration(500+rng.IntN(2000)) * time.Millisecond
			switch kind {
			case "stall":
				m.kv.close()
			case "fail":
				m.kv.refusing(errInjected)
			case "lose":
				m.kv.losing(rpctypes.ErrTimeout)
			}
			time.Sleep(d)
			switch kind {
			case "stall":
				m.kv.open()
			case "fail":
				m.kv.refusing(nil)
			case "lose":
				m.kv.losing(nil)
			}
			m.kv.mu.Lock()
			hurt := m.kv.hurt
			m.kv.mu.Unlock()
			if hurt == 0 {
				t.Logf("the %s of member %d met no commit", kind, k)
			}
			// Its starts and results may go unrecorded meanwhile: its fires
			// are in doubt, and fire-all may have to catch them up late.
			faults = append(faults, chaos.Fault{Name: fmt.Sprintf("%s %d for %s", kind, k, d), Start: at, Heal: time.Now(),
				MayDrop: time.Since(at) + 3*time.Second, InDoubt: []string{m.n.id}})
		}
		t.Logf("fault %d: %s", i+1, faults[len(faults)-1].Name)
		time.Sleep(time.Duration(1000+rng.IntN(2000)) * time.Millisecond)
	}
	time.Sleep(4 * time.Second) // every fire of the window written
	to := time.Now().Truncate(time.Second).Add(-2 * time.Second)
	log.mu.Lock()
	attempts := append([]chaos.Attempt(nil), log.attempts...)
	log.mu.Unlock()
	rep := chaos.Check(attempts, chaos.Spec{Catalog: cat, From: from, To: to, Faults: faults, OnTime: time.Second})
	t.Logf("window %s → %s: expected %d, accepted %d, replays %d (forbidden %d), duplicates %d, missed %d", from.Format("15:04:05"),
		to.Format("15:04:05"), rep.Expected, rep.Accepted, rep.Replays, rep.Forbidden, rep.Duplicates, rep.Missed)
	for _, v := range rep.Violations {
		t.Errorf("violation: %s", v)
	}
	if !rep.OK() {
		for _, e := range rec.all() {
			if e.Kind != Notified && e.Kind != NotifyFailed {
				t.Logf("%s %s %s token %d member %.8s scheduled %s attempt %d %s %s: %s %v", e.At.Format("15:04:05.000"), e.Kind, e.Slot, e.Token, e.Member,
					e.Execution.ScheduledTime.Format("15:04:05.000"), e.Attempt, e.Cause, e.Result.Outcome, e.Reason, e.Result.Err)
			}
		}
	}
}

// answerLosingKV applies the first transaction, once armed, that journals
// a record of job, and answers it with etcd's request timeout (its answer
// lost); then, for outage, it refuses every transaction, as etcd electing
// a leader would.
type answerLosingKV struct {
	clientv3.KV
	cluster, job string
	outage       time.Duration
	fired        chan struct{}

	mu    sync.Mutex
	armed bool
	until time.Time
}

func (k *answerLosingKV) arm() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.armed = true
}

func (k *answerLosingKV) Txn(ctx context.Context) clientv3.Txn {
	return &answerLosingTxn{Txn: k.KV.Txn(ctx), kv: k}
}

type answerLosingTxn struct {
	clientv3.Txn
	kv  *answerLosingKV
	hit bool // journals a record of the job
}

func (t *answerLosingTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *answerLosingTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }
func (t *answerLosingTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	for _, op := range ops {
		if op.IsPut() && strings.HasPrefix(string(op.KeyBytes()), keyspace.Journals(t.kv.cluster)) && bytes.Contains(op.ValueBytes(), []byte(t.kv.job)) {
			t.hit = true
		}
	}
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *answerLosingTxn) Commit() (*clientv3.TxnResponse, error) {
	k := t.kv
	k.mu.Lock()
	refusing, lose := time.Now().Before(k.until), k.armed && t.hit
	k.mu.Unlock()
	if refusing {
		return nil, errInjected
	}
	resp, err := t.Txn.Commit()
	if err != nil || !lose {
		return resp, err
	}
	k.mu.Lock()
	k.armed, k.until = false, time.Now().Add(k.outage)
	k.mu.Unlock()
	close(k.fired)
	return nil, rpctypes.ErrTimeout
}

// A run's result that etcd applied but whose answer was lost stays the
// slot's state, however the holder's journal wraps before the holder is
// lost: the next holder does not run the finished fire again. The record
// carried the state, in a journal entry the writer reused without a copy
// (it took the write for failed), and the next holder ran it again as a
// retry.
func TestALostAnswerLeavesAFinishedFireFinished(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0) // 12:00:00.5
	cat := catalog("lostanswer",
		withDefaults(config.Job{Name: "main", Schedule: "@every 1m", Handler: "log"}),
		withDefaults(config.Job{Name: "noise", Schedule: "@every 1s", Handler: "noop"}))
	log := &runLog{seen: map[string]bool{}}
	rec := newRecorder()
	h := jobs.Handlers{"log": log.handler, "noop": noop}
	kv := &answerLosingKV{cluster: "lostanswer", job: "main", outage: 300 * time.Millisecond, fired: make(chan struct{})}
	a := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock, cfg: Config{JournalEntries: 4},
		writerKV: func(real clientv3.KV) clientv3.KV { kv.KV = real; return kv }})
	waitKind(t, rec, "a ready", 2, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
	advance(t, rec, clock, 500*time.Millisecond) // 12:00:01
	for clock.Now().Before(sec(59)) {
		advance(t, rec, clock, time.Second)
	}
	kv.arm()
	clock.Advance(time.Second) // 12:01:00: main fires; its result's answer is lost
	kiratest.Receive(t, kv.fired, 15*time.Second, "main's result written")
	for range 10 { // noise's records wrap the 4-entry journal
		advance(t, rec, clock, time.Second)
	}
	kiratest.WaitUntil(t, "noise's records written past the outage", 10*time.Second, func() bool {
		q, _ := a.sched.writer.Queued()
		return q == 0
	})
	// a is lost (kill -9, a node gone) before main's next fire at 12:02.
	if _, err := cli.Revoke(context.Background(), a.member.Lease()); err != nil {
		t.Fatal(err)
	}
	a.done <- kiratest.Receive(t, a.done, 30*time.Second, "a to give up")
	b := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock})
	waitKind(t, rec, "b ready", 2, func(e Event) bool { return e.Kind == Raised && e.Member == b.id })
	seenControl(t, cli, rec, "lostanswer")
	if n := count(rec.all(), func(e Event) bool {
		return e.Kind == Started && e.Slot.Job == "main" && e.Execution.ScheduledTime.Equal(sec(60))
	}); n != 1 {
		t.Fatalf("main's fire at 12:01:00 started %d times; want once: its success was committed", n)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, at := range log.attempts {
		if at.Outcome == chaos.Replay {
			t.Errorf("%s ran again (by %.8s) after its success was committed", at.ExecutionID, at.Member)
		}
	}
}
