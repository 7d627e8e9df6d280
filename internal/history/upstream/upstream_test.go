package upstream

import (
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/jobs"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func at(s int) time.Time { return time.Date(2026, 12, 3, 2, 0, s, 0, time.UTC) }

func record(job string, p int, t time.Time, outcome string, attempt int) history.Record {
	return history.Record{Job: job, Partition: p, ExecutionID: jobs.ExecutionID(job, p, t), ScheduledTime: t,
		FinishedAt: t.Add(time.Second), Outcome: outcome, Attempt: attempt}
}

// Decide waits for every partition, skips with the first disallowed
// outcome as the cause, waits for a failure with retries left unless the
// partition fired since, counts a partition that went on without a record
// of t as missed, and leaves manual runs out.
func TestDecide(t *testing.T) {
	extract := NewFires(config.Job{Name: "extract", Partitions: 3, Retries: config.Retries{Max: 1}})
	for _, r := range []history.Record{
		record("extract", 0, at(0), "succeeded", 1),
		record("extract", 1, at(0), "succeeded", 1),
		// at(10): partition 1 failed with a retry left, then succeeded
		record("extract", 0, at(10), "succeeded", 1),
		record("extract", 1, at(10), "failed", 1),
		record("extract", 1, at(10), "succeeded", 2),
		record("extract", 2, at(10), "succeeded", 1),
		// at(20): partition 2 failed with a retry left, and has fired since
		record("extract", 0, at(20), "succeeded", 1),
		record("extract", 1, at(20), "succeeded", 1),
		record("extract", 2, at(20), "failed", 1),
		// at(30): partition 0 has no record of it, and a later one
		record("extract", 1, at(30), "succeeded", 1),
		record("extract", 2, at(30), "succeeded", 1),
		record("extract", 0, at(40), "succeeded", 1),
		// at(50): partition 0 still runs it; its fire at 60 was skipped meanwhile
		record("extract", 1, at(50), "succeeded", 1),
		record("extract", 2, at(50), "succeeded", 1),
		record("extract", 0, at(60), "skipped", 1),
		{Job: "extract", Partition: 1, ExecutionID: "manual-1", ScheduledTime: at(35), Outcome: "succeeded", Attempt: 1},
	} {
		extract.Add(r)
	}
	extract.Sort()
	fires := map[string]*Fires{"extract": extract}
	ups := []config.Upstream{{Job: "extract"}}
	if got := Times(ups, fires, at(0)); len(got) != 6 || !got[0].Equal(at(10)) || !got[3].Equal(at(40)) || !got[5].Equal(at(60)) {
		t.Fatalf("times after 02:00:00 = %v; want 10, 20, 30, 40, 50, 60 (no manual run)", got)
	}
	for _, tc := range []struct {
		t       time.Time
		ended   bool
		cause   string
		pending int
	}{
		{at(0), true, "upstream extract missed at 2026-12-03T02:00:00Z (partition 2)", 0},
		{at(10), true, "", 0},
		{at(20), true, "upstream extract failed at 2026-12-03T02:00:20Z (partition 2)", 0},
		{at(30), true, "upstream extract missed at 2026-12-03T02:00:30Z (partition 0)", 0},
		{at(40), true, "upstream extract missed at 2026-12-03T02:00:40Z (partition 1)", 0},
		{at(50), false, "", 1},
	} {
		st := Decide(ups, fires, tc.t)
		if st.Ended != tc.ended || st.Cause != tc.cause || st.Pending["extract"] != tc.pending {
			t.Errorf("at %s: %+v; want ended %v, cause %q, %d pending", tc.t.Format(time.TimeOnly), st, tc.ended, tc.cause, tc.pending)
		}
	}
	allowed := []config.Upstream{{Job: "extract", Outcomes: []string{"succeeded", "failed", "missed"}}}
	if st := Decide(allowed, fires, at(20)); !st.Ended || st.Cause != "" {
		t.Errorf("failed allowed: %+v", st)
	}
	if st := Decide(ups, map[string]*Fires{}, at(10)); st.Ended {
		t.Error("an upstream not read yet counts as ended")
	}
}
