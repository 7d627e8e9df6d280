package scheduler

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// runWitness is a witness of the runs of a handler: how many run at once,
// and the most that ever did.
type runWitness struct {
	now, most atomic.Int32
	hold      time.Duration
}

func (c *runWitness) handler(ctx context.Context) error {
	n := c.now.Add(1)
	defer c.now.Add(-1)
	for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
	}
	select {
	case <-time.After(c.hold):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startedBySlot returns, per slot, the scheduled times of the fires that
// started, each as many times as it started.
func startedBySlot(evs []Event) map[shard.Slot][]time.Time {
	out := map[shard.Slot][]time.Time{}
	for _, e := range evs {
		if e.Kind == Started {
			out[e.Slot] = append(out[e.Slot], e.Execution.ScheduledTime)
		}
	}
	return out
}

// everyFireOnce checks that each slot of job started each scheduled
// second of [from, to) exactly once.
func everyFireOnce(t *testing.T, evs []Event, job string, partitions int, from, to time.Time) {
	t.Helper()
	byTime := startedBySlot(evs)
	for p := range partitions {
		s := shard.Slot{Job: job, Partition: p}
		for at := from; at.Before(to); at = at.Add(time.Second) {
			n := 0
			for _, x := range byTime[s] {
				if x.Equal(at) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%s: the fire of %s started %d times, want once", s, at.Format("15:04:05"), n)
			}
		}
	}
}

// max_running: 2 on a 6-partition job fired every second over three
// members: never more than 2 of its runs at once (counted by the handler),
// every fire still runs once, and the fires that waited for a permit
// started late by the wait.
func TestMaxRunningAcrossMembers(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	cat := catalog("limited", config.Job{Name: "crawl", Schedule: "@every 1s", Partitions: 6, Handler: "crawl", MaxRunning: 2})
	w := &runWitness{hold: 100 * time.Millisecond}
	h := jobs.Handlers{"crawl": w.handler}
	rec := newRecorder()
	a := startNode(t, cli, cat, rec, h, nodeOpts{})
	b := startNode(t, cli, cat, rec, h, nodeOpts{})
	c := startNode(t, cli, cat, rec, h, nodeOpts{})
	want := ringOwners(t, cat, a, b, c)
	waitUntil(t, "slots spread over three members", 15*time.Second, func() bool { return leadersMatch(want, a, b, c) })
	from := time.Now().Truncate(time.Second).Add(2 * time.Second)
	to := from.Add(4 * time.Second)
	evs := waitWindow(t, rec, from, to, 6*4)
	if m := w.most.Load(); m != 2 {
		t.Fatalf("at most %d runs at once; want 2 (the limit, reached)", m)
	}
	everyFireOnce(t, evs, "crawl", 6, from, to)
	late := 0
	for _, e := range evs {
		if e.Kind == Started && !e.Execution.ScheduledTime.Before(from) && e.At.Sub(e.Execution.ScheduledTime) >= w.hold {
			late++
		}
	}
	// Of each second's 6 fires, 4 wait for at least one run of the hold.
	if late < 4*4 {
		t.Fatalf("%d fires started a hold or more late, want at least 16: they did not wait for permits", late)
	}
	if n := count(evs, func(e Event) bool { return e.Kind == Finished && e.Result.Outcome != jobs.Succeeded }); n > 0 {
		t.Fatalf("%d runs did not succeed", n)
	}
}

// A catalog pool shared by two jobs bounds their runs together; a job with
// no limit beside them is not held back.
func TestPoolSharedByTwoJobs(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	cat := catalog("pooled",
		config.Job{Name: "load", Schedule: "@every 1s", Partitions: 3, Handler: "pooled", Pool: "warehouse"},
		config.Job{Name: "export", Schedule: "@every 1s", Partitions: 3, Handler: "pooled", Pool: "warehouse"},
		config.Job{Name: "free", Schedule: "@every 1s", Partitions: 4, Handler: "free"})
	cat.Pools = map[string]int{"warehouse": 2}
	pooled := &runWitness{hold: 100 * time.Millisecond}
	free := &runWitness{hold: 300 * time.Millisecond}
	h := jobs.Handlers{"pooled": pooled.handler, "free": free.handler}
	rec := newRecorder()
	a := startNode(t, cli, cat, rec, h, nodeOpts{})
	b := startNode(t, cli, cat, rec, h, nodeOpts{})
	want := ringOwners(t, cat, a, b)
	waitUntil(t, "slots spread over two members", 15*time.Second, func() bool { return leadersMatch(want, a, b) })
	from := time.Now().Truncate(time.Second).Add(2 * time.Second)
	to := from.Add(3 * time.Second)
	evs := waitWindow(t, rec, from, to, 10*3)
	if m := pooled.most.Load(); m != 2 {
		t.Fatalf("at most %d runs of the pool at once; want 2 (its limit, reached)", m)
	}
	if m := free.most.Load(); m != 4 {
		t.Fatalf("at most %d runs of the unlimited job at once; want its 4 slots together", m)
	}
	everyFireOnce(t, evs, "load", 3, from, to)
	everyFireOnce(t, evs, "export", 3, from, to)
	everyFireOnce(t, evs, "free", 4, from, to)
}

// The permit of a member whose lease is revoked goes with the lease: its
// run is cancelled and the fire that waited on another member starts. The
// fire cancelled was never recorded finished, and is not waiting any more.
func TestPermitOfALostMemberIsFreed(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	cat := catalog("lost", config.Job{Name: "one", Schedule: "@every 1s", Partitions: 2, Handler: "block", MaxRunning: 1, Overlap: config.OverlapSkip})
	var mu sync.Mutex
	running := map[string]int{} // member → runs
	startedOn := make(chan string, 64)
	h := jobs.Handlers{"block": func(ctx context.Context) error {
		e, _ := jobs.FromContext(ctx)
		mu.Lock()
		running[e.Member]++
		mu.Unlock()
		startedOn <- e.Member
		<-ctx.Done() // runs until cancelled
		mu.Lock()
		running[e.Member]--
		mu.Unlock()
		return ctx.Err()
	}}
	rec := newRecorder()
	a := startNode(t, cli, cat, rec, h, nodeOpts{})
	b := startNode(t, cli, cat, rec, h, nodeOpts{})
	want := ringOwners(t, cat, a, b)
	waitUntil(t, "one slot on each member", 15*time.Second, func() bool { return leadersMatch(want, a, b) })
	first := receive(t, startedOn, "the first run")
	holder, waiter := a, b
	if first == b.id {
		holder, waiter = b, a
	}
	waitUntil(t, "the holder's and the waiter's permit keys", 10*time.Second, func() bool {
		resp, err := cli.Get(context.Background(), keyspace.Pool("lost", "job/one"), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 2
	})
	if _, err := cli.Revoke(context.Background(), holder.member.Lease()); err != nil {
		t.Fatal(err)
	}
	if next := receive(t, startedOn, "the waiter's run"); next != waiter.id {
		t.Fatalf("run started on %s after the holder's lease went; want the waiter %s", next, waiter.id)
	}
	rec.waitFor(t, "the lost holder's run to be cancelled", 10*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool {
			return e.Kind == Finished && e.Member == holder.id && e.Result.Outcome == jobs.Cancelled && !e.StartedAt.IsZero()
		}) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if running[holder.id] != 0 || running[waiter.id] != 1 {
		t.Fatalf("running %v; want only the waiter's run", running)
	}
}

// A member that lost its lease returns without waiting for the deletes of
// the permits its runs held: their keys go with the lease (revoked by the
// next incarnation, or expired), and on an etcd that cannot answer each
// delete would hold the member's rejoin back for the permits' whole bound.
// The chaos suite's etcd leader kill showed it: every member waited that
// bound before joining again, and fires were missed for that long.
func TestLostLeaseDoesNotWaitForPermitDeletes(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	cat := catalog("permit-lost", config.Job{Name: "held", Schedule: "@every 1s", Handler: "block", MaxRunning: 1, Overlap: config.OverlapSkip})
	started := make(chan struct{}, 16)
	h := jobs.Handlers{"block": func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done() // holds its permit until cancelled
		return ctx.Err()
	}}
	rec := newRecorder()
	n := startNode(t, cli, cat, rec, h, nodeOpts{})
	kiratest.Receive(t, started, 15*time.Second, "a run holding its permit")
	// Run's return is timed here: etcd's Stop below can outlast it.
	type ended struct {
		err error
		at  time.Time
	}
	returned, quit := make(chan ended, 1), make(chan struct{})
	go func() {
		select {
		case err := <-n.done:
			returned <- ended{err, time.Now()}
			n.done <- err // for the cleanup's stop
		case <-quit: // the test failed before Run returned
		}
	}()
	t.Cleanup(func() { close(quit) }) // runs before the node's stop
	// The permit's delete cannot be answered.
	etcd.Stop(0)
	evs := rec.waitFor(t, "the slot lost", 10*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool { return e.Kind == Lost }) > 0
	})
	var lost time.Time
	for _, e := range evs {
		if e.Kind == Lost {
			lost = e.At
			break
		}
	}
	end := kiratest.Receive(t, returned, 2*resignTimeout, "the scheduler's Run to return")
	if !errors.Is(end.err, ErrUntrusted) && !errors.Is(end.err, member.ErrSessionLost) {
		t.Fatalf("Run returned %v; want ErrUntrusted or ErrSessionLost", end.err)
	}
	// The permits' bound is resignTimeout; the rest of closing takes
	// milliseconds here.
	took := end.at.Sub(lost)
	if took >= resignTimeout/2 {
		t.Fatalf("Run returned %s after the slot was lost: it waited for the permit's delete", took.Round(time.Millisecond))
	}
	t.Logf("Run returned %s after the slot was lost", took.Round(time.Millisecond))
}

func receive(t *testing.T, ch chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(15 * time.Second):
		debugDump(t)
		t.Fatalf("timed out waiting for %s", what)
		return ""
	}
}

// A limited job's timeout counts from its run's start, not from its fire's
// time: a run that waited for its permit longer than the job's timeout
// still has the whole timeout to work.
func TestTimeoutCountsFromTheStartAfterTheWait(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	cat := catalog("timeout", config.Job{Name: "slow", Schedule: "@every 2s", Partitions: 2, Handler: "slow", MaxRunning: 1, Timeout: 450 * time.Millisecond})
	w := &runWitness{hold: 300 * time.Millisecond}
	rec := newRecorder()
	n := startNode(t, cli, cat, rec, jobs.Handlers{"slow": w.handler}, nodeOpts{})
	waitUntil(t, "both slots led", 15*time.Second, func() bool { return len(n.sched.Leading()) == 2 })
	from := time.Now()
	evs := rec.waitFor(t, "two fires of one instant to finish", 20*time.Second, func(evs []Event) bool {
		byTime := map[time.Time]int{}
		for _, e := range evs {
			if e.Kind == Finished && e.At.After(from) {
				byTime[e.Execution.ScheduledTime]++
				if byTime[e.Execution.ScheduledTime] == 2 {
					return true
				}
			}
		}
		return false
	})
	waited := false
	for _, e := range evs {
		if e.Kind != Finished || !e.At.After(from) {
			continue
		}
		if e.Result.Outcome != jobs.Succeeded {
			t.Fatalf("%s: %s (%v)", e.Slot, e.Result.Outcome, e.Result.Err)
		}
		waited = waited || e.StartedAt.Sub(e.Execution.ScheduledTime) >= w.hold
	}
	if !waited || w.most.Load() != 1 {
		t.Fatalf("no fire waited for the other's run (most at once %d)", w.most.Load())
	}
}

// A fire waiting for a permit on a member that stops gracefully ends
// cancelled at once, without having run; its start stays recorded, so the
// slot's next holder runs it once, under the same execution id, when the
// permit is free: one run per fire.
func TestWaitingFireOfAStoppedMemberRunsOnItsNextHolder(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	cat := catalog("handover", config.Job{Name: "one", Schedule: "@every 4s", Partitions: 2, Handler: "work", MaxRunning: 1,
		Misfire: config.MisfireFireOnce, CatchupWindow: time.Minute})
	w := &runWitness{hold: 1500 * time.Millisecond}
	rec := newRecorder()
	h := jobs.Handlers{"work": w.handler}
	a := startNode(t, cli, cat, rec, h, nodeOpts{})
	b := startNode(t, cli, cat, rec, h, nodeOpts{})
	want := ringOwners(t, cat, a, b)
	waitUntil(t, "one slot on each member", 15*time.Second, func() bool { return leadersMatch(want, a, b) })
	evs := rec.waitFor(t, "a run of the job", 15*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool { return e.Kind == Started }) > 0
	})
	var first Event
	for _, e := range evs {
		if e.Kind == Started {
			first = e
			break
		}
	}
	holder, waiter := a, b
	if first.Member == b.id {
		holder, waiter = b, a
	}
	var waiting shard.Slot
	for s, owner := range want {
		if owner == waiter.id {
			waiting = s
		}
	}
	at := first.Execution.ScheduledTime
	waitUntil(t, "the waiter's permit key", 10*time.Second, func() bool {
		resp, err := cli.Get(context.Background(), keyspace.Pool("handover", "job/one"), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 2
	})
	stopped := time.Now()
	if err := waiter.stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(stopped); took > 3*time.Second {
		t.Errorf("the stop took %s: it waited for the permit", took)
	}
	evs = rec.waitFor(t, "the waiting fire to run on the next holder", 20*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool {
			return e.Kind == Finished && e.Slot == waiting && e.Execution.ScheduledTime.Equal(at) && e.Member == holder.id
		}) > 0
	})
	var ran []Event
	cancelled := false
	for _, e := range evs {
		if e.Slot != waiting || !e.Execution.ScheduledTime.Equal(at) {
			continue
		}
		switch {
		case e.Kind == Started:
			ran = append(ran, e)
		case e.Kind == Finished && e.Member == waiter.id:
			cancelled = e.Result.Outcome == jobs.Cancelled && e.StartedAt.IsZero()
		}
	}
	if !cancelled {
		t.Error("the waiter's fire did not end cancelled without having started")
	}
	if len(ran) != 1 || ran[0].Member != holder.id || ran[0].Execution.ID != jobs.ExecutionID("one", waiting.Partition, at) || ran[0].Attempt != 2 {
		t.Fatalf("the waiting fire started %d times (%+v); want once, on the next holder, under its id, attempt 2", len(ran), ran)
	}
	if m := w.most.Load(); m != 1 {
		t.Fatalf("%d runs at once; want 1", m)
	}
}

// A member that stops while a limited job's fire waits for a permit and the
// slot's next fire is queued behind it starts neither: the waiting one ends
// cancelled, the queued one is left, and the slot's next holder runs both,
// the first under its id as the unfinished fire, the second as a missed
// one (fire-all), each once.
func TestQueuedFireOfAStoppingMemberIsLeftToTheNextHolder(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	cat := catalog("queued", config.Job{Name: "one", Schedule: "@every 2s", Partitions: 2, Handler: "work", MaxRunning: 1,
		Overlap: config.OverlapQueue, Misfire: config.MisfireFireAll, CatchupWindow: time.Minute})
	w := &runWitness{hold: 3 * time.Second}
	rec := newRecorder()
	h := jobs.Handlers{"work": w.handler}
	a := startNode(t, cli, cat, rec, h, nodeOpts{})
	b := startNode(t, cli, cat, rec, h, nodeOpts{})
	want := ringOwners(t, cat, a, b)
	waitUntil(t, "one slot on each member", 15*time.Second, func() bool { return leadersMatch(want, a, b) })
	// The first slot to start holds the permit for 3 s; the other's fire
	// waits, and its next one queues behind it (the first slot's queues too).
	var queued Event
	rec.waitFor(t, "a fire queued behind one waiting for a permit", 15*time.Second, func(evs []Event) bool {
		for _, e := range evs {
			if e.Kind == Queued && count(evs, func(s Event) bool { return s.Kind == Started && s.Slot == e.Slot }) == 0 {
				queued = e
				return true
			}
		}
		return false
	})
	waiter, holder := a, b
	if queued.Member == b.id {
		waiter, holder = b, a
	}
	slot := queued.Slot
	waiting := queued.Execution.ScheduledTime.Add(-2 * time.Second)
	if err := waiter.stop(); err != nil {
		t.Fatal(err)
	}
	evs := rec.waitFor(t, "both fires to run on the next holder", 40*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool {
			return e.Kind == Finished && e.Slot == slot && e.Member == holder.id && e.Execution.ScheduledTime.Equal(queued.Execution.ScheduledTime)
		}) > 0
	})
	for _, at := range []time.Time{waiting, queued.Execution.ScheduledTime} {
		var ran []Event
		for _, e := range evs {
			if e.Kind == Started && e.Slot == slot && e.Execution.ScheduledTime.Equal(at) {
				ran = append(ran, e)
			}
		}
		if len(ran) != 1 || ran[0].Member != holder.id || ran[0].Execution.ID != jobs.ExecutionID("one", slot.Partition, at) {
			t.Errorf("the fire of %s started %d times (%+v); want once, on the next holder, under its id", at.Format("15:04:05"), len(ran), ran)
		}
	}
	if m := w.most.Load(); m != 1 {
		t.Fatalf("%d runs at once; want 1", m)
	}
}

// waitWindow waits until n fires scheduled in [from, to) have finished, and
// returns the events so far.
func waitWindow(t *testing.T, rec *recorder, from, to time.Time, n int) []Event {
	t.Helper()
	return rec.waitFor(t, "the window's fires to finish", 20*time.Second, func(evs []Event) bool {
		return count(evs, func(e Event) bool {
			return e.Kind == Finished && !e.Execution.ScheduledTime.Before(from) && e.Execution.ScheduledTime.Before(to)
		}) >= n
	})
}
