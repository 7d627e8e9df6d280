package scheduler

import (
	"fmt"
	"slices"
)

// phase is where a slot is in its life on this member (doc.go draws them).
// setPhase is the one place that changes it.
type phase int

const (
	idle        phase = iota // not held here, no campaign
	campaigning              // in line for a campaign, or its goroutine waits to win
	raising                  // won: the takeover reads and the fences; nothing fires yet
	leading                  // held with its fences raised: it fires
	resigning                // a resign goroutine is deleting the key
)

func (p phase) String() string {
	return [...]string{"idle", "campaigning", "raising", "leading", "resigning"}[p]
}

// next are the phases each phase may change to. A change not listed is a
// bug of the loop, which owns every slot's phase. Held by
// TestPhasesChangeOnlyAsDrawn.
var next = [...][]phase{
	idle:        {campaigning},
	campaigning: {idle, resigning, raising, campaigning},
	raising:     {leading, idle, resigning},
	leading:     {idle, resigning},
	resigning:   {idle, resigning},
}

// setPhase moves sl to phase to, counting the slots raising their fences
// for TakingOver. It panics on a change next does not list.
func (s *Scheduler) setPhase(sl *slot, to phase) {
	from := sl.phase
	if !slices.Contains(next[from], to) {
		panic(fmt.Sprintf("scheduler: slot %s: no change from %s to %s", sl.id, from, to))
	}
	switch {
	case from != raising && to == raising:
		s.takingOver.Add(1)
	case from == raising && to != raising:
		s.takingOver.Add(-1)
	}
	sl.phase = to
}

// held reports whether this member holds the slot's election: raising its
// fences or leading.
func (sl *slot) held() bool { return sl.phase == raising || sl.phase == leading }
