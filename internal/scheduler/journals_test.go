package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/clock"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A member's records stay in its journal until copied: by the member as it
// hands the slot over (if b is preferred, as b joins), else by the member
// that takes the slot over once a has stopped (a stop revokes the lease,
// with no write per slot), which reads a's journal. Either way b knows
// what ran, the records are in the slot's ring, and the slot's state key
// is b's. From then on a's journal holds nothing a reader needs, and it is
// deleted once a has left; until then, it is not. The history still has
// every run.
func TestJournalOfALeftMemberIsDeletedOnceItsSlotsAreTaken(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	clock := clock.NewManual(t0)
	cat := catalog("sweep", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop"}))
	rec := newRecorder()
	h := jobs.Handlers{"noop": noop}
	a := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock})
	waitKind(t, rec, "a ready", 1, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
	clock.Advance(10 * time.Second)
	waitKind(t, rec, "a's first run", 1, func(e Event) bool { return e.Kind == Finished && e.Member == a.id })
	clock.Advance(10 * time.Second)
	waitKind(t, rec, "a's second run", 2, func(e Event) bool { return e.Kind == Finished && e.Member == a.id })
	journalKeys := func() int64 {
		resp, err := cli.Get(ctx, keyspace.Journal("sweep", a.id), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	waitUntil(t, "a's records in its journal", 10*time.Second, func() bool { return journalKeys() > 0 })

	// b sweeps (here also by hand, so the sweeps surely happened), but a
	// is still a member: its journal stays.
	b := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock,
		cfg: Config{JournalSweep: 50 * time.Millisecond}})
	for range 3 {
		if err := b.sched.sweepOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if journalKeys() == 0 {
		t.Fatal("the journal of a member still in the view was deleted")
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	waitKind(t, rec, "b ready", 1, func(e Event) bool { return e.Kind == Raised && e.Member == b.id })
	waitUntil(t, "a's journal deleted", 10*time.Second, func() bool { return journalKeys() == 0 })
	if got := started(rec.all(), b.id); len(got) != 0 {
		t.Fatalf("b started %d runs (the first %v); want none: a ran every fire so far", len(got), got[0].Execution.ScheduledTime)
	}

	slot := shard.Slot{Job: "tick"}
	resp, err := cli.Get(ctx, keyspace.SlotHistory("sweep", slot), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	copied := 0
	for _, kv := range resp.Kvs {
		st, err := history.DecodeEntry("sweep", kv)
		if err != nil {
			t.Fatal(err)
		}
		if st.Member == a.id && st.Seq != nil {
			copied++
		}
	}
	if copied < 2 {
		t.Fatalf("%d of a's records copied to the ring; want its two runs", copied)
	}
	bRaised := filter(rec.all(), func(e Event) bool { return e.Kind == Raised && e.Member == b.id })
	st, _, _, err := readAcquired(ctx, cli, "sweep", slot)
	if err != nil || len(bRaised) != 1 || st.Token != bRaised[0].Token || !st.Finished.Equal(sec(20)) {
		t.Fatalf("the slot's state %+v (%v); want b's, with a's last run finished", st, err)
	}
	hist, err := ops.ReadHistory(ctx, cli, "sweep", "tick", -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, r := range hist {
		if r.Member == a.id && r.Outcome == "succeeded" {
			ran++
		}
	}
	if ran != 2 {
		t.Fatalf("the history has %d of a's runs; want 2", ran)
	}
}

// The sweep deletes a departed member's journal only as it read it: an
// entry written after the read keeps the journal for a later sweep.
func TestSweepSparesAJournalWrittenSinceItsRead(t *testing.T) {
	cat := catalog("spare", withDefaults(config.Job{Name: "tick", Schedule: "@every 10s", Handler: "noop"}))
	s, cli := unrunScheduler(t, cat)
	ctx := context.Background()
	first, err := cli.Put(ctx, keyspace.JournalEntry("spare", "gone", 0), "j")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, keyspace.JournalEntry("spare", "gone", 1), "j"); err != nil {
		t.Fatal(err)
	}
	count := func() int64 {
		resp, err := cli.Get(ctx, keyspace.Journal("spare", "gone"), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	if err := s.deleteJournal(ctx, "gone", first.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d entries left after a sweep that read the journal before its second entry; want both kept", n)
	}
	now, err := cli.Get(ctx, keyspace.Journal("spare", "gone"), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.deleteJournal(ctx, "gone", now.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d entries left after a sweep that read the whole journal; want none", n)
	}
}

// A member that stops with nothing running leaves its slots to the lease
// revoke, with their records in its journal: the next holder copies every
// one among the slot's history_limit newest to the ring, in as many writes
// as it takes, so none is lost once the journal is swept.
func TestTakeoverCopiesEveryRecordOfTheLimit(t *testing.T) {
	const limit = 150
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	clock := clock.NewManual(t0)
	cat := catalog("copies", withDefaults(config.Job{Name: "tick", Schedule: "@every 1s", Handler: "noop", HistoryLimit: limit}))
	rec := newRecorder()
	h := jobs.Handlers{"noop": noop}
	a := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock})
	waitKind(t, rec, "a ready", 1, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
	for i := 1; i <= limit; i++ {
		clock.Advance(time.Second)
		waitKind(t, rec, "a's run", i, func(e Event) bool { return e.Kind == Finished && e.Member == a.id })
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	b := startNode(t, cli, cat, rec, h, nodeOpts{manual: clock})
	waitKind(t, rec, "b ready", 1, func(e Event) bool { return e.Kind == Raised && e.Member == b.id })
	slot := shard.Slot{Job: "tick"}
	waitUntil(t, "a's records in the slot's ring", 10*time.Second, func() bool {
		resp, err := cli.Get(context.Background(), keyspace.SlotHistory("copies", slot), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count == limit
	})
}

// A journal holds history only, so the sweep deletes a left member's
// journal whose slots no job of the catalog has; but a record of an earlier
// version carries its slot's state, and a journal holding one stays until
// a later holder has written that slot's state key.
func TestSweepKeepsAJournalHoldingAnEarlierVersionsState(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	cat := catalog("oldsweep", withDefaults(config.Job{Name: "tick", Schedule: "@every 1h", Handler: "noop"}))
	rec := newRecorder()
	a := startNode(t, cli, cat, rec, jobs.Handlers{"noop": noop}, nodeOpts{})
	waitKind(t, rec, "a ready", 1, func(e Event) bool { return e.Kind == Raised && e.Member == a.id })
	gone := shard.Slot{Job: "removed"} // a job the catalog no longer has
	journalOf := func(member string, state *history.SlotState) {
		t.Helper()
		seq := int64(0)
		r := history.Stored{Record: history.Record{Job: gone.Job, ExecutionID: "x", Member: member, Token: 7, ScheduledTime: t0, Outcome: "succeeded", Attempt: 1},
			State: state, Seq: &seq, Limit: 10}
		value := history.EncodeJournal(member, []history.JournalItem{{Slot: gone, Stored: r}})
		if _, err := cli.Put(ctx, keyspace.JournalEntry("oldsweep", member, 0), string(value)); err != nil {
			t.Fatal(err)
		}
	}
	journalOf("old", &history.SlotState{Token: 7, Member: "old", Started: t0, Finished: t0, HistorySeq: 1})
	journalOf("new", nil)
	if err := a.sched.sweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	left := func(member string) int64 {
		resp, err := cli.Get(ctx, keyspace.Journal("oldsweep", member), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	if left("new") != 0 {
		t.Fatal("the journal of a left member holding history only of a removed job was kept")
	}
	if left("old") == 0 {
		t.Fatal("the journal holding an earlier version's state of a slot nobody has taken over was deleted")
	}
}
