package history

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/shard"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

func seqOf(n int64) *int64 { return &n }

// A journal entry holds records of many slots and reads back as written:
// each with its slot, its seq, its state and its carried skip; the
// journal's own member is not stored in each record, another member is.
func TestJournalEntryRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	const member = "host-123e4567-e89b-12d3-a456-426614174000"
	rec := func(job string, p int, seq int64, by string) JournalItem {
		r := Record{Job: job, Partition: p, ExecutionID: fmt.Sprintf("x%d", seq), Member: by, Token: fencing.Token(42 + seq),
			ScheduledTime: at, StartedAt: at.Add(time.Millisecond), FinishedAt: at.Add(time.Second), Outcome: "succeeded", Attempt: 1, Cause: CauseSchedule}
		st := SlotState{Token: r.Token, Member: by, Started: at.Add(time.Second), StartedID: "next", StartedAttempt: 1, Finished: at,
			Outcome: "succeeded", HistorySeq: seq + 1, HistoryLimit: 10}
		return JournalItem{Slot: shard.Slot{Job: job, Partition: p}, Stored: Stored{Record: r, State: &st, Seq: seqOf(seq)}}
	}
	skipped := rec("a", 0, 0, member).Stored.Record
	skipped.ExecutionID, skipped.Outcome, skipped.ScheduledTime = "skip", OutcomeSkipped, at.Add(-time.Second)
	items := []JournalItem{rec("a", 0, 7, member), rec("a", 3, 0, member), rec("bb", 12, 99, "other-member")}
	items[0].Stored.Skipped = &skipped
	items[1].Stored.State, items[1].Stored.Limit = nil, 10 // as records are written now: the state in the state key
	value := EncodeJournal(member, items)
	back, err := DecodeJournal(member, value)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(items) {
		t.Fatalf("%d items read back; want %d", len(back), len(items))
	}
	for i := range items {
		want := items[i]
		want.Stored.OutputTail, want.Stored.Error = "", ""
		if !reflect.DeepEqual(back[i], want) {
			t.Fatalf("item %d read back as\n%+v\nwant\n%+v", i, back[i], want)
		}
	}
	// The first two records leave out the journal's member; so a record of
	// another member costs its name.
	if other := len(EncodeJournal(member, items[2:])); other <= len(EncodeJournal(member, items[1:2])) {
		t.Fatalf("a record of another member takes %d bytes, no more than the journal member's", other)
	}
	kv := &mvccpb.KeyValue{Key: []byte("/kira/c/journal/" + member + "/0007"), Value: value}
	if got, err := JournalItems("c", kv); err != nil || len(got) != 3 {
		t.Fatalf("JournalItems: %d items, %v", len(got), err)
	}
	for _, bad := range [][]byte{nil, []byte("3"), {journalPrefix, 0x0a, 0x02, 0x08, 0x01}} {
		if _, err := DecodeJournal(member, bad); err == nil {
			t.Fatalf("%q read as a journal entry", bad)
		}
	}
}

// A slot's state is the newest state-holding of its state key, its ring's
// records and its records in journals; a record copied without its state
// does not hide an older one that has it.
func TestNewestStateAcrossRingAndJournals(t *testing.T) {
	s := shard.Slot{Job: "a"}
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	stored := func(id string, seq int64, withState bool) Stored {
		st := Stored{Record: Record{Job: "a", ExecutionID: id, ScheduledTime: at, Outcome: "succeeded", Attempt: 1}, Seq: seqOf(seq)}
		if withState {
			st.State = &SlotState{StartedID: id, HistorySeq: seq + 1, HistoryLimit: 10}
		}
		return st
	}
	ring := func(st Stored, rev int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte("k"), Value: Encode(st, FormatJournal), ModRevision: rev}
	}
	stateKey := []*mvccpb.KeyValue{{Value: []byte(`{"started_id":"state-key"}`), ModRevision: 5}}
	cases := []struct {
		name    string
		ring    []*mvccpb.KeyValue
		journal []Slotted
		want    string
	}{
		{"the state key alone", nil, nil, "state-key"},
		{"a journal record after it", nil, []Slotted{{Slot: s, Stored: stored("j1", 1, true), Revision: 7}}, "j1"},
		{"a copy without state after the journal's", []*mvccpb.KeyValue{ring(stored("c0", 0, false), 9)}, []Slotted{{Slot: s, Stored: stored("j1", 1, true), Revision: 7}}, "j1"},
		{"a copy with state, newest", []*mvccpb.KeyValue{ring(stored("c1", 1, true), 9)}, []Slotted{{Slot: s, Stored: stored("j1", 1, true), Revision: 7}}, "c1"},
		{"records older than the state key", []*mvccpb.KeyValue{ring(stored("c0", 0, true), 3)}, []Slotted{{Slot: s, Stored: stored("j0", 0, true), Revision: 4}}, "state-key"},
	}
	for _, c := range cases {
		st, err := NewestState(s, stateKey, c.ring, c.journal)
		if err != nil || st.StartedID != c.want {
			t.Fatalf("%s: state %q, %v; want %q", c.name, st.StartedID, err, c.want)
		}
	}
}

// The history of a slot in its ring and in journals has each record once,
// the slot's limit newest of those with a seq, and the older records
// without one only as room is left.
func TestGatherKeepsEachRecordOnceAndTheNewest(t *testing.T) {
	s := shard.Slot{Job: "a"}
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	rec := func(seq int64) Stored {
		return Stored{Record: Record{Job: "a", ExecutionID: fmt.Sprint(seq), ScheduledTime: at.Add(time.Duration(seq) * time.Second)},
			Seq: seqOf(seq), State: &SlotState{HistorySeq: seq + 1, HistoryLimit: 3}}
	}
	old := Stored{Record: Record{Job: "a", ExecutionID: "old", ScheduledTime: at.Add(-time.Hour)}}
	var ring, journal []Slotted
	for _, seq := range []int64{0, 1, 2} {
		ring = append(ring, Slotted{Slot: s, Stored: rec(seq)})
	}
	ring = append(ring, Slotted{Slot: s, Stored: old})
	for _, seq := range []int64{2, 3} { // 2 is in both: a copy
		journal = append(journal, Slotted{Slot: s, Stored: rec(seq)})
	}
	var ids []string
	for _, r := range Gather(ring, journal) {
		ids = append(ids, r.ExecutionID)
	}
	if want := []string{"3", "2", "1"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("gathered %v; want %v", ids, want)
	}
	journal = nil
	ids = nil
	for _, r := range Gather(ring[2:], journal) { // seq 2 and the old record
		ids = append(ids, r.ExecutionID)
	}
	if want := []string{"2", "old"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("gathered %v; want %v", ids, want)
	}
}
