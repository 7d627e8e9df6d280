package journal

import (
	"context"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }

func put(t *testing.T, cli *clientv3.Client, n int, seqs ...int64) int64 {
	t.Helper()
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	var items []history.JournalItem
	for _, seq := range seqs {
		q := seq
		items = append(items, history.JournalItem{Slot: shard.Slot{Job: "j", Partition: int(seq % 2)},
			Stored: history.Stored{Record: history.Record{Job: "j", Partition: int(seq % 2), Member: "m", ScheduledTime: at, Outcome: "succeeded"}, Seq: &q}})
	}
	resp, err := cli.Put(context.Background(), keyspace.JournalEntry("c", "m", n), string(history.EncodeJournal("m", items)))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

func seqsOf(ps []history.Slotted) map[int64]bool {
	out := map[int64]bool{}
	for _, p := range ps {
		out[*p.Stored.Seq] = true
	}
	return out
}

// The cache reads every entry once, then only those written since; an
// entry deleted is gone from it; a key that is not a journal entry is
// skipped.
func TestCacheReadsOnlyWhatChanged(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	ctx := context.Background()
	put(t, cli, 0, 0, 1)
	put(t, cli, 1, 2, 3)
	rev := put(t, cli, 2, 4, 5)
	if _, err := cli.Put(ctx, keyspace.Journals("c")+"junk", "x"); err != nil {
		t.Fatal(err)
	}
	c := NewCache(cli, "c")
	even, err := c.Slot(ctx, shard.Slot{Job: "j"}, rev)
	if err != nil {
		t.Fatal(err)
	}
	if got := seqsOf(even); len(got) != 3 || !got[0] || !got[2] || !got[4] || c.fetched != 3 {
		t.Fatalf("partition 0's records %v after %d reads; want 0, 2, 4 after 3", got, c.fetched)
	}
	if _, err := c.Slot(ctx, shard.Slot{Job: "j", Partition: 1}, rev); err != nil || c.fetched != 3 {
		t.Fatalf("a read at a revision the cache has read again (%d reads, %v)", c.fetched, err)
	}
	put(t, cli, 0, 6, 7) // entry 0 reused
	if _, err := cli.Delete(ctx, keyspace.JournalEntry("c", "m", 1)); err != nil {
		t.Fatal(err)
	}
	rev = put(t, cli, 3, 8, 9)
	even, err = c.Slot(ctx, shard.Slot{Job: "j"}, rev)
	if err != nil {
		t.Fatal(err)
	}
	if got := seqsOf(even); len(got) != 3 || !got[4] || !got[6] || !got[8] || c.fetched != 5 {
		t.Fatalf("partition 0's records %v after %d reads; want 4, 6, 8 after 5 (only the two entries written since)", got, c.fetched)
	}
	all, err := c.Records(ctx, 0, func(s shard.Slot) bool { return s.Partition == 1 })
	if err != nil || len(all) != 3 {
		t.Fatalf("partition 1's records: %d, %v; want 3", len(all), err)
	}
	c.Clear()
	if _, err := c.Slot(ctx, shard.Slot{Job: "j"}, 0); err != nil || c.fetched != 8 {
		t.Fatalf("%d reads after a clear, %v; want every entry read again", c.fetched, err)
	}
}
