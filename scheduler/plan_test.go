package scheduler

import (
	"errors"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/jobs"
)

func TestCatchUp(t *testing.T) {
	sched, _ := config.ParseSchedule("@every 10s")
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	id := func(ts time.Time) string { return jobs.ExecutionID("j", 0, ts) }
	job := func(m config.Misfire, window time.Duration) config.Job {
		return config.Job{Name: "j", Misfire: m, CatchupWindow: window}
	}
	finishedAt := func(s int) SlotState { return SlotState{Token: 7, Started: at(s), Finished: at(s)} }
	cases := []struct {
		name    string
		st      SlotState
		job     config.Job
		now     time.Time
		runs    []time.Time
		trigger []Trigger
		missed  int
		dropped int
	}{
		{"never run: nothing to catch up", SlotState{}, job(config.MisfireFireAll, time.Hour), at(100), nil, nil, 0, 0},
		{"fire-once runs the latest", finishedAt(0), job(config.MisfireFireOnce, time.Hour), at(35), []time.Time{at(30)}, []Trigger{TriggerCatchup}, 2, 0},
		{"fire-all runs all oldest first", finishedAt(0), job(config.MisfireFireAll, time.Hour), at(35), []time.Time{at(10), at(20), at(30)}, []Trigger{TriggerCatchup, TriggerCatchup, TriggerCatchup}, 0, 0},
		{"skip runs none", finishedAt(0), job(config.MisfireSkip, time.Hour), at(35), nil, nil, 3, 0},
		{"skip runs a fire less than the misfire threshold late", finishedAt(0), job(config.MisfireSkip, time.Hour),
			at(30).Add(misfireThreshold - time.Millisecond), []time.Time{at(30)}, []Trigger{TriggerCatchup}, 2, 0},
		{"skip misses a fire the misfire threshold late", finishedAt(0), job(config.MisfireSkip, time.Hour),
			at(30).Add(misfireThreshold), nil, nil, 3, 0},
		{"window drops old fires", finishedAt(0), job(config.MisfireFireAll, 15*time.Second), at(35), []time.Time{at(20), at(30)}, []Trigger{TriggerCatchup, TriggerCatchup}, 0, 1},
		{"a fire on now is due", finishedAt(0), job(config.MisfireFireOnce, time.Hour), at(10), []time.Time{at(10)}, []Trigger{TriggerCatchup}, 0, 0},
		{"nothing missed", finishedAt(30), job(config.MisfireFireAll, time.Hour), at(35), nil, nil, 0, 0},
		{"unfinished fire is retried with its id, then the policy applies",
			SlotState{Token: 7, Started: at(20), StartedID: id(at(20)), StartedAttempt: 1, Finished: at(10)},
			job(config.MisfireFireOnce, time.Hour), at(45), []time.Time{at(20), at(40)}, []Trigger{TriggerRetry, TriggerCatchup}, 1, 0},
		{"a fire recorded ahead of its time is not a retry",
			SlotState{Token: 7, Started: at(40), StartedID: id(at(40)), StartedAttempt: 1, Finished: at(30)},
			job(config.MisfireFireOnce, time.Hour), at(35), nil, nil, 0, 0},
		// Found by the chaos suite: a slot handed over before its first fire
		// carries only the start recorded ahead. Nothing is owed: catching
		// up from the zero time ran every fire of the catch-up window.
		{"a slot that never finished a fire owes nothing",
			SlotState{Token: 7, Started: at(40), StartedID: id(at(40)), StartedAttempt: 1},
			job(config.MisfireFireAll, time.Hour), at(35), nil, nil, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runs, missed, dropped := catchUp(tc.st, tc.job, sched, tc.now, id)
			if len(runs) != len(tc.runs) || len(missed) != tc.missed || dropped != tc.dropped {
				t.Fatalf("runs %v, %d missed, %d dropped; want %v, %d, %d", runs, len(missed), dropped, tc.runs, tc.missed, tc.dropped)
			}
			for i, r := range runs {
				if !r.scheduled.Equal(tc.runs[i]) || r.trigger != tc.trigger[i] || r.id != id(r.scheduled) {
					t.Fatalf("run %d = %+v; want %v %s with the fire's own execution id", i, r, tc.runs[i], tc.trigger[i])
				}
			}
			if len(runs) > 0 && runs[0].trigger == TriggerRetry && runs[0].attempt != 2 {
				t.Fatalf("retry attempt %d; want 2", runs[0].attempt)
			}
		})
	}
}

func TestWriterRefusesRatherThanBlocks(t *testing.T) {
	w := newStateWriter(nil)
	w.limit = 1
	w.enqueue(fencedWrite{})
	done := make(chan error, 1)
	w.enqueue(fencedWrite{done: done}) // the queue is full: refused at once
	if err := <-done; !errors.Is(err, errWriterBehind) {
		t.Fatalf("full queue: %v; want errWriterBehind", err)
	}
}
