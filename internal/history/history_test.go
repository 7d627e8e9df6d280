package history

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	"google.golang.org/protobuf/encoding/protowire"
)

// A stored record is at most MaxStoredBytes whatever a job prints: with
// every field at its longest (names of 63 characters, a member id of a
// 64-character hostname, a manual execution id), a megabyte of output and
// of error, cut at character boundaries, and a skip record carried with it
// (Stored.Skipped); a record's empty fields are not stored.
func TestStoredRecordIsBounded(t *testing.T) {
	long := func(n int, c string) string { return strings.Repeat(c, n) }
	member := long(64, "h") + "-" + "123e4567-e89b-12d3-a456-426614174000"
	code := -1
	at := time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.FixedZone("X", -12*3600))
	r := Record{Job: long(63, "j"), Partition: 99999, ExecutionID: "manual-" + long(64, "f"), Member: member, Token: 1 << 62,
		ScheduledTime: at, StartedAt: at, FinishedAt: at, Outcome: "timed_out", Attempt: 100, Cause: CauseManual,
		OutputTail: long(1<<20, "é"), Error: long(1<<20, "ü"), ExitCode: &code, Repeats: 1 << 30, LastScheduledTime: &at,
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}
	st := SlotState{Token: 1 << 62, Member: member, Started: at, StartedID: "manual-" + long(64, "f"), StartedAttempt: 100,
		Finished: at, Outcome: "timed_out", HistorySeq: 1 << 62, HistoryLimit: 999, MissedDropped: 1 << 62}
	// The skip record carried with it, as long; no execution, so no trace.
	skip := r
	skip.Outcome, skip.OutputTail, skip.ExitCode, skip.Token, skip.TraceID = OutcomeSkipped, "", nil, 1<<61, ""
	data, err := json.Marshal(Stored{Record: r, State: &st, Skipped: &skip})
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > MaxStoredBytes {
		t.Fatalf("a stored record of %d bytes, over %d", len(data), MaxStoredBytes)
	}
	for _, format := range []int{FormatCompact, FormatWire} {
		data := Encode(Stored{Record: r, State: &st, Skipped: &skip}, format)
		if len(data) > MaxStoredBytes || format == FormatWire && len(data) > 1300 {
			t.Fatalf("a stored record of %d bytes in format %d, over %d (1,300 in the wire format)", len(data), format, MaxStoredBytes)
		}
	}
	var back Stored
	if err := json.Unmarshal(data, &back); err != nil || !utf8.ValidString(back.OutputTail) || !utf8.ValidString(back.Error) ||
		len(back.OutputTail) > StoredOutputBytes || !strings.HasSuffix(back.Error, "…") || back.State == nil || back.ExecutionID != r.ExecutionID {
		t.Fatalf("read back: %v %+v", err, back.Record)
	}
	t.Logf("longest stored record: %d bytes", len(data))

	// A usual deployment: a pod's hostname, a short job name, a failed
	// command that printed a lot.
	member = "kira-7d9f8b6c5-x2k4p-123e4567-e89b-12d3-a456-426614174000"
	code = 1
	r = Record{Job: "reconcile", Partition: 17, ExecutionID: "9f86d081884c7d659a2feaa0c55ad015", Member: member, Token: 123456789,
		ScheduledTime: at, StartedAt: at, FinishedAt: at, Outcome: "failed", Attempt: 1, Cause: CauseSchedule,
		OutputTail: long(1<<20, "x"), Error: "jobs: command exited with status 1", ExitCode: &code}
	at = at.UTC()
	r.ScheduledTime, r.StartedAt, r.FinishedAt = at, at, at
	st = SlotState{Token: 123456789, Member: member, Started: at, StartedID: r.ExecutionID, StartedAttempt: 1, Finished: at, Outcome: "failed", HistorySeq: 12345, HistoryLimit: 10}
	usual, _ := json.Marshal(Stored{Record: r, State: &st})
	if len(usual) > 1024 {
		t.Fatalf("a usual stored record of %d bytes, over 1 KiB", len(usual))
	}
	t.Logf("usual stored record: %d bytes: %s", len(usual), usual)
	quiet, _ := json.Marshal(Stored{Record: Record{Job: "j", ExecutionID: "e", Outcome: "succeeded"}})
	if strings.Contains(string(quiet), "output_tail") || strings.Contains(string(quiet), "exit_code") || strings.Contains(string(quiet), "repeats") {
		t.Fatalf("empty fields stored: %s", quiet)
	}
	printed, _ := json.Marshal(Record{})
	for _, field := range []string{`"trace_id":""`, `"output_tail":""`, `"error":""`, `"exit_code":null`, `"http_status":null`, `"repeats":0`, `"last_scheduled_time":null`} {
		if !strings.Contains(string(printed), field) {
			t.Errorf("a printed record lacks %s: %s", field, printed)
		}
	}
}

// A record stored compactly reads back as it was written (times in UTC),
// whether its ids are the standard ones (left out) or not (kept); a value
// in the compact format is not JSON, so a member of an earlier version
// fails to read it instead of reading an older state past it.
func TestCompactRecordsRoundTrip(t *testing.T) {
	slot := shard.Slot{Job: "reconcile", Partition: 17}
	at := time.Date(2026, 12, 1, 22, 9, 17, 0, time.FixedZone("X", 3600))
	next := at.Add(time.Second)
	member := "kira-7d9f8b6c5-x2k4p-123e4567-e89b-12d3-a456-426614174000"
	code, status, negative := 3, 200, -9
	id := jobs.ExecutionID(slot.Job, slot.Partition, at)
	usual := Stored{
		Record: Record{Job: slot.Job, Partition: slot.Partition, ExecutionID: id, Member: member, Token: 123456789,
			ScheduledTime: at, StartedAt: at.Add(1234567), FinishedAt: at.Add(3456789), Outcome: "succeeded", Attempt: 1, Cause: CauseSchedule, HTTPStatus: &status},
		State: &SlotState{Token: 123456789, Member: member, Started: next, StartedID: jobs.ExecutionID(slot.Job, slot.Partition, next), StartedAttempt: 1,
			Finished: at, Outcome: "succeeded", HistorySeq: 12345, HistoryLimit: 10},
	}
	manual := usual
	manual.Record.ExecutionID, manual.Record.Cause, manual.Record.ExitCode, manual.Record.HTTPStatus = "manual-abc", CauseManual, &code, nil
	manual.Record.OutputTail, manual.Record.Error, manual.Record.Attempt = strings.Repeat("o", 1000), strings.Repeat("e", 1000), 3
	manual.State = &SlotState{Token: 7, Member: "someone-else", Started: at, StartedID: "manual-abc", StartedAttempt: 3, Finished: at.Add(-time.Hour), MissedDropped: 4}
	skip := usual
	skip.Record.Outcome, skip.Record.StartedAt, skip.Record.Repeats, skip.Record.LastScheduledTime = OutcomeSkipped, time.Time{}, 4, &next
	skip.State = nil
	never := usual
	never.State = &SlotState{Token: 1, Member: member, HistorySeq: 1, HistoryLimit: 10} // no fire started or finished yet
	odd := usual                                                                        // an outcome without a wire number, and a negative exit code
	odd.Record.Outcome, odd.Record.ExitCode, odd.State = "something new", &negative, &SlotState{Token: 2, Member: member, Outcome: "newer still"}
	carrying := usual // a run's record with the skips that came while it waited
	carriedSkip := skip.Record
	carriedSkip.ScheduledTime, carriedSkip.ExecutionID, carriedSkip.StartedAt = next, jobs.ExecutionID(slot.Job, slot.Partition, next), at.Add(time.Second)
	carriedSkip.Error, carriedSkip.Token = "previous run still running", 7
	carrying.Skipped = &carriedSkip
	for name, want := range map[string]Stored{"usual": usual, "manual": manual, "skip": skip, "never": never, "odd": odd, "carrying": carrying} {
		want.OutputTail, want.Error = lastBytes(want.OutputTail, StoredOutputBytes), firstBytes(want.Error, StoredErrorBytes)
		for _, format := range []int{FormatCompact, FormatWire} {
			data := Encode(want, format)
			var old Stored
			if err := json.Unmarshal(data, &old); err == nil {
				t.Errorf("%s: an earlier version reads format %d as JSON: %q", name, format, data)
			}
			got, err := Decode(slot, data)
			if err != nil {
				t.Fatalf("%s, format %d: %v: %q", name, format, err, data)
			}
			if !sameStored(got, want) {
				t.Errorf("%s, format %d: read back\n%+v %+v\nwant\n%+v %+v\nfrom %q", name, format, got.Record, got.State, want.Record, want.State, data)
			}
		}
		if jsonData := Encode(want, FormatJSON); !sameStored(must(Decode(slot, jsonData)), want) {
			t.Errorf("%s: the JSON format does not read back: %s", name, jsonData)
		}
	}
	// A later version may add fields to the wire format: this one skips them.
	later := Encode(usual, FormatWire)
	later = protowire.AppendVarint(protowire.AppendTag(later, 99, protowire.VarintType), 7)
	later = protowire.AppendString(protowire.AppendTag(later, 98, protowire.BytesType), "new")
	later = protowire.AppendFixed64(protowire.AppendTag(later, 97, protowire.Fixed64Type), 1)
	if got, err := Decode(slot, later); err != nil || !sameStored(got, usual) {
		t.Errorf("a wire record with fields this version does not know: %v, %+v", err, got)
	}
	// A format-2 reader (an earlier version) refuses a wire record: it is
	// neither "2{" nor JSON.
	if wire := Encode(usual, FormatWire); bytes.HasPrefix(wire, []byte(compactPrefix+"{")) {
		t.Errorf("a wire record reads as a compact one: %q", wire)
	}
	unscheduled := Stored{Record: Record{Job: slot.Job, Partition: slot.Partition, ExecutionID: "x", Outcome: OutcomeReset}}
	if data := Encode(unscheduled, FormatWire); data[0] != '{' || !sameStored(must(Decode(slot, data)), unscheduled) {
		t.Errorf("a record without a scheduled time stored as %s; want JSON", data)
	}
	wire, compact, asJSON := Encode(usual, FormatWire), Encode(usual, FormatCompact), Encode(usual, FormatJSON)
	if 2*len(compact) > len(asJSON) || 2*len(wire) > len(compact) {
		t.Errorf("a usual record takes %d bytes in the wire format, %d compact, %d as JSON: each not half the next", len(wire), len(compact), len(asJSON))
	}
	t.Logf("a usual record: %d bytes in the wire format, %d compact, %d as JSON: %s", len(wire), len(compact), len(asJSON), compact)
}

func must(s Stored, err error) Stored {
	if err != nil {
		panic(err)
	}
	return s
}

// sameStored compares records as etcd keeps them: times by instant.
func sameStored(a, b Stored) bool {
	norm := func(s Stored) string {
		r := inUTC(s.Record)
		var skipped *Record
		if s.Skipped != nil {
			c := inUTC(*s.Skipped)
			skipped = &c
		}
		var st *SlotState
		if s.State != nil {
			c := *s.State
			c.Started, c.Finished = c.Started.UTC(), c.Finished.UTC()
			st = &c
		}
		data, _ := json.Marshal(struct {
			R  Record
			S  *SlotState
			Sk *Record
		}{r, st, skipped})
		return string(data)
	}
	return norm(a) == norm(b)
}

// inUTC is r with its times in UTC.
func inUTC(r Record) Record {
	for _, t := range []*time.Time{&r.ScheduledTime, &r.StartedAt, &r.FinishedAt} {
		*t = t.UTC()
	}
	if r.LastScheduledTime != nil {
		last := r.LastScheduledTime.UTC()
		r.LastScheduledTime = &last
	}
	return r
}
