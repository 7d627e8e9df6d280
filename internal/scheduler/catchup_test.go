package scheduler

import (
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
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
	finishedAt := func(s int) history.SlotState { return history.SlotState{Token: 7, Started: at(s), Finished: at(s)} }
	cases := []struct {
		name    string
		st      history.SlotState
		job     config.Job
		now     time.Time
		runs    []time.Time
		cause   []history.Cause
		missed  int
		dropped int
	}{
		{"never run: nothing to catch up", history.SlotState{}, job(config.MisfireFireAll, time.Hour), at(100), nil, nil, 0, 0},
		{"fire-once runs the latest", finishedAt(0), job(config.MisfireFireOnce, time.Hour), at(35), []time.Time{at(30)}, []history.Cause{history.CauseCatchup}, 2, 0},
		{"fire-all runs all oldest first", finishedAt(0), job(config.MisfireFireAll, time.Hour), at(35), []time.Time{at(10), at(20), at(30)}, []history.Cause{history.CauseCatchup, history.CauseCatchup, history.CauseCatchup}, 0, 0},
		{"skip runs none", finishedAt(0), job(config.MisfireSkip, time.Hour), at(35), nil, nil, 3, 0},
		{"skip runs a fire less than the misfire threshold late", finishedAt(0), job(config.MisfireSkip, time.Hour),
			at(30).Add(misfireThreshold - time.Millisecond), []time.Time{at(30)}, []history.Cause{history.CauseCatchup}, 2, 0},
		{"skip misses a fire the misfire threshold late", finishedAt(0), job(config.MisfireSkip, time.Hour),
			at(30).Add(misfireThreshold), nil, nil, 3, 0},
		{"window drops old fires", finishedAt(0), job(config.MisfireFireAll, 15*time.Second), at(35), []time.Time{at(20), at(30)}, []history.Cause{history.CauseCatchup, history.CauseCatchup}, 0, 1},
		{"a fire on now is due", finishedAt(0), job(config.MisfireFireOnce, time.Hour), at(10), []time.Time{at(10)}, []history.Cause{history.CauseCatchup}, 0, 0},
		{"nothing missed", finishedAt(30), job(config.MisfireFireAll, time.Hour), at(35), nil, nil, 0, 0},
		{"unfinished fire is retried with its id, then the policy applies",
			history.SlotState{Token: 7, Started: at(20), StartedID: id(at(20)), StartedAttempt: 1, Finished: at(10)},
			job(config.MisfireFireOnce, time.Hour), at(45), []time.Time{at(20), at(40)}, []history.Cause{history.CauseRetry, history.CauseCatchup}, 1, 0},
		{"a fire recorded ahead of its time is not a retry",
			history.SlotState{Token: 7, Started: at(40), StartedID: id(at(40)), StartedAttempt: 1, Finished: at(30)},
			job(config.MisfireFireOnce, time.Hour), at(35), nil, nil, 0, 0},
		// A slot handed over before its first fire carries only the start
		// recorded ahead. Nothing is owed: catching up from the zero time
		// would run every fire of the catch-up window.
		{"a slot that never finished a fire owes nothing",
			history.SlotState{Token: 7, Started: at(40), StartedID: id(at(40)), StartedAttempt: 1},
			job(config.MisfireFireAll, time.Hour), at(35), nil, nil, 0, 0},
		// A fire taken on by the previous holder and not started when it
		// handed the slot over (SlotState.Owed) runs under every policy.
		{"fire-once runs a fire owed at a handover and the latest",
			owing(finishedAt(0), at(10)), job(config.MisfireFireOnce, time.Hour), at(21),
			[]time.Time{at(10), at(20)}, []history.Cause{history.CauseCatchup, history.CauseCatchup}, 0, 0},
		{"skip runs a fire owed at a handover and misses the gap after it",
			owing(finishedAt(0), at(10)), job(config.MisfireSkip, time.Hour), at(45),
			[]time.Time{at(10)}, []history.Cause{history.CauseCatchup}, 3, 0},
		{"fire-all runs a fire owed at a handover once",
			owing(finishedAt(0), at(10)), job(config.MisfireFireAll, time.Hour), at(25),
			[]time.Time{at(10), at(20)}, []history.Cause{history.CauseCatchup, history.CauseCatchup}, 0, 0},
		{"a fire owed after the unfinished one runs after its retry",
			owing(history.SlotState{Token: 7, Started: at(20), StartedID: id(at(20)), StartedAttempt: 1, Finished: at(10)}, at(30)),
			job(config.MisfireFireOnce, time.Hour), at(45), []time.Time{at(20), at(30), at(40)},
			[]history.Cause{history.CauseRetry, history.CauseCatchup, history.CauseCatchup}, 0, 0},
		{"a fire owed and since finished is not run again",
			owing(finishedAt(20), at(10)), job(config.MisfireFireOnce, time.Hour), at(25), nil, nil, 0, 0},
		{"a fire owed older than the window is dropped",
			owing(finishedAt(0), at(10)), job(config.MisfireFireOnce, 15*time.Second), at(35),
			[]time.Time{at(30)}, []history.Cause{history.CauseCatchup}, 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runs, missed, dropped := catchUp(tc.st, tc.job, sched, tc.now, id)
			if len(runs) != len(tc.runs) || len(missed) != tc.missed || dropped != tc.dropped {
				t.Fatalf("runs %v, %d missed, %d dropped; want %v, %d, %d", runs, len(missed), dropped, tc.runs, tc.missed, tc.dropped)
			}
			for i, r := range runs {
				if !r.scheduled.Equal(tc.runs[i]) || r.cause != tc.cause[i] || r.id != id(r.scheduled) {
					t.Fatalf("run %d = %+v; want %v %s with the fire's own execution id", i, r, tc.runs[i], tc.cause[i])
				}
			}
			if len(runs) > 0 && runs[0].cause == history.CauseRetry && runs[0].attempt != 2 {
				t.Fatalf("retry attempt %d; want 2", runs[0].attempt)
			}
		})
	}
}

// owing is st as a holder that handed the slot over owing the fires at.
func owing(st history.SlotState, at ...time.Time) history.SlotState {
	st.Owed = at
	return st
}
