package history

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/shard"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// FuzzNewestState: whatever a slot's state key and newest record (or a
// journal entry) hold, the state is read, or refused with an error; it
// never panics, and a ring record newer than the state key decides alone.
func FuzzNewestState(f *testing.F) {
	good, _ := json.Marshal(Stored{Record: Record{Job: "a", ExecutionID: "x"}, State: &SlotState{Token: 5, HistorySeq: 3}})
	f.Add([]byte(`{"token":4,"member":"m","history_seq":2}`), good, true)
	f.Add([]byte("{not json"), good, true)
	f.Add([]byte(`{"token":4}`), []byte("\x00"), false)
	f.Add([]byte(`{"token":4}`), Encode(Stored{Record: Record{Job: "a", ScheduledTime: time.Unix(5, 0)}, State: &SlotState{Token: 5, Started: time.Unix(6, 0)}}, FormatCompact), true)
	f.Add([]byte(`{"token":4}`), []byte(`2{"t":0}`), true)
	f.Add([]byte(`{"token":4}`), Encode(Stored{Record: Record{Job: "a", ScheduledTime: time.Unix(5, 0), Outcome: "failed"}, State: &SlotState{Token: 5, Started: time.Unix(6, 0)}}, FormatWire), true)
	f.Add([]byte(`{"token":4}`), []byte("3\x88\x01\x05"), true)
	seq := int64(7)
	f.Add([]byte(`{"token":4}`), EncodeJournal("m", []JournalItem{{Slot: shard.Slot{Job: "a"},
		Stored: Stored{Record: Record{Job: "a", Member: "m", ScheduledTime: time.Unix(5, 0)}, State: &SlotState{Token: 5}, Seq: &seq}}}), true)
	f.Fuzz(func(t *testing.T, state, record []byte, recordNewer bool) {
		stateKv := []*mvccpb.KeyValue{{Key: []byte("s"), Value: state, ModRevision: 10}}
		recRev := int64(5)
		if recordNewer {
			recRev = 20
		}
		recordKv := []*mvccpb.KeyValue{{Key: []byte("r"), Value: record, ModRevision: recRev}}
		var placed []Slotted
		if items, err := DecodeJournal("m", record); err == nil {
			recordKv = nil
			for _, it := range items {
				placed = append(placed, Slotted{Slot: it.Slot, Stored: it.Stored, Revision: recRev})
			}
		}
		st, err := NewestState(shard.Slot{Job: "a"}, stateKv, recordKv, placed)
		r, decodeErr := Decode(shard.Slot{Job: "a"}, record)
		var keyState SlotState
		keyUnreadable := json.Unmarshal(state, &keyState) != nil
		if recordKv != nil && recordNewer && decodeErr == nil && r.State != nil && (keyUnreadable || r.State.Token >= keyState.Token) && (err != nil || !reflect.DeepEqual(st, *r.State)) {
			t.Fatalf("a newer readable record's state, under a token no lower than the state key's, was not taken: %+v, %v", st, err)
		}
		if !keyUnreadable && err == nil && st.Token < keyState.Token {
			t.Fatalf("a state under token %d taken over the state key's under %d", st.Token, keyState.Token)
		}
		if err != nil && !reflect.DeepEqual(st, SlotState{}) {
			t.Fatalf("an error with a state: %+v", st)
		}
	})
}
