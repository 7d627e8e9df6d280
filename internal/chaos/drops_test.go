package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/history"
)

// A fire-once or skip drop outside every fault's fixed window passes only
// with the evidence of what happened: its start recorded by a holder a fault
// then cut off before the slot's next fire, or its instant in a takeover the
// fault caused. Without that evidence, or under fire-all, it is a violation.
func TestDropsAFaultCausedBeyondItsWindow(t *testing.T) {
	without := func(h *attemptLog, job string, at time.Time) *attemptLog {
		var kept []Attempt
		for _, a := range h.as {
			if !(a.Kind == Write && a.Job == job && a.Scheduled.Equal(at)) {
				kept = append(kept, a)
			}
		}
		h.as = kept
		return h
	}
	started := func(slot string, token fencing.Token, at time.Time) []StateWrite {
		return []StateWrite{{Slot: slot, Revision: 50, State: history.SlotState{Token: token, Started: at, StartedAttempt: 1}}}
	}
	fire := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	check := func(name string, h *attemptLog, states []StateWrite, recovery time.Duration, f Fault, want string) {
		t.Helper()
		s := spec(t, f)
		s.States, s.Recovery = states, recovery
		rep := Check(h.as, s)
		if want == "" {
			if !rep.OK() || rep.Missed != 1 || rep.Dropped[config.MisfireFireOnce] != 1 {
				t.Errorf("%s: %+v", name, rep)
			}
			return
		}
		if !slices.ContainsFunc(rep.Violations, func(v string) bool { return strings.Contains(v, want) }) {
			t.Errorf("%s: no violation mentions %q: %q", name, want, rep.Violations)
		}
	}

	// Cut off in flight: a recorded the 4 s fire started, a kill of a at
	// 4.3 s (its window 4.3–4.8 s) ended it before the 5 s fire ran.
	kill := Fault{Name: "kill", Start: fire(4.3), Heal: fire(4.3), MayDrop: 500 * time.Millisecond, InDoubt: []string{"a"}}
	check("started, then its holder killed", without(clean(), "once", fire(4)), started("once/0", 10, fire(4)), 5*time.Second, kill, "")
	check("no start recorded", without(clean(), "once", fire(4)), nil, 5*time.Second, kill, "outside every fault's window")
	check("started by a holder no fault touched", without(clean(), "once", fire(4)), started("once/0", 20, fire(4)), 5*time.Second, kill, "outside every fault's window")
	late := kill
	late.Start, late.Heal = fire(5.3), fire(5.3) // after the 5 s fire was accepted
	check("its holder killed after the next fire ran", without(clean(), "once", fire(4)), started("once/0", 10, fire(4)), 5*time.Second, late, "outside every fault's window")
	check("under fire-all", without(clean(), "all", fire(4)), started("all/0", 10, fire(4)), 5*time.Second, kill, "fire-all drops nothing")

	// No ready holder: a killed at 3 s (window 3–4 s), b raised the fence
	// of once/0 only at 5.5 s, so the 5 s fire fell due with nobody ready.
	slowTakeover := func() *attemptLog {
		h := without(clean(), "once", fire(5))
		for i, a := range h.as {
			if a.Kind == Raise && a.Job == "once" && a.Member == "b" {
				h.as[i].At = fire(5.5)
			}
		}
		return h
	}
	killed := Fault{Name: "kill", Start: fire(3), Heal: fire(3), MayDrop: time.Second, InDoubt: []string{"a"}}
	check("due before the next holder raised the fence", slowTakeover(), nil, 5*time.Second, killed, "")
	other := killed
	other.InDoubt = []string{"c"}
	check("the fault touched another member", slowTakeover(), nil, 5*time.Second, other, "outside every fault's window")
	check("the takeover came after the fault's recovery", slowTakeover(), nil, time.Second, killed, "outside every fault's window")
	check("due after the next holder raised the fence", without(clean(), "once", fire(6)), nil, 5*time.Second, killed, "outside every fault's window")
}
