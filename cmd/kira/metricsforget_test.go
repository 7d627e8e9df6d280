package main

import (
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/incarnation"
	"github.com/kira-scheduler/kira/internal/scheduler"
	"github.com/kira-scheduler/kira/internal/shard"
	"github.com/kira-scheduler/kira/jobs"
)

// A job the member forgot (scheduler.Forgotten: deleted from the catalog,
// its last slot here dropped) leaves no series: a churn of jobs created and
// deleted keeps the member's series as many as its jobs. Another job's
// stay.
func TestADeletedJobsSeriesAreDeleted(t *testing.T) {
	m := newMetrics(func() *incarnation.Incarnation { return nil })
	now := time.Now()
	for _, job := range []string{"kept", "gone"} {
		s := shard.Slot{Job: job}
		exec := jobs.Execution{Job: job, Partitions: 1, ScheduledTime: now}
		for _, e := range []scheduler.Event{
			{Kind: scheduler.Acquired, Execution: exec},
			{Kind: scheduler.Started, Execution: exec, At: now},
			{Kind: scheduler.Finished, Execution: exec, Result: jobs.Result{Outcome: jobs.Succeeded}, StartedAt: now, At: now},
			{Kind: scheduler.Finished, Execution: exec, Result: jobs.Result{Outcome: jobs.Fenced}, StartedAt: now, At: now},
			{Kind: scheduler.Skipped, Reason: "missed", Policy: "skip"},
			{Kind: scheduler.Notified},
			{Kind: scheduler.NotifyFailed},
		} {
			e.Slot = s
			m.observe(e)
		}
	}
	m.observe(scheduler.Event{Kind: scheduler.Released, Slot: shard.Slot{Job: "gone"}})
	m.observe(scheduler.Event{Kind: scheduler.Forgotten, Slot: shard.Slot{Job: "gone"}})
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == jobLabel {
					series[l.GetValue()]++
					if l.GetValue() == "gone" {
						t.Errorf("%s keeps a series of the deleted job", f.GetName())
					}
				}
			}
		}
	}
	if series["kept"] < 10 {
		t.Fatalf("the job kept has %d series; want one of each per-job series", series["kept"])
	}
}
