package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// How a stored record is encoded in etcd. FormatJSON is Stored's JSON,
// which every version reads. FormatCompact is Record and its state without
// what a reader can derive: the job and partition (from the key), the
// standard execution ids (from the scheduled time), the member and token
// once (a record and the state written with it share them), times as
// nanoseconds from the scheduled time; its value is "2" and that as JSON.
// FormatWire holds the same in protocol buffers' wire format (wire.go),
// after "3". Neither is JSON, so a member of an earlier version fails to
// read a value in a newer format (it then resets the slot, as for any
// unreadable state) rather than reading past it to an older state key. A
// member writes the newest format every member of its view reads
// (member.View.HistoryFormat), so while an older member stays in the
// view it meets no record it cannot read; one that joins after every
// member read a newer format (a downgrade) does.
// TestCompactRecordsRoundTrip, TestOldMembersKeepRecordsReadable.
const (
	FormatJSON    = 1
	FormatCompact = 2
	FormatWire    = 3 // FormatCompact's fields in protocol buffers' wire format (wire.go)
	// FormatJournal is FormatWire's records with their Seq, most of them in
	// their members' journals (journal.go) rather than their slots' rings:
	// a reader of an earlier format would not look there.
	FormatJournal = 4
	// FormatState is FormatJournal with the slots' state keys in the wire
	// format too (EncodeState), not JSON: every write of a slot puts its
	// state key, and every byte of it is paid by every etcd member.
	FormatState = 5
	// NewestFormat is the newest format this version reads; members
	// publish it in their member record.
	NewestFormat = FormatState
)

// compactPrefix opens a value in FormatCompact.
const compactPrefix = "2"

// Encode is s as etcd stores it in the given format: its output and error
// cut to their bounds (StoredOutputBytes, StoredErrorBytes) either way.
// A compact record's Job and Partition are those of the key it is put at.
// A record without a scheduled time, which its other times are counted
// from, is stored as JSON.
func Encode(s Stored, format int) []byte {
	if format < FormatCompact || s.ScheduledTime.IsZero() {
		data, _ := json.Marshal(s)
		return data
	}
	c := toCompact(s)
	if format == FormatCompact {
		data, _ := json.Marshal(c)
		return append([]byte(compactPrefix), data...)
	}
	return appendWire([]byte{wirePrefix}, c)
}

// toCompact is s without what a reader derives (see FormatCompact).
func toCompact(s Stored) compact {
	r := s.Record
	at := r.ScheduledTime
	c := compact{Member: r.Member, Token: r.Token, Scheduled: at.UnixNano(), Started: offset(at, r.StartedAt), Finished: offset(at, r.FinishedAt),
		Outcome: r.Outcome, Attempt: r.Attempt, Cause: r.Cause, OutputTail: lastBytes(r.OutputTail, StoredOutputBytes),
		Error: firstBytes(r.Error, StoredErrorBytes), ExitCode: r.ExitCode, HTTPStatus: r.HTTPStatus, Repeats: r.Repeats, TraceID: r.TraceID}
	if c.Cause == CauseSchedule {
		c.Cause = ""
	}
	if r.ExecutionID != standardID(r.Job, r.Partition, at) {
		c.ExecutionID = r.ExecutionID
	}
	if r.LastScheduledTime != nil {
		c.LastScheduled = offset(at, *r.LastScheduledTime)
	}
	if s.Skipped != nil {
		c.Skipped = carriedCompact(*s.Skipped, r)
	}
	c.Seq, c.Limit = s.Seq, s.Limit
	if st := s.State; st != nil {
		c.State = &compactState{Started: offset(at, st.Started), StartedAttempt: st.StartedAttempt, Finished: offset(at, st.Finished),
			Outcome: st.Outcome, HistorySeq: st.HistorySeq, HistoryLimit: st.HistoryLimit, MissedDropped: st.MissedDropped}
		if st.StartedID != standardID(r.Job, r.Partition, st.Started) {
			c.State.StartedID = &st.StartedID
		}
		if st.Member != r.Member {
			c.State.Member = &st.Member
		}
		if st.Token != r.Token {
			c.State.Token = &st.Token
		}
	}
	return c
}

// carriedCompact is skip record r carried in record in (Stored.Skipped),
// without the member and token it shares with in.
func carriedCompact(r, in Record) *compact {
	c := toCompact(Stored{Record: r})
	if c.Member == in.Member {
		c.Member = ""
	}
	if c.Token == in.Token {
		c.Token = 0
	}
	return &c
}

// Decode reads a stored record of slot s in any format. Times read from a
// compact or wire record are in UTC.
func Decode(s shard.Slot, value []byte) (Stored, error) {
	var c compact
	switch {
	case len(value) > 0 && value[0] == wirePrefix:
		var err error
		if c, err = decodeWire(value[1:]); err != nil {
			return Stored{}, err
		}
	case bytes.HasPrefix(value, []byte(compactPrefix+"{")):
		if err := json.Unmarshal(value[len(compactPrefix):], &c); err != nil {
			return Stored{}, err
		}
	default:
		var st Stored
		err := json.Unmarshal(value, &st)
		return st, err
	}
	return fromCompact(s, c)
}

// fromCompact is the record of slot s that c holds, with what it derives.
func fromCompact(s shard.Slot, c compact) (Stored, error) {
	if c.Scheduled == 0 {
		return Stored{}, errors.New("history: a compact record without its scheduled time")
	}
	at := time.Unix(0, c.Scheduled).UTC()
	r := Record{Job: s.Job, Partition: s.Partition, ExecutionID: c.ExecutionID, Member: c.Member, Token: c.Token,
		ScheduledTime: at, StartedAt: timeAt(at, c.Started), FinishedAt: timeAt(at, c.Finished), Outcome: c.Outcome, Attempt: c.Attempt,
		Cause: c.Cause, OutputTail: c.OutputTail, Error: c.Error, ExitCode: c.ExitCode, HTTPStatus: c.HTTPStatus, Repeats: c.Repeats, TraceID: c.TraceID}
	if r.ExecutionID == "" {
		r.ExecutionID = standardID(s.Job, s.Partition, at)
	}
	if r.Cause == "" {
		r.Cause = CauseSchedule
	}
	if c.LastScheduled != nil {
		last := timeAt(at, c.LastScheduled)
		r.LastScheduledTime = &last
	}
	out := Stored{Record: r, Seq: c.Seq, Limit: c.Limit}
	if cs := c.State; cs != nil {
		out.State = cs.slotState(s, c, at)
	}
	if cc := c.Skipped; cc != nil {
		carried := *cc
		if carried.Member == "" {
			carried.Member = c.Member
		}
		if carried.Token == 0 {
			carried.Token = c.Token
		}
		skipped, err := fromCompact(s, carried)
		if err != nil {
			return Stored{}, fmt.Errorf("history: a carried skip record: %w", err)
		}
		out.Skipped = &skipped.Record
	}
	return out, nil
}

// slotState is the slot's state cs holds, in record c scheduled at at.
func (cs *compactState) slotState(s shard.Slot, c compact, at time.Time) *SlotState {
	st := SlotState{Token: c.Token, Member: c.Member, Started: timeAt(at, cs.Started), StartedAttempt: cs.StartedAttempt,
		Finished: timeAt(at, cs.Finished), Outcome: cs.Outcome, HistorySeq: cs.HistorySeq, HistoryLimit: cs.HistoryLimit, MissedDropped: cs.MissedDropped}
	if cs.Token != nil {
		st.Token = *cs.Token
	}
	if cs.Member != nil {
		st.Member = *cs.Member
	}
	if cs.StartedID != nil {
		st.StartedID = *cs.StartedID
	} else {
		st.StartedID = standardID(s.Job, s.Partition, st.Started)
	}
	return &st
}

// DecodeEntry reads the record stored at kv, a key of a slot's history
// in cluster (keyspace.HistoryEntry), in either format.
func DecodeEntry(cluster string, kv *mvccpb.KeyValue) (Stored, error) {
	s, ok := keyspace.ParseHistoryEntry(cluster, string(kv.Key))
	if !ok {
		return Stored{}, fmt.Errorf("history: %s is not a history record's key", kv.Key)
	}
	return Decode(s, kv.Value)
}

// compact is FormatCompact's JSON. Times are nanoseconds from Scheduled
// (Unix nanoseconds), absent for the zero time.
type compact struct {
	Member        string        `json:"m,omitempty"`
	Token         fencing.Token `json:"k,omitempty"`
	Scheduled     int64         `json:"t"`
	Started       *int64        `json:"s,omitempty"`
	Finished      *int64        `json:"f,omitempty"`
	Outcome       string        `json:"o,omitempty"`
	Attempt       int           `json:"a,omitempty"`
	Cause         Cause         `json:"c,omitempty"` // absent: CauseSchedule
	ExecutionID   string        `json:"x,omitempty"`
	OutputTail    string        `json:"out,omitempty"`
	Error         string        `json:"err,omitempty"`
	ExitCode      *int          `json:"exit,omitempty"`
	HTTPStatus    *int          `json:"http,omitempty"`
	Repeats       int           `json:"r,omitempty"`
	LastScheduled *int64        `json:"l,omitempty"`
	State         *compactState `json:"n,omitempty"`
	Skipped       *compact      `json:"sk,omitempty"` // without the member and token it shares
	Seq           *int64        `json:"-"`            // the wire format's only (Stored.Seq)
	Limit         int           `json:"-"`            // the wire format's only (Stored.Limit)
	// TraceID: absent in records of versions that did not keep it, which
	// then read as "" (TestRecordsKeepTheirTraceID).
	TraceID string `json:"tr,omitempty"`
}

// compactState is the slot's state in a compact record; Token, Member and
// StartedID are there only when they differ from what a reader derives.
type compactState struct {
	Token          *fencing.Token `json:"k,omitempty"`
	Member         *string        `json:"m,omitempty"`
	Started        *int64         `json:"s,omitempty"`
	StartedID      *string        `json:"x,omitempty"`
	StartedAttempt int            `json:"a,omitempty"`
	Finished       *int64         `json:"f,omitempty"`
	Outcome        string         `json:"o,omitempty"`
	HistorySeq     int64          `json:"q,omitempty"`
	HistoryLimit   int            `json:"l,omitempty"`
	MissedDropped  int64          `json:"d,omitempty"`
	Owed           []int64        `json:"w,omitempty"` // the state key's only (SlotState.Owed)
}

// offset is t as nanoseconds from at; nil for the zero time.
func offset(at, t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	d := t.UnixNano() - at.UnixNano()
	return &d
}

// timeAt is the time offset nanoseconds from at (UTC); the zero time for nil.
func timeAt(at time.Time, offset *int64) time.Time {
	if offset == nil {
		return time.Time{}
	}
	return time.Unix(0, at.UnixNano()+*offset).UTC()
}

// standardID is the execution id a compact record leaves out: that of the
// slot's fire at its scheduled time; "" for the zero time.
func standardID(job string, partition int, at time.Time) string {
	if at.IsZero() {
		return ""
	}
	return jobs.ExecutionID(job, partition, at)
}
