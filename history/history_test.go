package history

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// A stored record is at most MaxStoredBytes whatever a job prints: with
// every field at its longest (names of 63 characters, a member id of a
// 64-character hostname, a manual execution id) and a megabyte of output
// and of error, cut at character boundaries; a record's empty fields are
// not stored.
func TestStoredRecordIsBounded(t *testing.T) {
	long := func(n int, c string) string { return strings.Repeat(c, n) }
	member := long(64, "h") + "-" + "123e4567-e89b-12d3-a456-426614174000"
	code := -1
	at := time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.FixedZone("X", -12*3600))
	r := Record{Job: long(63, "j"), Partition: 99999, ExecutionID: "manual-" + long(64, "f"), Member: member, Token: 1 << 62,
		ScheduledTime: at, StartedAt: at, FinishedAt: at, Outcome: "timed_out", Attempt: 100, Cause: CauseManual,
		OutputTail: long(1<<20, "é"), Error: long(1<<20, "ü"), ExitCode: &code, Repeats: 1 << 30, LastScheduledTime: &at}
	st := SlotState{Token: 1 << 62, Member: member, Started: at, StartedID: "manual-" + long(64, "f"), StartedAttempt: 100,
		Finished: at, Outcome: "timed_out", HistorySeq: 1 << 62, HistoryLimit: 999, MissedDropped: 1 << 62}
	data, err := json.Marshal(Stored{Record: r, State: &st})
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > MaxStoredBytes {
		t.Fatalf("a stored record of %d bytes, over %d", len(data), MaxStoredBytes)
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
	for _, field := range []string{`"output_tail":""`, `"error":""`, `"exit_code":null`, `"http_status":null`, `"repeats":0`, `"last_scheduled_time":null`} {
		if !strings.Contains(string(printed), field) {
			t.Errorf("a printed record lacks %s: %s", field, printed)
		}
	}
}
