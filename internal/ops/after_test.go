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
	"github.com/kira-scheduler/kira/jobs"
)

// kira jobs shows the graph: what each job runs after and before, and
// where a dependent stands on the logical time it waits for.
func TestJobsShowTheGraphAndWhatADependentWaitsFor(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	cat, err := config.Parse("c.yaml", []byte(`cluster: c
jobs:
  - name: extract
    schedule: "@hourly"
    partitions: 3
    handler: noop
  - name: transform
    after: [extract]
    handler: noop
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := config.Store(ctx, cli, cat); err != nil {
		t.Fatal(err)
	}
	t1, t2 := time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC), time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)
	seq := map[shard.Slot]int64{}
	record := func(job string, p int, at time.Time, outcome string) {
		s := shard.Slot{Job: job, Partition: p}
		put(t, cli, keyspace.HistoryEntry("c", s, seq[s], 10), history.Record{Job: job, Partition: p, ExecutionID: jobs.ExecutionID(job, p, at),
			ScheduledTime: at, StartedAt: at, FinishedAt: at.Add(time.Second), Outcome: outcome, Attempt: 1, Cause: history.CauseSchedule})
		seq[s]++
	}
	record("extract", 0, t1, "succeeded")
	record("extract", 1, t1, "succeeded")
	waiting := func() (*Waiting, JobStatus) {
		t.Helper()
		js, err := ReadJobs(ctx, cli, nil, nil, "c", t2)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(js[0].Dependents, []string{"transform"}) || len(js[0].After) != 0 || js[0].Waiting != nil {
			t.Fatalf("extract: after %v, dependents %v, waiting %+v", js[0].After, js[0].Dependents, js[0].Waiting)
		}
		return js[1].Waiting, js[1]
	}
	w, tr := waiting()
	want := &Waiting{LogicalTime: t1, Upstreams: []UpstreamWait{{Job: "extract", Partitions: 3, Pending: 1}}}
	if !reflect.DeepEqual(tr.After, []string{"extract"}) || tr.NextFire != nil || !reflect.DeepEqual(w, want) {
		t.Fatalf("transform: after %v, next %v, waiting %+v; want %+v", tr.After, tr.NextFire, w, want)
	}
	record("extract", 2, t1, "succeeded")
	record("transform", 0, t1, "succeeded")
	record("extract", 0, t2, "succeeded")
	w, _ = waiting()
	want = &Waiting{LogicalTime: t2, Upstreams: []UpstreamWait{{Job: "extract", Partitions: 3, Pending: 2}}}
	if !reflect.DeepEqual(w, want) {
		t.Fatalf("transform waiting %+v; want %+v", w, want)
	}
	d, ok, err := ReadJob(ctx, cli, nil, nil, "c", "transform", t2)
	if err != nil || !ok || !reflect.DeepEqual(d.Waiting, want) || len(d.Upcoming) != 0 {
		t.Fatalf("ReadJob transform: %+v, %v, %v", d, ok, err)
	}
}
