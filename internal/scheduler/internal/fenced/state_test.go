package fenced

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/history/journal"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// resultRecord is record seq of slot s under claim c as the scheduler
// writes a run's result: fire seq finished, fire seq+1 recorded ahead.
func resultRecord(s shard.Slot, c fencing.Claim, seq int64, limit int) Record {
	r := journalRecord(s, seq, limit)
	st := *r.Stored.State
	st.Token, st.Member, st.Started = c.Token, "m", st.Finished.Add(time.Second)
	r.Stored.State = &st
	return r
}

// newHolderReads is s's state as a new holder reads it: the journals, then
// the state key and the ring at the journals' revision.
func newHolderReads(t *testing.T, cli *clientv3.Client, s shard.Slot) history.SlotState {
	t.Helper()
	ctx := context.Background()
	js, rev, err := journal.NewCache(cli, "c").SlotsNow(ctx, []shard.Slot{s})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Txn(ctx).Then(clientv3.OpGet(keyspace.State("c", s), clientv3.WithRev(rev)),
		clientv3.OpGet(keyspace.SlotHistory("c", s), clientv3.WithPrefix(), clientv3.WithRev(rev))).Commit()
	if err != nil {
		t.Fatal(err)
	}
	st, err := history.NewestState(s, resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs, js[s])
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A write etcd applied but answered with an error leaves the slot's state
// as it committed it, whatever the writer does next: the older record it
// still takes for the slot's newest is copied to the ring when its entry is
// reused (and carries no state there), and the entry that holds the
// applied record is reused without a copy (its record is lost to the
// history, not its state). When records carried their state, the copy
// outranked the applied state and the reuse erased it: a new holder ran the
// finished fire again.
func TestAnAppliedWriteAnsweredWithAnErrorKeepsItsState(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	kv := &failingKV{KV: cli}
	a, f := shard.Slot{Job: "a"}, shard.Slot{Job: "f"}
	ca, cf := heldClaim(t, cli, "/leader/a"), heldClaim(t, cli, "/leader/f")
	w := NewWriter(kv)
	w.index = newIndex("c", "m", 3)
	const limit = 10
	write := func(c fencing.Claim, r Record) error {
		t.Helper()
		done := make(chan error, 1)
		w.Enqueue(Write{Claim: c, Records: []Record{r}, Done: done})
		commitNext(t, w)
		return kiratest.Receive(t, done, 10*time.Second, "the write's answer")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	applied := resultRecord(a, ca, 1, limit)
	must(write(ca, resultRecord(a, ca, 0, limit))) // entry 0: a0
	kv.loseNext.Store(true)
	if err := write(ca, applied); err == nil { // entry 1: a1, applied, its answer lost
		t.Fatal("the write whose answer was lost was answered nil")
	}
	want := *applied.Stored.State
	check := func(when string) {
		t.Helper()
		if st := newHolderReads(t, cli, a); !reflect.DeepEqual(st, want) {
			t.Fatalf("%s, a takeover reads a's state %+v; want a1's, applied: %+v", when, st, want)
		}
	}
	check("right after the write")
	for seq := range int64(2) { // entries 2, then 0 reused: a0, which the writer takes for a's newest, copied
		must(write(cf, resultRecord(f, cf, seq, limit)))
	}
	if r := ringRecord(t, cli, a, 0, limit); r == nil || r.State != nil {
		t.Fatalf("a0 in the ring: %+v; want it copied, without a state", r)
	}
	check("after a0 was copied to the ring")
	must(write(cf, resultRecord(f, cf, 2, limit))) // entry 1 reused: a1's record is gone
	check("after a1's entry was reused")
}

// A journal entry holds records, never a state: the state a write's newest
// record carries is put in its slot's state key in the same transaction,
// also when the write's guard fails.
func TestJournalEntriesHoldNoState(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	a := shard.Slot{Job: "a"}
	ca := heldClaim(t, cli, "/leader/a")
	w := NewWriter(cli)
	w.index = newIndex("c", "m", 4)
	failing := clientv3.Compare(clientv3.Version("/trigger"), ">", 0) // no such key
	r0, r1 := resultRecord(a, ca, 0, 10), resultRecord(a, ca, 1, 10)
	done := make(chan error, 1)
	w.Enqueue(Write{Claim: ca, Records: []Record{r0, r1}, Ops: []clientv3.Op{clientv3.OpDelete("/trigger")}, Guard: &failing, Done: done})
	commitNext(t, w)
	if err := kiratest.Receive(t, done, 10*time.Second, "the write's answer"); err != ErrGuard {
		t.Fatalf("the write was answered %v; want ErrGuard", err)
	}
	entry, err := cli.Get(context.Background(), keyspace.JournalEntry("c", "m", 0))
	if err != nil || len(entry.Kvs) != 1 {
		t.Fatalf("entry 0: %v %v", entry, err)
	}
	items, err := history.JournalItems("c", entry.Kvs[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 {
		t.Fatalf("entry 0 holds %d records; want 2", len(items))
	}
	for _, it := range items {
		if it.Stored.State != nil {
			t.Fatalf("record %d in the entry holds a state: %+v", *it.Stored.Seq, it.Stored.State)
		}
	}
	state, err := cli.Get(context.Background(), keyspace.State("c", a))
	if err != nil || len(state.Kvs) != 1 {
		t.Fatalf("a's state key: %v %v", state, err)
	}
	if st := stateKey(t, cli, a); !reflect.DeepEqual(*st, *r1.Stored.State) {
		t.Fatalf("a's state key holds %+v; want the newest record's state %+v", st, r1.Stored.State)
	}
	if state.Kvs[0].ModRevision != entry.Kvs[0].ModRevision {
		t.Fatalf("the state key was put at revision %d, the entry at %d; want one transaction", state.Kvs[0].ModRevision, entry.Kvs[0].ModRevision)
	}
	if r0.Stored.State == nil {
		t.Fatal("the caller's record lost its state: the writer must not change what it was given")
	}
}
