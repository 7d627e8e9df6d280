package chaos

import (
	"slices"
	"time"

	"github.com/kira-scheduler/kira/fencing"
)

// slotLives is, per slot, what the checker knows of who held it and what
// its state keys recorded started: the evidence a drop outside every
// fault's fixed window is judged by (excused).
type slotLives map[string]*slotLife

type slotLife struct {
	raises  []Attempt                // accepted fence raises, in the fence's order
	holder  map[fencing.Token]string // member, by token (raises and writes)
	started map[int64]fencing.Token  // scheduled time (Unix ns) → the token of a state that recorded it started
}

func newSlotLives(ordered []Attempt, states []StateWrite) slotLives {
	l := slotLives{}
	life := func(slot string) *slotLife {
		if l[slot] == nil {
			l[slot] = &slotLife{holder: map[fencing.Token]string{}, started: map[int64]fencing.Token{}}
		}
		return l[slot]
	}
	for _, a := range ordered {
		if a.Outcome != Accepted && a.Outcome != Replay {
			continue
		}
		s := life(a.Slot())
		s.holder[a.Token] = a.Member
		if a.Kind == Raise && a.Outcome == Accepted {
			s.raises = append(s.raises, a)
		}
	}
	for _, w := range states {
		if !w.State.Started.IsZero() {
			life(w.Slot).started[w.State.Started.UnixNano()] = w.State.Token
		}
	}
	return l
}

// excused reports whether fire t of slot, never accepted, is a drop a fault
// caused though it falls outside every fault's fixed window (inDropWindow),
// by what happened rather than by a wider window, which would hide real
// drops. Only a policy that drops missed fires (fire-once, skip) may use it:
//   - cut off in flight: a state key recorded t started, by a member a
//     fault put in doubt (Fault.InDoubt) before next: when the slot's next
//     fire was accepted, or the window's end if none was;
//   - no ready holder: a fault put the slot's holder in doubt, and t fell
//     due after the fault began and before the next holder raised the
//     fence, which it did within recovery of the fault's window.
//
// Held by TestDropsAFaultCausedBeyondItsWindow.
func (l slotLives) excused(faults []Fault, slot string, t, next time.Time, recovery, slack time.Duration) bool {
	s := l[slot]
	if s == nil {
		return false
	}
	for _, f := range faults {
		if token, ok := s.started[t.UnixNano()]; ok && f.putsInDoubt(s.holder[token], t, next, slack) {
			return true
		}
		if s.unheld(f, t, recovery) {
			return true
		}
	}
	return false
}

// unheld reports whether fire t fell due in a takeover fault f caused: after
// f began, before the first raise of a newer token than the holder's at f's
// start, that holder being in doubt under f.
func (s *slotLife) unheld(f Fault, t time.Time, recovery time.Duration) bool {
	if f.MayDrop <= 0 || t.Before(f.Start) {
		return false
	}
	i := slices.IndexFunc(s.raises, func(a Attempt) bool { return !a.At.Before(f.Start) })
	if i <= 0 {
		return false // no holder before f, or no raise after it
	}
	before, after := s.raises[i-1], s.raises[i]
	if !f.EveryMember && !slices.Contains(f.InDoubt, before.Member) {
		return false
	}
	return after.Token > before.Token && t.Before(after.At) && !after.At.After(f.Heal.Add(f.MayDrop+recovery))
}
