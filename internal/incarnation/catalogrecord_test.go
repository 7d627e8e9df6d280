package incarnation

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/member"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A stream of single-job changes (jobs added, then removed, one a
// revision) is published in the member's record coalesced: the record
// reaches the last revision stored, written at most once per RecordPace
// (and once more at the start of the stream).
func TestCatalogRevisionsPublishedCoalesced(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	rec, _, _, _ := startRun(t, etcd.Endpoints())
	kiratest.WaitUntil(t, "tick to run", 15*time.Second, func() bool { _, runs := rec.seen(); return runs >= 1 })
	ctx := context.Background()
	cur, err := config.Read(ctx, cli, "life", 0)
	if err != nil {
		t.Fatal(err)
	}
	watch, cancel := context.WithCancel(ctx)
	defer cancel()
	records := cli.Watch(watch, keyspace.Members("life"), clientv3.WithPrefix(), clientv3.WithRev(cur.Revision+1))
	cat, rev := cur.Catalog, cur.Revision
	began := time.Now()
	for i := range 60 {
		next := *cat
		if i < 30 {
			next.Jobs = append(slices.Clone(cat.Jobs), config.Job{Name: fmt.Sprintf("added-%02d", i), Schedule: "@hourly", Handler: "tick", Partitions: 1,
				Misfire: config.DefaultMisfire, CatchupWindow: config.DefaultCatchupWindow, HistoryLimit: config.DefaultHistoryLimit, Overlap: config.DefaultOverlap})
		} else {
			next.Jobs = slices.Delete(slices.Clone(cat.Jobs), 1, 2)
		}
		if rev, err = config.Put(ctx, cli, &next, config.Source{By: config.ByApply}, rev); err != nil {
			t.Fatal(err)
		}
		cat = &next
	}
	writes := 0
	deadline := time.After(15 * time.Second)
	for published := int64(0); published != rev; {
		select {
		case wr := <-records:
			for _, ev := range wr.Events {
				var r member.Record
				if ev.Type == clientv3.EventTypePut && json.Unmarshal(ev.Kv.Value, &r) == nil {
					writes++
					published = r.CatalogRevision
				}
			}
		case <-deadline:
			t.Fatalf("the record did not reach revision %d in 15 s", rev)
		}
	}
	if most := int(time.Since(began)/RecordPace) + 2; writes > most {
		t.Fatalf("the record was written %d times for 60 revisions in %v; want at most %d", writes, time.Since(began), most)
	}
	if len(cat.Jobs) != 1 {
		t.Fatalf("the catalog has %d jobs at the end, want 1", len(cat.Jobs))
	}
}
