package scheduler

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/internal/keyspace"
	"github.com/kira-scheduler/kira/internal/ops"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
)

// Junk under a cluster's keys (corrupt JSON, a record of a newer version,
// values written by hand, a member record and an election key without a
// lease) is logged and passed over: every slot still fires, and a slot whose
// state is unreadable starts afresh, which its history says.
func TestJunkInEtcdLeavesEverySlotFiring(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	const cluster = "junk"
	cat := &config.Catalog{Cluster: cluster, Jobs: []config.Job{withDefaults(config.Job{Name: "tick", Schedule: "@every 1s", Partitions: 6, Handler: "noop"})}}
	slot := func(p int) shard.Slot { return shard.Slot{Job: "tick", Partition: p} }
	newer, _ := json.Marshal(map[string]any{"job": "tick", "partition": 2, "execution_id": "x", "outcome": "succeeded",
		"field_of_a_newer_version": true, "state": map[string]any{"token": 1, "history_seq": 1, "future": "yes"}})
	for key, value := range map[string]string{
		keyspace.State(cluster, slot(0)):                   "{not json",
		keyspace.HistoryEntry(cluster, slot(1), 0, 10):     "\x00\x01 garbage",
		keyspace.HistoryEntry(cluster, slot(2), 0, 10):     string(newer),
		keyspace.Elections(cluster) + "tick/3/handwritten": "nobody",
		keyspace.Member(cluster, "ghost"):                  `{"id":"ghost"}`,
		keyspace.Control(cluster) + "tick/whatever":        "junk",
		keyspace.Control(cluster) + "tick/trigger/x/y":     "junk",
		keyspace.Cluster(cluster) + "stray":                "junk",
	} {
		if _, err := cli.Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
	}
	rec := newRecorder()
	n := startNode(t, cli, cat, rec, nil, nodeOpts{cfg: Config{Handlers: jobs.Handlers{"noop": noop}}})
	rec.waitFor(t, "every slot to fire twice", 20*time.Second, func(evs []Event) bool {
		fired := map[shard.Slot]int{}
		for _, e := range evs {
			if e.Kind == Finished && e.Result.Outcome == jobs.Succeeded {
				fired[e.Slot]++
			}
		}
		for p := range 6 {
			if fired[slot(p)] < 2 {
				return false
			}
		}
		return true
	})
	for _, p := range []int{0, 1} {
		recs, err := ops.ReadHistory(ctx, cli, cluster, "tick", p, 100)
		if err != nil {
			t.Fatal(err)
		}
		var reset bool
		for _, r := range recs {
			reset = reset || r.Outcome == history.OutcomeReset
		}
		if !reset {
			t.Errorf("slot tick/%d: no %q record in its history: %+v", p, history.OutcomeReset, recs)
		}
	}
	if resp, _ := cli.Get(ctx, keyspace.Elections(cluster)+"tick/3/handwritten"); len(resp.Kvs) != 0 {
		t.Error("the hand-written election key is still there")
	}
	if v := n.views.Latest(); v.Contains("ghost") {
		t.Errorf("a member record without a lease counts as a member: %v", v.Members)
	}
}
