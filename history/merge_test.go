package history

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/shard"
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
