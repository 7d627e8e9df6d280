package history

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/kira-scheduler/kira/fencing"
	"google.golang.org/protobuf/encoding/protowire"
)

// FormatWire holds what FormatCompact holds, in protocol buffers' wire
// format after its first byte, wirePrefix: integers as varints (signed
// ones zigzag), known outcomes as small numbers. A reader skips fields it
// does not know, so a later version may add some without a new format.
// `protoc --decode_raw` reads the value after its first byte.
// TestCompactRecordsRoundTrip.
//
// Record fields: 1 member, 2 token, 3 scheduled, 4 started, 5 finished,
// 6 outcome (number), 7 outcome (text, if it has no number), 8 attempt,
// 9 cause, 10 execution id, 11 output tail, 12 error, 13 exit code,
// 14 HTTP status, 15 repeats, 16 last scheduled, 17 state, 18 carried
// skip record (a record, without state), 19 seq (FormatJournal's records
// only; earlier readers skip it), 20 trace id (its 16 bytes), 21 trace id
// (text, if it is not 32 hex digits). Earlier readers skip 20 and 21, and a
// record without them reads with no trace id (TestRecordsKeepTheirTraceID);
// 22 history limit (Stored.Limit; earlier readers skip it).
// State fields:
// 1 token, 2 member, 3 started, 4 started execution id, 5 started attempt,
// 6 finished, 7 outcome (number), 8 outcome (text), 9 history seq,
// 10 history limit, 11 missed dropped.
const wirePrefix = '3'

// outcomeNumbers are the wire format's numbers of the outcomes it knows;
// never renumber one.
var outcomeNumbers = map[string]uint64{
	"succeeded": 1, "failed": 2, "timed_out": 3, "cancelled": 4, "fenced": 5,
	OutcomeSkipped: 6, OutcomeMissed: 7, OutcomeReset: 8,
}

// outcomeNames is outcomeNumbers the other way.
var outcomeNames = func() map[uint64]string {
	m := map[uint64]string{}
	for name, n := range outcomeNumbers {
		m[n] = name
	}
	return m
}()

// appendWire appends c in the wire format.
func appendWire(b []byte, c compact) []byte {
	b = appendString(b, 1, c.Member)
	b = appendInt(b, 2, int64(c.Token))
	b = appendInt(b, 3, c.Scheduled)
	b = appendOffset(b, 4, c.Started)
	b = appendOffset(b, 5, c.Finished)
	b = appendOutcome(b, 6, 7, c.Outcome)
	b = appendInt(b, 8, int64(c.Attempt))
	b = appendString(b, 9, string(c.Cause))
	b = appendString(b, 10, c.ExecutionID)
	b = appendString(b, 11, c.OutputTail)
	b = appendString(b, 12, c.Error)
	if c.ExitCode != nil {
		b = appendPresent(b, 13, int64(*c.ExitCode))
	}
	if c.HTTPStatus != nil {
		b = appendPresent(b, 14, int64(*c.HTTPStatus))
	}
	b = appendInt(b, 15, int64(c.Repeats))
	b = appendOffset(b, 16, c.LastScheduled)
	if st := c.State; st != nil {
		b = protowire.AppendTag(b, 17, protowire.BytesType)
		b = protowire.AppendBytes(b, appendWireState(nil, *st))
	}
	if c.Skipped != nil {
		b = protowire.AppendTag(b, 18, protowire.BytesType)
		b = protowire.AppendBytes(b, appendWire(nil, *c.Skipped))
	}
	if c.Seq != nil {
		b = appendPresent(b, 19, *c.Seq)
	}
	b = appendInt(b, 22, int64(c.Limit))
	return appendTraceID(b, c.TraceID)
}

// appendTraceID appends trace id id as its 16 bytes in field 20, or as
// text in field 21 if it is not 32 hex digits; nothing if it is empty.
func appendTraceID(b []byte, id string) []byte {
	if raw, err := hex.DecodeString(id); err == nil && len(raw) == 16 && hex.EncodeToString(raw) == id {
		b = protowire.AppendTag(b, 20, protowire.BytesType)
		return protowire.AppendBytes(b, raw)
	}
	return appendString(b, 21, id)
}

func appendWireState(b []byte, st compactState) []byte {
	if st.Token != nil {
		b = appendPresent(b, 1, int64(*st.Token))
	}
	if st.Member != nil {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, *st.Member)
	}
	b = appendOffset(b, 3, st.Started)
	if st.StartedID != nil {
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendString(b, *st.StartedID)
	}
	b = appendInt(b, 5, int64(st.StartedAttempt))
	b = appendOffset(b, 6, st.Finished)
	b = appendOutcome(b, 7, 8, st.Outcome)
	b = appendInt(b, 9, st.HistorySeq)
	b = appendInt(b, 10, int64(st.HistoryLimit))
	b = appendInt(b, 11, st.MissedDropped)
	for _, off := range st.Owed {
		b = appendPresent(b, 12, off)
	}
	return b
}

// appendString appends field num unless s is empty (absent reads as "").
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendInt appends field num, zigzag, unless v is 0 (absent reads as 0).
func appendInt(b []byte, num protowire.Number, v int64) []byte {
	if v == 0 {
		return b
	}
	return appendPresent(b, num, v)
}

// appendPresent appends field num, zigzag, even if v is 0: its presence
// tells 0 from absent.
func appendPresent(b []byte, num protowire.Number, v int64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, protowire.EncodeZigZag(v))
}

// appendOffset appends a time offset if there is one.
func appendOffset(b []byte, num protowire.Number, off *int64) []byte {
	if off == nil {
		return b
	}
	return appendPresent(b, num, *off)
}

// appendOutcome appends outcome o as its number in field num, or as text
// in field text if it has none.
func appendOutcome(b []byte, num, text protowire.Number, o string) []byte {
	if n, ok := outcomeNumbers[o]; ok {
		b = protowire.AppendTag(b, num, protowire.VarintType)
		return protowire.AppendVarint(b, n)
	}
	return appendString(b, text, o)
}

// wireField is one field read from the wire format: its number, and its
// value as a zigzag-decoded integer or as bytes, by its type.
type wireField struct {
	num   protowire.Number
	isInt bool
	v     int64
	raw   uint64 // the varint as written (outcome numbers)
	bytes []byte
}

// readWire calls each for every field of b in turn, skipping fields of
// other types than varint and bytes; it fails on a malformed value.
func readWire(b []byte, each func(wireField) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		f := wireField{num: num}
		switch typ {
		case protowire.VarintType:
			f.raw, n = protowire.ConsumeVarint(b)
			f.isInt, f.v = true, protowire.DecodeZigZag(f.raw)
		case protowire.BytesType:
			f.bytes, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := each(f); err != nil {
			return err
		}
	}
	return nil
}

// errWireType is a known field written with another type than its own.
var errWireType = errors.New("a field has the wrong type")

// decodeWire reads a record in the wire format (after its prefix).
func decodeWire(b []byte) (compact, error) {
	var c compact
	err := readWire(b, func(f wireField) error {
		switch {
		case (f.num == 17 || f.num == 18) && f.isInt:
			return errWireType
		case f.num == 17:
			st, err := decodeWireState(f.bytes)
			c.State = &st
			return err
		case f.num == 18:
			skipped, err := decodeWire(f.bytes)
			c.Skipped = &skipped
			return err
		}
		return c.set(f)
	})
	if err != nil {
		return compact{}, fmt.Errorf("history: a record in the wire format: %w", err)
	}
	return c, nil
}

// set sets the record field f is, if it knows it.
func (c *compact) set(f wireField) error {
	if f.num <= 16 && f.isInt == recordText(f.num) {
		return errWireType
	}
	v, text := f.v, string(f.bytes)
	switch f.num {
	case 1:
		c.Member = text
	case 2:
		c.Token = fencing.Token(v)
	case 3:
		c.Scheduled = v
	case 4:
		c.Started = &v
	case 5:
		c.Finished = &v
	case 6:
		c.Outcome = outcomeName(f.raw)
	case 7:
		c.Outcome = text
	case 8:
		c.Attempt = int(v)
	case 9:
		c.Cause = Cause(text)
	case 10:
		c.ExecutionID = text
	case 11:
		c.OutputTail = text
	case 12:
		c.Error = text
	case 13:
		code := int(v)
		c.ExitCode = &code
	case 14:
		status := int(v)
		c.HTTPStatus = &status
	case 15:
		c.Repeats = int(v)
	case 16:
		c.LastScheduled = &v
	case 19:
		if !f.isInt {
			return errWireType
		}
		c.Seq = &v
	case 22:
		if !f.isInt {
			return errWireType
		}
		c.Limit = int(v)
	case 20, 21:
		if f.isInt || f.num == 20 && len(f.bytes) != 16 {
			return errWireType
		}
		c.TraceID = text
		if f.num == 20 {
			c.TraceID = hex.EncodeToString(f.bytes)
		}
	}
	return nil
}

// recordText reports whether record field num holds bytes, not an integer.
func recordText(num protowire.Number) bool {
	switch num {
	case 1, 7, 9, 10, 11, 12:
		return true
	}
	return false
}

func decodeWireState(b []byte) (compactState, error) {
	var st compactState
	err := readWire(b, func(f wireField) error {
		isText := f.num == 2 || f.num == 4 || f.num == 8
		if f.num <= 12 && f.isInt == isText {
			return errWireType
		}
		v, text := f.v, string(f.bytes)
		switch f.num {
		case 1:
			token := fencing.Token(v)
			st.Token = &token
		case 2:
			st.Member = &text
		case 3:
			st.Started = &v
		case 4:
			st.StartedID = &text
		case 5:
			st.StartedAttempt = int(v)
		case 6:
			st.Finished = &v
		case 7:
			st.Outcome = outcomeName(f.raw)
		case 8:
			st.Outcome = text
		case 9:
			st.HistorySeq = v
		case 10:
			st.HistoryLimit = int(v)
		case 11:
			st.MissedDropped = v
		case 12:
			st.Owed = append(st.Owed, v)
		}
		return nil
	})
	return st, err
}

// outcomeName is the outcome numbered n; a number this version does not
// know reads as an outcome that says so, not as a run that succeeded.
func outcomeName(n uint64) string {
	if name, ok := outcomeNames[n]; ok {
		return name
	}
	return fmt.Sprintf("outcome #%d", n)
}
