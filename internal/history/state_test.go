package history

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
)

// A state key reads back as it was written, in JSON (what earlier versions
// read and write) and in the wire format, which is a fraction of the size
// and leaves out the member.
func TestStateKeyRoundTrip(t *testing.T) {
	s := shard.Slot{Job: "billing", Partition: 7}
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	standard := SlotState{Token: 81234, Member: "host-123e4567-e89b-12d3-a456-426614174000", Started: at.Add(time.Second),
		StartedID: jobs.ExecutionID(s.Job, s.Partition, at.Add(time.Second)), StartedAttempt: 1, Finished: at, Outcome: "succeeded",
		HistorySeq: 1234, HistoryLimit: 10, MissedDropped: 2}
	manual := standard
	manual.StartedID, manual.StartedAttempt, manual.Outcome = "manual-abc", 3, "a new outcome"
	never := SlotState{Token: 5, Member: "m"}
	handedOver := standard
	handedOver.Owed = []time.Time{at.Add(2 * time.Second), at.Add(3 * time.Second)}
	for _, st := range []SlotState{standard, manual, never, handedOver} {
		for _, format := range []int{FormatJournal, FormatState} {
			value := EncodeState(s, st, format)
			back, err := DecodeState(s, value)
			if err != nil {
				t.Fatalf("format %d: %v", format, err)
			}
			if !back.Started.Equal(st.Started) || !back.Finished.Equal(st.Finished) {
				t.Fatalf("format %d: times %v %v read back as %v %v", format, st.Started, st.Finished, back.Started, back.Finished)
			}
			back.Started, back.Finished = st.Started, st.Finished
			want := st
			if format >= FormatState {
				want.Member = ""
			}
			if !reflect.DeepEqual(back, want) {
				t.Fatalf("format %d: %+v read back as %+v", format, st, back)
			}
		}
	}
	data, _ := json.Marshal(standard)
	if wire := EncodeState(s, standard, FormatState); 3*len(wire) > len(data) {
		t.Fatalf("a state key takes %d bytes in the wire format, %d in JSON; want under a third", len(wire), len(data))
	}
	if _, err := DecodeState(s, []byte("s\xff")); err == nil {
		t.Fatal("a truncated wire state read as a state")
	}
}
