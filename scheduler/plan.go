package scheduler

import (
	"time"

	"github.com/kira-scheduler/kira/config"
)

// fire is one execution to start: a scheduled time, why, and which attempt.
type fire struct {
	scheduled time.Time
	trigger   Trigger
	attempt   int
	id        string // execution id; derived from the scheduled time unless manual
	// triggerKey is the control key of a manual trigger, deleted with its start.
	triggerKey string
	// takeover marks the fires a new holder owes on acquisition (catchUp's).
	takeover bool
}

// misfireThreshold is how late a fire may start and still not count as
// missed (Quartz's misfireThreshold, much shorter): under misfire skip, a new
// holder runs a fire that fell due less than this before it took over.
const misfireThreshold = 500 * time.Millisecond

// maxMissedCount bounds how far back a catch-up counts missed fires.
const maxMissedCount = 100000

// catchUp decides what a new holder of a slot does about the fires it did not
// see, from the state its predecessors recorded, at now:
//   - a fire that was started but not finished runs again, with the same
//     execution id, as a retry (an idempotent receiver dedupes it);
//   - fires after that up to now are missed; the misfire policy picks which
//     run (none, the latest, or all oldest first), and fires older than the
//     catchup window are dropped. A fire less than misfireThreshold old is
//     late, not missed: it runs under every policy.
//
// A slot with no recorded state (never run) has nothing to catch up. It
// returns the fires to run in order, the missed fires not run (within the
// window), and how many older fires were dropped.
func catchUp(st SlotState, job config.Job, sched config.Schedule, now time.Time, executionID func(time.Time) string) (runs []fire, missed []time.Time, dropped int) {
	if !st.Token.Valid() {
		return nil, nil, 0
	}
	oldest := now.Add(-job.CatchupWindow)
	from := st.Finished
	if st.Unfinished() {
		from = st.Started
		if st.Started.After(now) {
			// Recorded ahead of its time and not due yet: the normal schedule runs it.
			from = st.Finished
		} else if !st.Started.Before(oldest) {
			runs = append(runs, fire{scheduled: st.Started, trigger: TriggerRetry, attempt: st.StartedAttempt + 1, id: st.StartedID})
		} else {
			dropped++
		}
	}
	if from.IsZero() {
		// No fire ever finished here, and none is unfinished: the slot was
		// handed over before its first fire (its start recorded ahead, not
		// due yet). Nothing was missed.
		return runs, nil, dropped
	}
	var inWindow []time.Time
	for t := sched.Next(from); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		if t.Before(oldest) {
			dropped++
			if dropped >= maxMissedCount {
				// Skip ahead: counting further back is not worth the work.
				t = oldest.Add(-time.Nanosecond)
			}
			continue
		}
		inWindow = append(inWindow, t)
	}
	switch job.Misfire {
	case config.MisfireSkip:
		missed = inWindow
		if n := len(inWindow); n > 0 && now.Sub(inWindow[n-1]) < misfireThreshold {
			// Late, not missed: the slot changed hands around its time
			// (a graceful handover takes milliseconds). Found by the chaos
			// suite: a scale-in a moment before a fire dropped it.
			missed = inWindow[:n-1]
			runs = append(runs, fire{scheduled: inWindow[n-1], trigger: TriggerCatchup, attempt: 1, id: executionID(inWindow[n-1])})
		}
	case config.MisfireFireOnce:
		if n := len(inWindow); n > 0 {
			missed = inWindow[:n-1]
			runs = append(runs, fire{scheduled: inWindow[n-1], trigger: TriggerCatchup, attempt: 1, id: executionID(inWindow[n-1])})
		}
	case config.MisfireFireAll:
		for _, t := range inWindow {
			runs = append(runs, fire{scheduled: t, trigger: TriggerCatchup, attempt: 1, id: executionID(t)})
		}
	}
	return runs, missed, dropped
}
