package history

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/shard"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// The newest state is the one written under the highest token, and of
// those the newest by revision, the state key winning a tie: a journal
// entry put again at a later revision with an earlier holder's record does
// not pass for the new holder's state.
func TestNewestStateIsTheHighestTokensNewest(t *testing.T) {
	s := shard.Slot{Job: "tick"}
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	stateKey := func(token int64, rev int64, started time.Time) []*mvccpb.KeyValue {
		data, _ := json.Marshal(SlotState{Token: fencing.Token(token), Started: started, Finished: started})
		return []*mvccpb.KeyValue{{Key: []byte("state"), Value: data, ModRevision: rev}}
	}
	journaled := func(token int64, rev int64, started time.Time) Slotted {
		seq := int64(1)
		return Slotted{Slot: s, Revision: rev, Stored: Stored{Seq: &seq, State: &SlotState{Token: fencing.Token(token), Started: started}}}
	}
	for _, c := range []struct {
		name    string
		state   []*mvccpb.KeyValue
		journal []Slotted
		want    time.Time
	}{
		{"a later holder's state key against an earlier holder's record put again later",
			stateKey(20, 100, at.Add(2*time.Second)), []Slotted{journaled(10, 150, at)}, at.Add(2 * time.Second)},
		{"one holder: the newest revision", stateKey(10, 100, at), []Slotted{journaled(10, 150, at.Add(time.Second))}, at.Add(time.Second)},
		{"one holder, one revision: the state key", stateKey(10, 150, at), []Slotted{journaled(10, 150, at.Add(time.Second))}, at},
		{"a later holder's record against an earlier state key", stateKey(10, 200, at), []Slotted{journaled(20, 150, at.Add(3*time.Second))}, at.Add(3 * time.Second)},
		{"records only", nil, []Slotted{journaled(20, 150, at.Add(time.Second)), journaled(10, 170, at)}, at.Add(time.Second)},
	} {
		st, err := NewestState(s, c.state, nil, c.journal)
		if err != nil || !st.Started.Equal(c.want) {
			t.Errorf("%s: started %v (err %v); want %v", c.name, st.Started, err, c.want)
		}
	}
}

// Gather keeps each record once (a record in its ring and in a journal),
// a slot's records with a Seq cut to the limit its newest state names,
// records without a Seq as the ring holds them, and each slot's records
// together, slots in the order first met.
func TestGatherKeepsEachRecordOnceWithinTheLimit(t *testing.T) {
	a, b := shard.Slot{Job: "j", Partition: 0}, shard.Slot{Job: "j", Partition: 1}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(s shard.Slot, seq int64, limit int) Slotted {
		st := Stored{Record: Record{Job: s.Job, Partition: s.Partition, ExecutionID: fmt.Sprint(s.Partition, "-", seq), ScheduledTime: t0.Add(time.Duration(seq) * time.Second)}}
		if seq >= 0 {
			st.Seq = &seq
		}
		if limit > 0 {
			st.State = &SlotState{HistoryLimit: limit}
		}
		return Slotted{Slot: s, Stored: st}
	}
	ring := []Slotted{rec(a, 1, 2), rec(b, -1, 0), rec(a, 2, 2), rec(a, 3, 2)}
	journal := []Slotted{rec(a, 3, 2), rec(a, 4, 2)}
	var got []string
	for _, r := range Gather(ring, journal) {
		got = append(got, r.ExecutionID)
	}
	if want := "[0-4 0-3 1--1]"; fmt.Sprint(got) != want {
		t.Fatalf("Gather = %v, want %s", got, want)
	}
	// Records written now name the limit themselves, without a state.
	for _, all := range [][]Slotted{ring, journal} {
		for i := range all {
			if st := all[i].Stored.State; st != nil {
				all[i].Stored.State, all[i].Stored.Limit = nil, st.HistoryLimit
			}
		}
	}
	got = nil
	for _, r := range Gather(ring, journal) {
		got = append(got, r.ExecutionID)
	}
	if want := "[0-4 0-3 1--1]"; fmt.Sprint(got) != want {
		t.Fatalf("Gather of records naming their limit = %v, want %s", got, want)
	}
}
