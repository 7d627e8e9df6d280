package ops

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnoredGoroutines()...) }

func put(t *testing.T, cli *clientv3.Client, key string, v any) int64 {
	t.Helper()
	data, _ := json.Marshal(v)
	if s, ok := v.(string); ok {
		data = []byte(s)
	}
	resp, err := cli.Put(context.Background(), key, string(data))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// ReadStatus reads one snapshot: every slot of the stored catalog, led or
// not, with the oldest candidacy as owner and its create revision as token;
// the members; the paused jobs. Junk under the prefix is left out.
func TestReadStatus(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	catRev := put(t, cli, keyspace.Catalog("c"), config.Catalog{Cluster: "c", Jobs: []config.Job{{Name: "a", Partitions: 2}, {Name: "b", Partitions: 1}}})
	put(t, cli, keyspace.Member("c", "m1"), member.Record{ID: "m1", Name: "one"})
	put(t, cli, keyspace.Member("c", "m2"), "not json")
	tok := put(t, cli, keyspace.Candidacy("c", shard.Slot{Job: "a", Partition: 1}, 0x10), "m1")
	put(t, cli, keyspace.Candidacy("c", shard.Slot{Job: "a", Partition: 1}, 0x20), "m2") // younger: waits
	put(t, cli, keyspace.Elections("c")+"a/x/10", "junk")
	if err := Pause(ctx, cli, "c", "b"); err != nil {
		t.Fatal(err)
	}
	st, err := ReadStatus(ctx, cli, "c")
	if err != nil {
		t.Fatal(err)
	}
	if st.CatalogRevision != catRev || len(st.Members) != 2 || st.Members[1].ID != "m2" || len(st.Paused) != 1 || st.Paused[0] != "b" {
		t.Fatalf("status %+v", st)
	}
	want := []SlotStatus{{Job: "a"}, {Job: "a", Partition: 1, Owner: "m1", Token: tok}, {Job: "b"}}
	if len(st.Slots) != len(want) {
		t.Fatalf("slots %+v, want %+v", st.Slots, want)
	}
	for i := range want {
		if st.Slots[i] != want[i] {
			t.Errorf("slot %d = %+v, want %+v", i, st.Slots[i], want[i])
		}
	}
	if err := Resume(ctx, cli, "c", "b"); err != nil {
		t.Fatal(err)
	}
	if paused, err := IsPaused(ctx, cli, "c", "b"); err != nil || paused {
		t.Fatalf("IsPaused after Resume = %v, %v", paused, err)
	}
}

// ReadHistory returns a job's records newest first, one partition or all,
// and skips what it cannot read.
func TestReadHistory(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, p := range []int{0, 1, 0} {
		s := shard.Slot{Job: "j", Partition: p}
		put(t, cli, keyspace.HistoryEntry("c", s, int64(i), 10), history.Record{Job: "j", Partition: p, ExecutionID: string(rune('a' + i)), StartedAt: t0.Add(time.Duration(i) * time.Second)})
	}
	put(t, cli, keyspace.HistoryEntry("c", shard.Slot{Job: "j", Partition: 1}, 9, 10), "{broken")
	all, err := ReadHistory(context.Background(), cli, "c", "j", -1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].ExecutionID != "c" || all[2].ExecutionID != "a" {
		t.Fatalf("all partitions: %+v", all)
	}
	one, err := ReadHistory(context.Background(), cli, "c", "j", 1, 10)
	if err != nil || len(one) != 1 || one[0].ExecutionID != "b" {
		t.Fatalf("partition 1: %+v, %v", one, err)
	}
}
