package scheduler

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kira-scheduler/kira/etcdtest"
	"github.com/kira-scheduler/kira/history"
	"github.com/kira-scheduler/kira/keyspace"
	"github.com/kira-scheduler/kira/shard"
)

// A slot's state is the newer, by revision, of its state key and its newest
// record; a record written before records held a state has none.
func TestStateIsTheNewerOfStateKeyAndRecord(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	slot := shard.Slot{Job: "tick", Partition: 3}
	put := func(key string, v any) {
		t.Helper()
		data, _ := json.Marshal(v)
		if _, err := cli.Put(ctx, key, string(data)); err != nil {
			t.Fatal(err)
		}
	}
	read := func() history.SlotState {
		t.Helper()
		st, _, _, err := readAcquired(ctx, cli, "c", slot)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := read(); st != (history.SlotState{}) {
		t.Fatalf("state of a slot never run: %+v; want zero", st)
	}
	put(keyspace.State("c", slot), history.SlotState{HistorySeq: 1, StartedID: "state-1"})
	put(keyspace.HistoryEntry("c", slot, 1, 10), history.Stored{Record: history.Record{ExecutionID: "r1"}, State: &history.SlotState{HistorySeq: 2, StartedID: "record-2"}})
	put(keyspace.HistoryEntry("c", slot, 0, 10), history.Stored{Record: history.Record{ExecutionID: "r0"}, State: &history.SlotState{HistorySeq: 1, StartedID: "record-1"}})
	if st := read(); st.StartedID != "record-1" {
		t.Fatalf("state %+v; want the newest record's (record-1, written last)", st)
	}
	put(keyspace.State("c", slot), history.SlotState{HistorySeq: 2, StartedID: "state-2"})
	if st := read(); st.StartedID != "state-2" {
		t.Fatalf("state %+v; want the state key's, written after the records", st)
	}
	put(keyspace.HistoryEntry("c", slot, 2, 10), history.Record{ExecutionID: "old"}) // as an earlier version wrote it
	if st := read(); st.StartedID != "state-2" {
		t.Fatalf("state %+v; want the state key's: the newest record holds none", st)
	}
	other := shard.Slot{Job: "tick", Partition: 30} // shares the prefix "tick/3" but not "tick/3/"
	put(keyspace.HistoryEntry("c", other, 0, 10), history.Stored{Record: history.Record{ExecutionID: "x"}, State: &history.SlotState{StartedID: "other"}})
	if st := read(); st.StartedID != "state-2" {
		t.Fatalf("state %+v; want slot 3's, not slot 30's", st)
	}
	if _, err := cli.Put(ctx, keyspace.HistoryEntry("c", slot, 3, 10), "{not json"); err != nil {
		t.Fatal(err)
	}
	st, unreadable, _, err := readAcquired(ctx, cli, "c", slot)
	if err != nil || unreadable == nil || !strings.Contains(unreadable.Error(), "unreadable") || st != (history.SlotState{}) {
		t.Fatalf("newest record unreadable: state %+v, unreadable %v, err %v; want the zero state and the reason", st, unreadable, err)
	}
}
