package history

import (
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/kira-scheduler/kira/fencing"
)

// Trigger says why an execution ran. The values are shown to users.
type Cause string

const (
	CauseSchedule Cause = "schedule"
	CauseCatchup  Cause = "catchup" // a fire missed while nobody held the slot
	CauseManual   Cause = "manual"  // kira trigger
	CauseRetry    Cause = "retry"   // a failed attempt, or a fire an ex-holder started but did not finish
)

// SlotState is what the holder of a slot records in etcd, so the next holder
// learns what ran. It is written only while the writer holds the slot (the
// transaction compares the leader key's create revision with the token).
type SlotState struct {
	Token  fencing.Token `json:"token"`
	Member string        `json:"member"`
	// Started is the scheduled time of the latest fire started (recorded
	// before it starts), with its execution id and attempt.
	Started        time.Time `json:"started"`
	StartedID      string    `json:"started_id,omitempty"`
	StartedAttempt int       `json:"started_attempt,omitempty"`
	Finished       time.Time `json:"finished"` // scheduled time of the latest fire finished
	Outcome        string    `json:"outcome,omitempty"`
	HistorySeq     int64     `json:"history_seq"`
	// HistoryLimit is the job's history_limit when the holder last wrote a
	// record; zero in states written before there was one (those kept 100).
	HistoryLimit  int   `json:"history_limit,omitempty"`
	MissedDropped int64 `json:"missed_dropped,omitempty"` // fires dropped for being older than catchup_window
	// Owed are the scheduled times of the fires its holder had taken on to
	// run (a catch-up or an unfinished fire's retry waiting, a fire queued
	// behind a run or a permit) and had not started when it wrote this
	// state, oldest first: the next holder runs each, whatever the misfire
	// policy, as this holder would have, so that what runs does not depend
	// on when the slot changed hands. The state key holds it; a record's
	// copy of the state does not. Held by
	// TestAFireQueuedAtAHandoverRunsOnTheNextHolder.
	Owed []time.Time `json:"owed,omitempty"`
}

// Unfinished reports whether a fire was started but not recorded as finished.
func (s SlotState) Unfinished() bool { return s.Started.After(s.Finished) }

// Record is one execution in the history, as kira history prints it: every
// field is always present in its JSON.
type Record struct {
	Job           string        `json:"job"`
	Partition     int           `json:"partition"`
	ExecutionID   string        `json:"execution_id"`
	Member        string        `json:"member"`
	Token         fencing.Token `json:"token"`
	ScheduledTime time.Time     `json:"scheduled_time"`
	StartedAt     time.Time     `json:"started_at"`
	FinishedAt    time.Time     `json:"finished_at"`
	Outcome       string        `json:"outcome"`
	Attempt       int           `json:"attempt"`
	Cause         Cause         `json:"trigger"`
	OutputTail    string        `json:"output_tail"`
	Error         string        `json:"error"`
	// ExitCode is a command job's exit code; null for other jobs and for a
	// command that did not exit on its own.
	ExitCode *int `json:"exit_code"`
	// HTTPStatus is an HTTP job's answer; null for other jobs and when no
	// answer came.
	HTTPStatus *int `json:"http_status"`
	// Repeats counts the further fires of the slot, after ScheduledTime up
	// to LastScheduledTime, skipped for the same reason, that this skip
	// record stands for: a skip whose record is still waiting to be written
	// takes in the next skip of its slot, so past capacity a skip costs etcd
	// no key of its own (TestSkipsWaitingForEtcdAreMerged). 0, and null,
	// for every other record.
	Repeats           int        `json:"repeats"`
	LastScheduledTime *time.Time `json:"last_scheduled_time"`
	// TraceID is the OpenTelemetry trace id (32 hex digits) of the
	// execution's span, when tracing sampled it; "" otherwise, for records
	// without an execution, and for records written by versions that did
	// not keep it (TestRecordsKeepTheirTraceID).
	TraceID string `json:"trace_id"`
}

// Fires is how many fires the record stands for: 1, or 1 + Repeats for a
// skip record that took in later skips.
func (r Record) Fires() int { return 1 + r.Repeats }

// Outcomes recorded without an execution.
const (
	OutcomeSkipped = "skipped" // overlap policy or pause
	OutcomeMissed  = "missed"  // misfire policy or catchup window
	// OutcomeReset: the slot's recorded state was unreadable, and the
	// holder started it afresh (a record of its own, not an execution).
	OutcomeReset = "reset"
)

// The reasons (Record.Error) of the overlap policy's skips: a fire that
// fell due while a run of its slot went on (overlap: skip), or while one
// already waited behind it (overlap: queue).
const (
	SkippedRunning = "previous run still running"
	SkippedQueued  = "a run is already queued"
)

// Stored is a history record as etcd stores it. Records written before
// every write put the slot's state key also carry the slot's state as of
// their write (State), which NewestState still reads; the fenced writer
// now puts that state in the state key and stores the record without it.
type Stored struct {
	Record
	State *SlotState `json:"state,omitempty"`
	// Skipped is a skip record (Repeats) carried in this record's key
	// instead of a key of its own: the slot's fires skipped while the run
	// this record ends waited for etcd to record its start. Past capacity,
	// when most runs have such skips, a skip then costs etcd no key
	// (TestSkipsWhileAStartIsUnrecordedGoWithTheNextWrite). Nil for most
	// records. A reader reads both (Records).
	Skipped *Record `json:"skipped,omitempty"`
	// Seq is the record's place in its slot's sequence (the state's
	// HistorySeq before the write): nil in records written before
	// journals (FormatJournal), which a reader places by their key.
	Seq *int64 `json:"-"`
	// Limit is the slot's history_limit when the record was written: a
	// reader keeps that many of the slot's newest records (Gather). 0 in
	// records written when the state they carried said it
	// (State.HistoryLimit).
	Limit int `json:"-"`
}

// Records are the history records s stands for, in the order they were
// written: its carried skip, then its record.
func (s Stored) Records() []Record {
	if s.Skipped == nil {
		return []Record{s.Record}
	}
	return []Record{*s.Skipped, s.Record}
}

// What a stored record keeps of a run's output and error: the last
// StoredOutputBytes of its output tail, the first StoredErrorBytes of its
// error. The whole tail the executor kept is in the member's log and the
// execution's span. With them a stored record (its state included) is at
// most MaxStoredBytes whatever a job prints, and under 1 KiB for the
// names of a usual deployment: TestStoredRecordIsBounded.
const (
	StoredOutputBytes = 256
	StoredErrorBytes  = 256
	MaxStoredBytes    = 2600
)

// MarshalJSON writes s as etcd keeps it: every byte is paid for by every
// etcd member, so the record's empty fields are left out and its output
// and error are cut to their stored bounds. Record's own JSON, which
// kira history and the API print, has every field.
func (s Stored) MarshalJSON() ([]byte, error) {
	form := storedForm{storedRecord: cut(s.Record), State: s.State}
	if s.Skipped != nil {
		skipped := cut(*s.Skipped)
		form.Skipped = &skipped
	}
	return json.Marshal(form)
}

// cut is r as etcd keeps it: its output and error cut to their stored
// bounds, its empty fields left out.
func cut(r Record) storedRecord {
	c := storedRecord(r)
	c.OutputTail = lastBytes(c.OutputTail, StoredOutputBytes)
	c.Error = firstBytes(c.Error, StoredErrorBytes)
	return c
}

type storedForm struct {
	storedRecord
	State   *SlotState    `json:"state,omitempty"`
	Skipped *storedRecord `json:"skipped,omitempty"`
}

// storedRecord is Record with its optional fields left out when empty; the
// conversion storedRecord(r) makes the compiler hold the two field lists
// equal.
type storedRecord struct {
	Job               string        `json:"job"`
	Partition         int           `json:"partition"`
	ExecutionID       string        `json:"execution_id"`
	Member            string        `json:"member"`
	Token             fencing.Token `json:"token"`
	ScheduledTime     time.Time     `json:"scheduled_time"`
	StartedAt         time.Time     `json:"started_at"`
	FinishedAt        time.Time     `json:"finished_at"`
	Outcome           string        `json:"outcome"`
	Attempt           int           `json:"attempt"`
	Cause             Cause         `json:"trigger"`
	OutputTail        string        `json:"output_tail,omitempty"`
	Error             string        `json:"error,omitempty"`
	ExitCode          *int          `json:"exit_code,omitempty"`
	HTTPStatus        *int          `json:"http_status,omitempty"`
	Repeats           int           `json:"repeats,omitempty"`
	LastScheduledTime *time.Time    `json:"last_scheduled_time,omitempty"`
	TraceID           string        `json:"trace_id,omitempty"`
}

// lastBytes is the end of s, at most n bytes, not starting in the middle
// of a character.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for i := 0; i < utf8.UTFMax && len(s) > 0 && !utf8.RuneStart(s[0]); i++ {
		s = s[1:]
	}
	return s
}

// firstBytes is the start of s, at most n bytes, not ending in the middle
// of a character, with "…" when cut.
func firstBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-len("…")]
	i := len(s) - 1
	for i > 0 && len(s)-i < utf8.UTFMax && !utf8.RuneStart(s[i]) {
		i--
	}
	if !utf8.FullRuneInString(s[i:]) {
		s = s[:i]
	}
	return s + "…"
}
