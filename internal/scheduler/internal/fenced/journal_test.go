package fenced

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/history/journal"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/shard"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
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

// commitNext commits what is queued, batch after batch, as Run would: the
// copies of an entry's records before the entry is reused, then the writes.
func commitNext(t *testing.T, w *Writer) {
	t.Helper()
	for {
		b, tk := w.next()
		if b == nil {
			return
		}
		w.commitBatch(context.Background(), b, tk)
		w.land(b, tk)
	}
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

// stateKey reads slot s's state key (nil if none).
func stateKey(t *testing.T, cli *clientv3.Client, s shard.Slot) *history.SlotState {
	t.Helper()
	resp, err := cli.Get(context.Background(), keyspace.State("c", s))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	st, err := history.DecodeState(s, resp.Kvs[0].Value)
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

// A batch's records share one journal key. Before an entry is reused, its
// records still among their slot's newest committed are copied to the
// slot's ring, in a transaction of their own: with the state if the record
// is the slot's newest write committed, without it otherwise; also after
// the record's claim ended, while nobody has taken the slot over.
func TestJournalCopiesRecordsStillNewestWhenReused(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	a, b := shard.Slot{Job: "j"}, shard.Slot{Job: "j", Partition: 1}
	ca, cb := heldClaim(t, cli, "/leader/a"), heldClaim(t, cli, "/leader/b")
	w := NewWriter(cli)
	w.index = newIndex("c", "m", 2)
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
	commitNext(t, w) // entry 0 again: a0 is still among a's 2 newest committed (a2 is not yet), and so is b0
	answered(d)
	if r := ringRecord(t, cli, a, 0, 2); r == nil || r.State != nil {
		t.Fatalf("a0 in the ring: %+v; want it without a state (a record's state is its state key's)", r)
	}
	if r := ringRecord(t, cli, b, 0, 2); r == nil || r.State != nil || *r.Seq != 0 {
		t.Fatalf("b0 in the ring: %+v; want it without a state", r)
	}
	if st := stateKey(t, cli, b); st == nil || st.HistorySeq != 1 {
		t.Fatalf("b's state key: %+v; want b0's state", st)
	}
	if seqs := journalSeqs(t, cli, "m", 0); len(seqs) != 1 || seqs[0] != 2 {
		t.Fatalf("entry 0 holds %v; want a2 alone", seqs)
	}

	d = write(cb, journalRecord(b, 1, 2))
	commitNext(t, w) // entry 1: b1 (a1, still among a's newest committed, copied first)
	answered(d)
	if _, err := cli.Delete(context.Background(), cb.LeaderKey); err != nil { // b's claim ends
		t.Fatal(err)
	}
	d = write(ca, journalRecord(a, 3, 2))
	commitNext(t, w) // entry 0 again: a2 is among a's newest, and its newest write committed
	answered(d)
	if r := ringRecord(t, cli, a, 2, 2); r == nil || *r.Seq != 2 {
		t.Fatalf("a2 in the ring: %+v; want it (copied before a3 was taken)", r)
	}
	d = write(ca, journalRecord(a, 4, 2))
	commitNext(t, w) // entry 1 again: b1 is b's newest; b's claim ended, but nobody took b over
	answered(d)
	if r := ringRecord(t, cli, b, 1, 2); r == nil || *r.Seq != 1 {
		t.Fatalf("b1 in the ring: %+v; want it: nobody else has read it", r)
	}
	if seqs := journalSeqs(t, cli, "m", 1); len(seqs) != 1 || seqs[0] != 4 {
		t.Fatalf("entry 1 holds %v; want a4 alone", seqs)
	}
}

// A write that hands a slot over copies the slot's records still in the
// journal and among its newest to its ring, in the transaction that deletes the leader key; the next holder need not
// read this member's journal.
func TestHandoverCopiesTheSlotsRecords(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	a := shard.Slot{Job: "j"}
	ca := heldClaim(t, cli, "/leader/a")
	w := NewWriter(cli)
	w.index = newIndex("c", "m", 8)
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
	for seq := range int64(2) {
		if r := ringRecord(t, cli, a, seq+1, 2); r == nil || r.State != nil || *r.Seq != seq+1 {
			t.Fatalf("a%d in the ring: %+v; want it, without a state", seq+1, r)
		}
	}
	if st := stateKey(t, cli, a); st == nil || st.HistorySeq != 3 {
		t.Fatalf("a's state key: %+v; want a2's state", st)
	}
	if resp, _ := cli.Get(context.Background(), ca.LeaderKey); len(resp.Kvs) != 0 {
		t.Fatal("the leader key is still there")
	}
	if _, ok := w.index.slots[a]; ok {
		t.Fatal("the writer still tracks a slot it handed over")
	}
}

// Handovers of slots with few records to copy share a transaction: each
// counts against the transaction's operations for the copies it makes, not
// for the most it could make, so a member that stops hands thousands of
// slots over in a few transactions, not one transaction each.
func TestHandoversShareATransaction(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	w := NewWriter(cli)
	w.index = newIndex("c", "m", 8)
	claims := make([]fencing.Claim, 20)
	for i := range claims {
		claims[i] = heldClaim(t, cli, fmt.Sprintf("/leader/%d", i))
	}
	for seq := range int64(3) {
		for i, c := range claims {
			w.Enqueue(Write{Claim: c, Records: []Record{journalRecord(shard.Slot{Job: "j", Partition: i}, seq, 10)}})
		}
		commitNext(t, w)
	}
	var dones []chan error
	for _, c := range claims {
		done := make(chan error, 1)
		dones = append(dones, done)
		w.Enqueue(Write{Claim: c, Ops: []clientv3.Op{clientv3.OpDelete(c.LeaderKey)}, Handover: true, Done: done})
	}
	batches := 0
	for {
		b, tk := w.next()
		if b == nil {
			break
		}
		batches++
		w.commitBatch(context.Background(), b, tk)
		w.land(b, tk)
	}
	for i, done := range dones {
		if err := kiratest.Receive(t, done, 10*time.Second, "a handover's answer"); err != nil {
			t.Fatalf("handover %d: %v", i, err)
		}
	}
	if batches != 1 {
		t.Fatalf("20 handovers of 3 records each in %d batches; want 1", batches)
	}
	for i := range claims {
		for seq := range int64(3) {
			if r := ringRecord(t, cli, shard.Slot{Job: "j", Partition: i}, seq, 10); r == nil {
				t.Fatalf("slot %d's record %d not copied to its ring", i, seq)
			}
		}
	}
}

// A full batch reusing an entry whose every record is still needed
// commits: the copies of 128 slots, each fenced by its own claim, go first
// in a transaction of their own (etcd counts a transaction's comparisons
// and a nested one's together against its 128), then the batch's records.
func TestReusingAFullEntryCopiesEveryRecord(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	w := NewWriter(cli)
	w.index = newIndex("c", "m", 1)              // every batch reuses entry 0
	claims := make([]fencing.Claim, maxTxnOps-1) // a state put each, and the entry
	for i := range claims {
		claims[i] = heldClaim(t, cli, fmt.Sprintf("/leader/%d", i))
	}
	var dones []chan error
	for seq := range int64(2) {
		for i, c := range claims {
			done := make(chan error, 1)
			dones = append(dones, done)
			w.Enqueue(Write{Claim: c, Records: []Record{journalRecord(shard.Slot{Job: "j", Partition: i}, seq, 10)}, Done: done})
		}
		commitNext(t, w)
	}
	for i, done := range dones {
		if err := <-done; err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	for i := range claims {
		if r := ringRecord(t, cli, shard.Slot{Job: "j", Partition: i}, 0, 10); r == nil || *r.Seq != 0 {
			t.Fatalf("slot %d's first record in the ring: %+v; want it copied", i, r)
		}
	}
	if seqs := journalSeqs(t, cli, "m", 0); len(seqs) != len(claims) || seqs[0] != 1 {
		t.Fatalf("entry 0 holds %d records; want the second batch's %d", len(seqs), len(claims))
	}
}

// failingKV fails, while failing is set, every commit that puts a journal
// entry: etcd unreachable for a batch of records, not for the copies; while
// failReads is set, every read of journal entries (a copy's read-back); and
// once loseNext is set, it applies the next commit that puts a journal entry
// and answers it with etcd's request timeout, as when the answer of an
// applied request is lost.
type failingKV struct {
	clientv3.KV
	failing, failReads, loseNext atomic.Bool
}

func (f *failingKV) Txn(ctx context.Context) clientv3.Txn {
	return &failingTxn{Txn: f.KV.Txn(ctx), kv: f}
}

type failingTxn struct {
	clientv3.Txn
	kv            *failingKV
	fail, journal bool
}

func (t *failingTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }
func (t *failingTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Else(ops...)
	return t
}
func (t *failingTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	for _, op := range ops {
		if strings.HasPrefix(string(op.KeyBytes()), keyspace.Journals("c")) {
			t.fail = t.fail || op.IsPut() && t.kv.failing.Load() || op.IsGet() && t.kv.failReads.Load()
			t.journal = t.journal || op.IsPut()
		}
	}
	t.Txn = t.Txn.Then(ops...)
	return t
}
func (t *failingTxn) Commit() (*clientv3.TxnResponse, error) {
	if t.fail {
		return nil, errors.New("etcd unreachable")
	}
	resp, err := t.Txn.Commit()
	if err == nil && t.journal && t.kv.loseNext.CompareAndSwap(true, false) {
		return nil, rpctypes.ErrTimeout
	}
	return resp, err
}

// A record only queued or in flight does not make the one before it old: if
// its write fails, that one is still the slot's newest, and the entry that
// holds it is reused only after it is copied. (Counting the failed write's
// record as the newest once lost the slot's state, when records carried
// it; now it would lose a record of its history.)
func TestAnEntryIsReusedOnlyAfterItsSlotsNewerRecordsLanded(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	kv := &failingKV{KV: cli}
	a, b := shard.Slot{Job: "j"}, shard.Slot{Job: "j", Partition: 1}
	ca, cb := heldClaim(t, cli, "/leader/a"), heldClaim(t, cli, "/leader/b")
	w := NewWriter(kv)
	w.index = newIndex("c", "m", 2)
	const limit = 1
	write := func(c fencing.Claim, s shard.Slot, seq int64) error {
		t.Helper()
		done := make(chan error, 1)
		w.Enqueue(Write{Claim: c, Records: []Record{journalRecord(s, seq, limit)}, Done: done})
		commitNext(t, w)
		return kiratest.Receive(t, done, 10*time.Second, "the write's answer")
	}
	for _, err := range []error{write(ca, a, 0), write(cb, b, 0)} { // entries 0 and 1
		if err != nil {
			t.Fatal(err)
		}
	}
	kv.failing.Store(true)
	if err := write(ca, a, 1); err == nil { // would reuse entry 0
		t.Fatal("a1 committed while etcd failed")
	}
	kv.failing.Store(false)
	for seq := range int64(2) { // entries 1 and 0 reused
		if err := write(cb, b, seq+1); err != nil {
			t.Fatal(err)
		}
	}
	if r := ringRecord(t, cli, a, 0, limit); r == nil || *r.Seq != 0 {
		t.Fatalf("a0 in the ring: %+v; want it: a's newest committed, its entry reused", r)
	}
	if st := stateKey(t, cli, a); st == nil || st.HistorySeq != 1 {
		t.Fatalf("a's state key: %+v; want a0's state, the newest committed", st)
	}
}

// A copy is guarded by the slot's state key, not by its claim: after the
// claim ended it still lands while no newer holder has put the slot's state
// (so the record stays readable, in the ring, once its entry is reused),
// and it is dropped, without holding the writer up, once one has (the
// record is the new holder's). A state key put later by this member itself
// (a write that had not landed when the copy was planned) does not stop the
// copy: it goes in the next copy batch.
func TestACopyLandsAfterTheClaimEndedUntilANewerHolderTookOver(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	free, taken, own, filler := shard.Slot{Job: "j"}, shard.Slot{Job: "j", Partition: 1}, shard.Slot{Job: "j", Partition: 2}, shard.Slot{Job: "f"}
	cFree, cTaken, cOwn, cFiller := heldClaim(t, cli, "/leader/free"), heldClaim(t, cli, "/leader/taken"), heldClaim(t, cli, "/leader/own"), heldClaim(t, cli, "/leader/filler")
	w := NewWriter(cli)
	w.index = newIndex("c", "m", 3)
	const limit = 1
	write := func(c fencing.Claim, recs ...Record) {
		t.Helper()
		done := make(chan error, 1)
		w.Enqueue(Write{Claim: c, Records: recs, Done: done})
		commitNext(t, w)
		if err := kiratest.Receive(t, done, 10*time.Second, "the write's answer"); err != nil {
			t.Fatal(err)
		}
	}
	putState := func(s shard.Slot, token fencing.Token) {
		t.Helper()
		data, _ := json.Marshal(history.SlotState{Token: token, Member: "other"})
		if _, err := cli.Put(ctx, keyspace.State("c", s), string(data)); err != nil {
			t.Fatal(err)
		}
	}
	write(cFree, journalRecord(free, 0, limit))        // entry 0
	write(cTaken, journalRecord(taken, 0, limit))      // entry 1
	write(cOwn, journalRecord(own, 0, limit))          // entry 2
	for _, c := range []fencing.Claim{cFree, cTaken} { // their claims end
		if _, err := cli.Delete(ctx, c.LeaderKey); err != nil {
			t.Fatal(err)
		}
	}
	putState(taken, cTaken.Token+100)               // a newer holder took taken over
	putState(own, cOwn.Token)                       // as this member's own state write would
	write(cFiller, journalRecord(filler, 0, limit)) // entry 0 reused: free0 copied
	if r := ringRecord(t, cli, free, 0, limit); r == nil {
		t.Fatalf("free0 in the ring: %+v; want it, its claim ended but nobody took it over", r)
	}
	write(cFiller, journalRecord(filler, 1, limit)) // entry 1 reused: taken0 dropped
	if r := ringRecord(t, cli, taken, 0, limit); r != nil {
		t.Fatalf("taken0 copied after a newer holder took the slot over: %+v", r)
	}
	if seqs := journalSeqs(t, cli, "m", 1); len(seqs) != 1 || seqs[0] != 1 {
		t.Fatalf("entry 1 holds %v; want filler1 alone", seqs)
	}
	write(cFiller, journalRecord(filler, 2, limit)) // entry 2 reused: own0 copied on a second try
	if r := ringRecord(t, cli, own, 0, limit); r == nil {
		t.Fatalf("own0 in the ring: %+v; want it, after its state key put by this member", r)
	}
}

// A handover whose copies could not be made (the read-back of its records
// failed) still hands the slot over, and leaves the slot's records needed:
// they are copied before their entry is reused, not dropped with it.
func TestAHandoverThatCouldNotCopyLeavesItsRecordsToCopy(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	kv := &failingKV{KV: cli}
	a, filler := shard.Slot{Job: "j"}, shard.Slot{Job: "f"}
	ca, cf := heldClaim(t, cli, "/leader/a"), heldClaim(t, cli, "/leader/f")
	w := NewWriter(kv)
	w.index = newIndex("c", "m", 2)
	write := func(fw Write) {
		t.Helper()
		fw.Done = make(chan error, 1)
		w.Enqueue(fw)
		commitNext(t, w)
		if err := kiratest.Receive(t, fw.Done, 10*time.Second, "the write's answer"); err != nil {
			t.Fatal(err)
		}
	}
	write(Write{Claim: ca, Records: []Record{journalRecord(a, 0, 2)}}) // entry 0
	kv.failReads.Store(true)
	write(Write{Claim: ca, Ops: []clientv3.Op{clientv3.OpDelete(ca.LeaderKey)}, Handover: true})
	kv.failReads.Store(false)
	if resp, _ := cli.Get(context.Background(), ca.LeaderKey); len(resp.Kvs) != 0 {
		t.Fatal("the handover did not delete the leader key")
	}
	if r := ringRecord(t, cli, a, 0, 2); r != nil {
		t.Fatalf("a0 in the ring after a handover that could not read it back: %+v", r)
	}
	write(Write{Claim: cf, Records: []Record{journalRecord(filler, 0, 2)}}) // entry 1
	write(Write{Claim: cf, Records: []Record{journalRecord(filler, 1, 2)}}) // entry 0 reused
	if r := ringRecord(t, cli, a, 0, 2); r == nil || r.State != nil {
		t.Fatalf("a0 in the ring: %+v; want it, copied before its entry was reused (without its state: the handover was a's newest write)", r)
	}
}

// A slot keeping more records than a handover copies has its older ones
// copied before their entries are reused, while nobody has taken it over:
// the ring ends with all of its history_limit newest.
func TestRecordsAHandoverLeftAreCopiedBeforeTheirEntriesAreReused(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	a, filler := shard.Slot{Job: "j"}, shard.Slot{Job: "f"}
	ca, cf := heldClaim(t, cli, "/leader/a"), heldClaim(t, cli, "/leader/f")
	const records, limit = maxHandoverCopies + 6, 100
	w := NewWriter(cli)
	w.index = newIndex("c", "m", records+1) // the next entry is free when the handover goes
	for seq := range int64(records) {
		w.Enqueue(Write{Claim: ca, Records: []Record{journalRecord(a, seq, limit)}})
		commitNext(t, w)
	}
	done := make(chan error, 1)
	w.Enqueue(Write{Claim: ca, Ops: []clientv3.Op{clientv3.OpDelete(ca.LeaderKey)}, Handover: true, Done: done})
	commitNext(t, w)
	if err := kiratest.Receive(t, done, 10*time.Second, "the handover's answer"); err != nil {
		t.Fatal(err)
	}
	if r := ringRecord(t, cli, a, 0, limit); r != nil {
		t.Fatalf("a0 copied by the handover: %+v; want only the %d newest", r, maxHandoverCopies)
	}
	for seq := range int64(records - maxHandoverCopies + 1) { // the free entry, then those of a0 to a5
		w.Enqueue(Write{Claim: cf, Records: []Record{journalRecord(filler, seq, limit)}})
		commitNext(t, w)
	}
	for seq := range int64(records) {
		if r := ringRecord(t, cli, a, seq, limit); r == nil {
			t.Fatalf("a%d is not in the ring", seq)
		}
	}
}

// A copy that etcd fails holds up the records waiting for its entry as
// their own commit failing would: the writer counts as stalled, so the
// scheduler takes fires due meanwhile for misfires, not overlaps.
func TestWriterIsStalledWhileItsCopiesFail(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	kv := &failingKV{KV: cli}
	a := shard.Slot{Job: "j"}
	ca := heldClaim(t, cli, "/leader/a")
	w := NewWriter(kv)
	w.index = newIndex("c", "m", 1)
	w.Enqueue(Write{Claim: ca, Records: []Record{journalRecord(a, 0, 2)}})
	commitNext(t, w) // entry 0
	kv.failReads.Store(true)
	w.Enqueue(Write{Claim: ca, Records: []Record{journalRecord(a, 1, 2)}})
	b, tk := w.next() // a0 to copy before entry 0 is reused: its read-back fails
	if tk.plan == nil || !tk.plan.copy {
		t.Fatalf("took %+v; want the copy of a0", b)
	}
	w.commitBatch(context.Background(), b, tk)
	w.land(b, tk)
	if !w.Stalled() {
		t.Fatal("the writer is not stalled while the copy its records wait for fails")
	}
	kv.failReads.Store(false)
	commitNext(t, w)
	if w.Stalled() {
		t.Fatal("the writer is still stalled once the copy and the records committed")
	}
}

// A writer whose member lost its lease abandons what is queued and stops,
// even while records wait for a copy before their entry is reused: the
// abandoned copy batch is not taken again and again (a member that lost its
// lease never rejoined).
func TestWriterStopsWhenItAbandonsACopy(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	a := shard.Slot{Job: "j"}
	ca := heldClaim(t, cli, "/leader/a")
	w := NewWriter(cli)
	w.index = newIndex("c", "m", 1)
	w.Enqueue(Write{Claim: ca, Records: []Record{journalRecord(a, 0, 2)}})
	commitNext(t, w) // entry 0: a0, still needed
	done := make(chan error, 1)
	w.Enqueue(Write{Claim: ca, Records: []Record{journalRecord(a, 1, 2)}, Done: done}) // waits for a0's copy
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the lease is lost
	stop := make(chan struct{})
	close(stop)
	stopped := make(chan struct{})
	go func() { w.Run(ctx, stop); close(stopped) }()
	kiratest.Receive(t, stopped, 10*time.Second, "the writer to stop")
	if err := kiratest.Receive(t, done, time.Second, "a1's answer"); !errors.Is(err, ErrAbandoned) {
		t.Fatalf("a1 answered %v; want ErrAbandoned", err)
	}
}

// A copy is ordered after its slot's writes in flight, like any write of
// the slot: planned while a newer write of the slot was in flight, it
// would decide that the older record is among the slot's newest before the
// newer one landed. (When records carried their state, such a copy landing
// after that write passed for the slot's newest state.)
func TestACopyWaitsForItsSlotsWriteInFlight(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	a, f := shard.Slot{Job: "a"}, shard.Slot{Job: "f"}
	ca, cf, cg := heldClaim(t, cli, "/leader/a"), heldClaim(t, cli, "/leader/f"), heldClaim(t, cli, "/leader/g")
	w := NewWriter(cli)
	w.index = newIndex("c", "m", 3)
	const limit = 2
	commitNow := func(c fencing.Claim, r Record) {
		t.Helper()
		done := make(chan error, 1)
		w.Enqueue(Write{Claim: c, Records: []Record{r}, Done: done})
		commitNext(t, w)
		if err := kiratest.Receive(t, done, 10*time.Second, "the write's answer"); err != nil {
			t.Fatal(err)
		}
	}
	commitNow(ca, journalRecord(a, 0, limit)) // entry 0: a0, which entry 3 reuses
	commitNow(cf, journalRecord(f, 0, limit)) // entry 1
	a1 := make(chan error, 1)
	w.Enqueue(Write{Claim: ca, Records: []Record{journalRecord(a, 1, limit)}, Done: a1})
	b1, t1 := w.next() // a1 in flight, in entry 2
	g1 := make(chan error, 1)
	w.Enqueue(Write{Claim: cg, Ops: []clientv3.Op{clientv3.OpPut("/g", "1")}, Done: g1})
	b2, t2 := w.next() // g1 (a copy of a0 must wait for a1 to land)
	w.commitBatch(context.Background(), b1, t1)
	w.land(b1, t1)
	w.commitBatch(context.Background(), b2, t2)
	w.land(b2, t2)
	commitNext(t, w)
	for _, done := range []chan error{a1, g1} {
		if err := kiratest.Receive(t, done, 10*time.Second, "the write's answer"); err != nil {
			t.Fatal(err)
		}
	}
	commitNow(cf, journalRecord(f, 1, limit)) // entry 3 reuses entry 0: a0 copied first

	ctx := context.Background()
	ring, err := cli.Get(ctx, keyspace.SlotHistory("c", a), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	journaled, _, err := journal.NewCache(cli, "c").SlotsNow(ctx, []shard.Slot{a})
	if err != nil {
		t.Fatal(err)
	}
	state, err := cli.Get(ctx, keyspace.State("c", a))
	if err != nil {
		t.Fatal(err)
	}
	st, err := history.NewestState(a, state.Kvs, ring.Kvs, journaled[a])
	if err != nil {
		t.Fatal(err)
	}
	if st.HistorySeq != 2 {
		t.Fatalf("a's newest state read from its state key, ring and the journal has history seq %d; want 2, a1's", st.HistorySeq)
	}
}
