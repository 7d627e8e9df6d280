package scheduler

import (
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/history"
)

// missedAt is what a slot no holder ever held owes of its job's @at fire.
// catchUp counts missed fires from the last one its holders finished, and
// a slot never held has none: without this, an @at fire whose time passed
// while no member held its slot (every member down, or none admitted by
// its placement) would never run. Under fire-once and fire-all it runs
// now, late, if within catchup_window; under skip it is recorded as missed
// (unless it is less than misfireThreshold late, as catchUp's). A slot
// never held has never started it, so this is no replay; a slot whose
// state was unreadable is not asked (the caller's). Held by
// TestAtMissedWhileNobodyHeldTheSlot.
func missedAt(st history.SlotState, job config.Job, now time.Time, executionID func(time.Time) string) (runs []fire, missed []time.Time) {
	at, ok := job.At()
	if !ok || st.Token.Valid() || at.After(now) || at.Before(now.Add(-job.CatchupWindow)) {
		return nil, nil
	}
	if job.Misfire == config.MisfireSkip && now.Sub(at) >= misfireThreshold {
		return nil, []time.Time{at}
	}
	return []fire{{scheduled: at, cause: history.CauseCatchup, attempt: 1, id: executionID(at)}}, nil
}
