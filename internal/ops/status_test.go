package ops

import (
	"context"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
)

func TestStatusSlotFindsBySortedJobAndPartition(t *testing.T) {
	st := &Status{Slots: []SlotStatus{
		{Job: "a", Partition: 0, Owner: "m1", Token: 5},
		{Job: "a", Partition: 2, Owner: "m2", Token: 7},
		{Job: "b", Partition: 1},
	}}
	for _, want := range st.Slots {
		if got, ok := st.Slot(want.Job, want.Partition); !ok || got != want {
			t.Errorf("Slot(%s, %d) = %+v, %v; want %+v", want.Job, want.Partition, got, ok, want)
		}
	}
	for _, absent := range []SlotStatus{{Job: "a", Partition: 1}, {Job: "b"}, {Job: "c"}, {Job: ""}} {
		if got, ok := st.Slot(absent.Job, absent.Partition); ok {
			t.Errorf("Slot(%s, %d) = %+v; want not found", absent.Job, absent.Partition, got)
		}
	}
}

// The status says who stored the catalog: nobody recorded for a catalog
// of an older version, then kira apply's source with its time.
func TestStatusSaysWhoStoredTheCatalog(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	put(t, cli, keyspace.Catalog("c"), config.Catalog{Cluster: "c", Jobs: []config.Job{{Name: "a", Partitions: 1}}})
	st, err := ReadStatus(ctx, cli, "c")
	if err != nil || st.CatalogSource != nil {
		t.Fatalf("older version's catalog: source %+v, %v; want none", st.CatalogSource, err)
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	rev, err := config.Put(ctx, cli, &config.Catalog{Cluster: "c", Jobs: []config.Job{{Name: "b", Partitions: 1}}}, config.Source{By: config.ByApply, At: at}, config.Force)
	if err != nil {
		t.Fatal(err)
	}
	st, err = ReadStatus(ctx, cli, "c")
	if err != nil || st.CatalogRevision != rev || st.CatalogSource == nil || st.CatalogSource.By != config.ByApply || !st.CatalogSource.At.Equal(at) {
		t.Fatalf("applied catalog: revision %d source %+v, %v; want %d by apply at %s", st.CatalogRevision, st.CatalogSource, err, rev, at)
	}
}
