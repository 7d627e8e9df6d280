package ops

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// journalReads counts the reads of the journals' keys.
type journalReads struct {
	clientv3.KV
	prefix string
	n      atomic.Int64
}

func (r *journalReads) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if strings.HasPrefix(key, r.prefix) {
		r.n.Add(1)
	}
	return r.KV.Get(ctx, key, opts...)
}

// ReadJobs finds each job's last fire as its newest record by revision,
// in its rings or in a member's journal, and reads the journals once for
// all the jobs.
func TestReadJobsFindsTheLastFireInRingsAndJournals(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	put(t, cli, keyspace.Catalog("c"), config.Catalog{Cluster: "c", Jobs: []config.Job{
		{Name: "a", Schedule: "@every 1s", Partitions: 1}, {Name: "b", Schedule: "@every 1s", Partitions: 1},
		{Name: "c", Schedule: "@every 1s", Partitions: 1}, {Name: "d", Schedule: "@every 1s", Partitions: 1}}})
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	record := func(job, id string) history.Record {
		return history.Record{Job: job, ExecutionID: id, ScheduledTime: t0, StartedAt: t0, Outcome: "succeeded", Member: "m"}
	}
	ring := func(job, id string, seq int64) {
		put(t, cli, keyspace.HistoryEntry("c", shard.Slot{Job: job}, seq, 10), string(history.Encode(history.Stored{Record: record(job, id)}, history.FormatJournal)))
	}
	journalEntry := func(n int, recs ...history.Record) {
		var items []history.JournalItem
		for i, r := range recs {
			seq := int64(10 + i)
			items = append(items, history.JournalItem{Slot: shard.Slot{Job: r.Job}, Stored: history.Stored{Record: r, Seq: &seq}})
		}
		put(t, cli, keyspace.JournalEntry("c", "m", n), string(history.EncodeJournal("m", items)))
	}
	ring("a", "a-ring", 0)
	ring("b", "b-old", 0)
	journalEntry(0, record("a", "a-old"), record("b", "b-journal"), record("c", "c-journal"))
	ring("a", "a-newer", 1)
	kv := &journalReads{KV: cli, prefix: keyspace.Journals("c")}
	jobs, err := ReadJobs(context.Background(), kv, nil, nil, "c", t0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "a-newer", "b": "b-journal", "c": "c-journal", "d": ""}
	for _, j := range jobs {
		got := ""
		if j.LastFire != nil {
			got = j.LastFire.ExecutionID
		}
		if got != want[j.Name] {
			t.Errorf("job %s: last fire %q, want %q", j.Name, got, want[j.Name])
		}
	}
	if len(jobs) != len(want) || kv.n.Load() != 1 {
		t.Fatalf("%d jobs, journals' keys read %d times; want %d jobs, one read", len(jobs), kv.n.Load(), len(want))
	}
}
