package history

import (
	"encoding/json"
	"time"

	"github.com/kira-scheduler/kira/internal/shard"
)

// A slot's state key holds its SlotState: as JSON before FormatState, in
// the wire format after statePrefix from it (the state fields of
// FormatWire's field 17, with the token always there and times as Unix
// nanoseconds). The wire form leaves out the member that wrote it: nothing
// decides by it, the token names the holding, and every byte of a state
// key is written by every etcd member at every execution. A member of an
// earlier version fails to read the wire form (it then resets the slot, as
// for any unreadable state), so a member writes it only once every member
// of its view reads it (member.View.HistoryFormat).
// TestStateKeyRoundTrip.
const statePrefix = 's'

// epoch is what a state key's times count from.
var epoch = time.Unix(0, 0).UTC()

// EncodeState is the value of slot s's state key holding st, in format.
func EncodeState(s shard.Slot, st SlotState, format int) []byte {
	if format < FormatState {
		data, _ := json.Marshal(st)
		return data
	}
	token := st.Token
	c := compactState{Token: &token, Started: offset(epoch, st.Started), StartedAttempt: st.StartedAttempt,
		Finished: offset(epoch, st.Finished), Outcome: st.Outcome, HistorySeq: st.HistorySeq, HistoryLimit: st.HistoryLimit, MissedDropped: st.MissedDropped}
	if st.StartedID != standardID(s.Job, s.Partition, st.Started) {
		c.StartedID = &st.StartedID
	}
	for _, t := range st.Owed {
		c.Owed = append(c.Owed, *offset(epoch, t))
	}
	return appendWireState([]byte{statePrefix}, c)
}

// DecodeState reads the value of slot s's state key, in either form.
func DecodeState(s shard.Slot, value []byte) (SlotState, error) {
	if len(value) == 0 || value[0] != statePrefix {
		var st SlotState
		err := json.Unmarshal(value, &st)
		return st, err
	}
	c, err := decodeWireState(value[1:])
	if err != nil {
		return SlotState{}, err
	}
	st := c.slotState(s, compact{}, epoch)
	for _, off := range c.Owed {
		st.Owed = append(st.Owed, timeAt(epoch, &off))
	}
	return *st, nil
}
