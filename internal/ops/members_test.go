package ops

import (
	"context"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/member"
	"github.com/kira-scheduler/kira/internal/shard"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The members view: each member's slots of the cluster and per job, its
// labels, and its lease as etcd counts it (a record without a lease has
// none); the member leading most comes first.
func TestMembersView(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	put(t, cli, keyspace.Catalog("c"), config.Catalog{Cluster: "c", Jobs: []config.Job{{Name: "a", Partitions: 3}, {Name: "b", Partitions: 1}}})
	put(t, cli, keyspace.Member("c", "m1"), member.Record{ID: "m1", Name: "one"})
	lease, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	data := `{"id":"m2","name":"two","version":"v9","labels":{"zone":"z1"},"catalog_revision":4}`
	if _, err := cli.Put(ctx, keyspace.Member("c", "m2"), data, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	put(t, cli, keyspace.Candidacy("c", shard.Slot{Job: "a", Partition: 0}, 1), "m2")
	put(t, cli, keyspace.Candidacy("c", shard.Slot{Job: "a", Partition: 2}, 1), "m2")
	put(t, cli, keyspace.Candidacy("c", shard.Slot{Job: "b", Partition: 0}, 1), "m2")
	put(t, cli, keyspace.Candidacy("c", shard.Slot{Job: "a", Partition: 1}, 2), "m1")
	st, err := ReadStatus(ctx, cli, "c")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ms, err := ReadMembers(ctx, cli, cli, st, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].ID != "m2" || ms[0].SlotsLed != 3 || ms[0].Slots != 4 || ms[1].SlotsLed != 1 {
		t.Fatalf("members %+v", ms)
	}
	two := ms[0]
	if len(two.Jobs) != 2 || two.Jobs[0] != (MemberJob{Job: "a", Slots: 2, Partitions: 3}) || two.Jobs[1] != (MemberJob{Job: "b", Slots: 1, Partitions: 1}) {
		t.Fatalf("m2's jobs %+v", two.Jobs)
	}
	if two.Labels["zone"] != "z1" || two.Version != "v9" || two.CatalogRevision != 4 {
		t.Fatalf("m2 %+v", two)
	}
	if two.LeaseTTLSeconds == nil || *two.LeaseTTLSeconds != 30 || *two.LeaseLeftSeconds <= 0 || *two.LeaseLeftSeconds > 30 ||
		two.LastSeen.After(now) || now.Sub(*two.LastSeen) > 5*time.Second {
		t.Fatalf("m2's lease: ttl %v left %v seen %v", two.LeaseTTLSeconds, two.LeaseLeftSeconds, two.LastSeen)
	}
	if one := ms[1]; one.LeaseTTLSeconds != nil || one.LastSeen != nil || one.Labels == nil {
		t.Fatalf("m1, without a lease: %+v", one)
	}
}
