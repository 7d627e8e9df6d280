package ops

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
)

// Rings reads what a read of every ring and the journals reads, in the
// same order, after records are added, overwritten and deleted, junk is
// written under the prefix, and journal entries come.
func TestRingsFollowWritesAndDeletes(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write := func(job string, p, i int, outcome string) string {
		s := shard.Slot{Job: job, Partition: p}
		rec := history.Record{Job: job, Partition: p, ExecutionID: job + outcome, Member: "m1", ScheduledTime: t0.Add(time.Duration(i) * time.Minute), Outcome: outcome}
		key := keyspace.HistoryEntry("c", s, int64(i), config.DefaultHistoryLimit)
		if _, err := cli.Put(ctx, key, string(history.Encode(history.Stored{Record: rec}, history.FormatWire))); err != nil {
			t.Fatal(err)
		}
		return key
	}
	rings := NewRings(cli, "c")
	same := func(when string) {
		t.Helper()
		got, err := rings.Records(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := readRecordsUnder(ctx, cli, nil, "c", keyspace.Cluster("c")+"history/", func(shard.Slot) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the cache reads %+v\nevery ring reads %+v", when, got, want)
		}
	}
	write("b", 0, 0, "succeeded")
	write("a", 1, 0, "succeeded")
	same("first read")
	write("a", 0, 0, "failed")    // a key new to the cache, sorted before the others
	write("b", 0, 0, "timed_out") // overwritten
	same("after a write and an overwrite")
	write("a", 1, 0, "cancelled") // overwritten alone: its slot is gathered again
	same("after an overwrite alone")
	gone := write("a", 0, 1, "succeeded")
	same("after another write")
	if _, err := cli.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	same("after a delete")
	if _, err := cli.Put(ctx, keyspace.Cluster("c")+"history/junk", "not a record"); err != nil {
		t.Fatal(err)
	}
	same("with junk")
	journal := func(n int, job string, p int, seq int64) {
		rec := history.Record{Job: job, Partition: p, ExecutionID: job + "-journal", Member: "m1", ScheduledTime: t0.Add(time.Hour), StartedAt: t0.Add(time.Hour), Outcome: "succeeded"}
		items := []history.JournalItem{{Slot: shard.Slot{Job: job, Partition: p}, Stored: history.Stored{Record: rec, Seq: &seq}}}
		if _, err := cli.Put(ctx, keyspace.JournalEntry("c", "m1", n), string(history.EncodeJournal("m1", items))); err != nil {
			t.Fatal(err)
		}
	}
	journal(0, "a", 1, 5) // a slot with a ring
	journal(1, "z", 0, 1) // a slot with none
	same("with journal entries")
	if recs, err := rings.Records(ctx, nil); err != nil || len(recs) != 5 {
		t.Fatalf("rings: %d records, %v", len(recs), err)
	}
}
