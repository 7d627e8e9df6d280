package journal

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// benchJournals writes full journals as three members carrying 20,000
// slots firing every second leave them: 1,024 entries each of 128 records.
type benchJournals struct {
	cli  *clientv3.Client
	seq  map[shard.Slot]int64
	next map[string]int // each member's next entry
	slot int
}

const benchSlots, benchMembers, benchPerEntry = 20000, 3, 128

// put writes member m's next entry and returns the revision it landed at.
func (j *benchJournals) put(b *testing.B, m string) int64 {
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	items := make([]history.JournalItem, benchPerEntry)
	for i := range items {
		s := shard.Slot{Job: "load", Partition: j.slot % benchSlots}
		j.slot++
		seq := j.seq[s]
		j.seq[s]++
		fire := at.Add(time.Duration(seq) * time.Second)
		state := &history.SlotState{Token: fencing.Token(1000 + s.Partition), Member: m, Started: fire, Finished: fire,
			Outcome: "succeeded", HistorySeq: seq + 1, HistoryLimit: 10}
		items[i] = history.JournalItem{Slot: s, Stored: history.Stored{Record: history.Record{Job: s.Job, Partition: s.Partition,
			ExecutionID: fmt.Sprintf("load/%d/%d", s.Partition, fire.Unix()), Member: m, Token: state.Token,
			ScheduledTime: fire, StartedAt: fire.Add(time.Millisecond), FinishedAt: fire.Add(2 * time.Millisecond), Outcome: "succeeded"},
			State: state, Seq: &seq}}
	}
	n := j.next[m]
	j.next[m] = (n + 1) % 1024
	resp, err := j.cli.Put(context.Background(), keyspace.JournalEntry("c", m, n), string(history.EncodeJournal(m, items)))
	if err != nil {
		b.Fatal(err)
	}
	return resp.Header.Revision
}

// BenchmarkCacheRefresh is a takeover's journal read under load: the
// journals of three members are full (1,024 entries of 128 records each)
// and each op, 16 entries of each have been written since the cache's
// last read (a second of about 2,000 records a member), then one slot's
// records are asked for at the newest revision.
func BenchmarkCacheRefresh(b *testing.B) {
	etcd := etcdtest.Start(b)
	cli := etcd.Client(b)
	j := &benchJournals{cli: cli, seq: map[shard.Slot]int64{}, next: map[string]int{}}
	var rev int64
	for range 1024 {
		for m := range benchMembers {
			rev = j.put(b, fmt.Sprintf("m%d", m))
		}
	}
	c := NewCache(cli, "c")
	ctx := context.Background()
	if _, err := c.Slot(ctx, shard.Slot{Job: "load"}, rev); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		for range 16 {
			for m := range benchMembers {
				rev = j.put(b, fmt.Sprintf("m%d", m))
			}
		}
		b.StartTimer()
		recs, err := c.Slot(ctx, shard.Slot{Job: "load", Partition: i % benchSlots}, rev)
		if err != nil || len(recs) == 0 {
			b.Fatalf("%d records, %v", len(recs), err)
		}
	}
}
