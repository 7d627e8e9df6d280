package history

import (
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/shard"
)

// A record keeps its execution's trace id in every format (the wire
// format's 16 bytes, or its text if it is not 32 hex digits), in a slot's
// ring and in a journal; and records written by a version that did not
// keep trace ids (these bytes are what it wrote) still read, with none.
func TestRecordsKeepTheirTraceID(t *testing.T) {
	slot := shard.Slot{Job: "reconcile", Partition: 3}
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	status := 200
	older := Stored{Record: Record{Job: slot.Job, Partition: slot.Partition, ExecutionID: "x1", Member: "m1", Token: 42, ScheduledTime: at,
		StartedAt: at.Add(time.Millisecond), FinishedAt: at.Add(time.Second), Outcome: "succeeded", Attempt: 1, Cause: CauseSchedule, HTTPStatus: &status},
		State: &SlotState{Token: 42, Member: "m1", Started: at.Add(time.Minute), StartedID: "x2", StartedAttempt: 1, Finished: at, Outcome: "succeeded", HistorySeq: 8, HistoryLimit: 10},
		Seq:   seqOf(7)}
	for _, id := range []string{"4bf92f3577b34da6a3ce929d0e0e4736", "not-a-w3c-trace-id"} {
		traced := older
		traced.TraceID = id
		for _, format := range []int{FormatJSON, FormatCompact, FormatWire} {
			if got, err := Decode(slot, Encode(traced, format)); err != nil || got.TraceID != id || !sameStored(got, traced) {
				t.Errorf("trace id %q in format %d read back as %q (%v): %+v", id, format, got.TraceID, err, got.Record)
			}
		}
		items, err := DecodeJournal("m1", EncodeJournal("m1", []JournalItem{{Slot: slot, Stored: traced}}))
		if err != nil || len(items) != 1 || items[0].Stored.TraceID != id {
			t.Errorf("trace id %q in a journal read back as %+v (%v)", id, items, err)
		}
	}
	if with, without := len(Encode(Stored{Record: Record{Job: "j", ScheduledTime: at, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}}, FormatWire)),
		len(Encode(Stored{Record: Record{Job: "j", ScheduledTime: at}}, FormatWire)); with-without != 19 {
		t.Errorf("a trace id costs %d bytes in the wire format; want its 16, 2 of tag and 1 of length", with-without)
	}

	// Written by the version before trace ids: the wire format, the compact
	// one and a journal entry, of the record older.
	wire := "3\n\x02m1\x10T\x18\x80\x80ŭ\xf9\x8c\xb2\xed1 \x80\x89z(\x80\xa8ֹ\a0\x01@\x02R\x02x1p\x90\x03\x8a\x01\x15\x18\x80ຄ\xbf\x03\"\x02x2(\x020\x008\x01H\x10P\x14\x98\x01\x0e"
	compact := "2{\"m\":\"m1\",\"k\":42,\"t\":1796202000000000000,\"s\":1000000,\"f\":1000000000,\"o\":\"succeeded\",\"a\":1,\"x\":\"x1\",\"http\":200,\"n\":{\"s\":60000000000,\"x\":\"x2\",\"a\":1,\"f\":0,\"o\":\"succeeded\",\"q\":8,\"l\":10}}"
	journal := "j\nK\n\treconcile\x10\x06\x1a<\x10T\x18\x80\x80ŭ\xf9\x8c\xb2\xed1 \x80\x89z(\x80\xa8ֹ\a0\x01@\x02R\x02x1p\x90\x03\x8a\x01\x15\x18\x80ຄ\xbf\x03\"\x02x2(\x020\x008\x01H\x10P\x14\x98\x01\x0e"
	for name, value := range map[string]string{"wire": wire, "compact": compact} {
		got, err := Decode(slot, []byte(value))
		if err != nil || got.TraceID != "" || !sameStored(got, older) {
			t.Errorf("an older %s record: %v\n%+v %+v\nwant\n%+v %+v", name, err, got.Record, got.State, older.Record, older.State)
		}
	}
	items, err := DecodeJournal("m1", []byte(journal))
	if err != nil || len(items) != 1 || items[0].Stored.TraceID != "" || !sameStored(items[0].Stored, older) || *items[0].Stored.Seq != 7 {
		t.Errorf("an older journal entry: %v %+v", err, items)
	}
	// What this version writes without a trace id is what the older one
	// wrote: nothing is added to untraced records.
	if got := string(Encode(older, FormatWire)); got != wire {
		t.Errorf("an untraced record now encodes as %q; the older version wrote %q", got, wire)
	}
	if strings.Contains(string(Encode(older, FormatJSON)), "trace_id") {
		t.Errorf("an untraced record stores an empty trace id as JSON")
	}
}
