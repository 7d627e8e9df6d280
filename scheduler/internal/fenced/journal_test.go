package fenced

import (
	"context"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/etcdtest"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/history"
	"github.com/kira-scheduler/kira/keyspace"
	"github.com/kira-scheduler/kira/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// journalRecord is record seq of slot s, with a state, keeping limit.
func journalRecord(s shard.Slot, seq int64, limit int) Record {
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC).Add(time.Duration(seq) * time.Second)
	st := history.SlotState{Started: at, Finished: at, HistorySeq: seq + 1, HistoryLimit: limit}
	q := seq
	return Record{Slot: s, Limit: limit, Stored: history.Stored{Record: history.Record{Job: s.Job, Partition: s.Partition,
		ScheduledTime: at, StartedAt: at, FinishedAt: at, Outcome: "succeeded", Attempt: 1, Cause: history.CauseSchedule}, State: &st, Seq: &q}}
}

// commitNext commits the writer's next batch, as Run would.
func commitNext(t *testing.T, w *Writer) {
	t.Helper()
	b, tk := w.next()
	if b == nil {
		t.Fatal("nothing queued")
	}
	w.commitBatch(context.Background(), b, tk)
	w.land(tk)
}

// ringRecord reads slot s's record at place seq of its ring (nil if none).
func ringRecord(t *testing.T, cli *clientv3.Client, s shard.Slot, seq int64, limit int) *history.Stored {
	t.Helper()
	resp, err := cli.Get(context.Background(), keyspace.HistoryEntry("c", s, seq, limit))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	st, err := history.Decode(s, resp.Kvs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	return &st
}

// journalSeqs reads the seqs of the records in entry n of journal m.
func journalSeqs(t *testing.T, cli *clientv3.Client, m string, n int) []int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), keyspace.JournalEntry("c", m, n))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("entry %d: %v %v", n, resp, err)
	}
	items, err := history.JournalItems("c", resp.Kvs[0])
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, it := range items {
		seqs = append(seqs, *it.Stored.Seq)
	}
	return seqs
}

// A batch's records share one journal key. When an entry is reused, its
// records still among their slot's newest are copied to the slot's ring:
// with the state if the record is the slot's newest write, without it
// otherwise; a record whose claim has ended is not copied, and does not
// fail the batch.
func TestJournalCopiesRecordsStillNewestWhenReused(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	a, b := shard.Slot{Job: "j"}, shard.Slot{Job: "j", Partition: 1}
	ca, cb := heldClaim(t, cli, "/leader/a"), heldClaim(t, cli, "/leader/b")
	w := NewWriter(cli)
	w.journal = newJournal("c", "m", 2)
	write := func(c fencing.Claim, recs ...Record) chan error {
		done := make(chan error, 1)
		w.Enqueue(Write{Claim: c, Records: recs, Done: done})
		return done
	}
	answered := func(done chan error) {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no answer")
		}
	}
	d1, d2 := write(ca, journalRecord(a, 0, 2)), write(cb, journalRecord(b, 0, 2))
	commitNext(t, w) // entry 0: a0, b0
	answered(d1)
	answered(d2)
	if seqs := journalSeqs(t, cli, "m", 0); len(seqs) != 2 {
		t.Fatalf("entry 0 holds seqs %v; want both records in one key", seqs)
	}
	d := write(ca, journalRecord(a, 1, 2))
	commitNext(t, w) // entry 1: a1
	answered(d)
	d = write(ca, journalRecord(a, 2, 2))
	commitNext(t, w) // entry 0 again: a0 is no longer among a's 2 newest, b0 is
	answered(d)
	if r := ringRecord(t, cli, a, 0, 2); r != nil {
		t.Fatalf("a0 copied to the ring: %+v", r)
	}
	if r := ringRecord(t, cli, b, 0, 2); r == nil || r.State == nil || *r.Seq != 0 {
		t.Fatalf("b0 in the ring: %+v; want it with its state (b's newest write)", r)
	}
	if seqs := journalSeqs(t, cli, "m", 0); len(seqs) != 1 || seqs[0] != 2 {
		t.Fatalf("entry 0 holds %v; want a2 alone", seqs)
	}

	d = write(cb, journalRecord(b, 1, 2))
	commitNext(t, w) // entry 1: b1 (a1 is not among a's newest)
	answered(d)
	if _, err := cli.Delete(context.Background(), cb.LeaderKey); err != nil { // b's claim ends
		t.Fatal(err)
	}
	d = write(ca, journalRecord(a, 3, 2))
	commitNext(t, w) // entry 0 again: a2 is among a's newest, not its newest write
	answered(d)
	if r := ringRecord(t, cli, a, 2, 2); r == nil || r.State != nil || *r.Seq != 2 {
		t.Fatalf("a2 in the ring: %+v; want it without its state (a3 is newer)", r)
	}
	d = write(ca, journalRecord(a, 4, 2))
	commitNext(t, w) // entry 1 again: b1 is b's newest, but b's claim ended
	answered(d)
	if r := ringRecord(t, cli, b, 1, 2); r != nil {
		t.Fatalf("b1 copied under an ended claim: %+v", r)
	}
	if seqs := journalSeqs(t, cli, "m", 1); len(seqs) != 1 || seqs[0] != 4 {
		t.Fatalf("entry 1 holds %v; want a4 alone", seqs)
	}
}

// A write that hands a slot over copies the slot's records still in the
// journal and among its newest to its ring, the newest with its state, in
// the transaction that deletes the leader key; the next holder need not
// read this member's journal.
func TestHandoverCopiesTheSlotsRecords(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	a := shard.Slot{Job: "j"}
	ca := heldClaim(t, cli, "/leader/a")
	w := NewWriter(cli)
	w.journal = newJournal("c", "m", 8)
	for seq := range int64(3) {
		w.Enqueue(Write{Claim: ca, Records: []Record{journalRecord(a, seq, 2)}})
		commitNext(t, w)
	}
	done := make(chan error, 1)
	w.Enqueue(Write{Claim: ca, Ops: []clientv3.Op{clientv3.OpDelete(ca.LeaderKey)}, Handover: true, Done: done})
	commitNext(t, w)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r := ringRecord(t, cli, a, 2, 2); r == nil || r.State == nil || *r.Seq != 2 {
		t.Fatalf("a2 in the ring: %+v; want it with its state", r)
	}
	if r := ringRecord(t, cli, a, 1, 2); r == nil || r.State != nil || *r.Seq != 1 {
		t.Fatalf("a1 in the ring: %+v; want it without its state", r)
	}
	if resp, _ := cli.Get(context.Background(), ca.LeaderKey); len(resp.Kvs) != 0 {
		t.Fatal("the leader key is still there")
	}
	if _, ok := w.journal.slots[a]; ok {
		t.Fatal("the writer still tracks a slot it handed over")
	}
}
