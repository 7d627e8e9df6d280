package scheduler

import (
	"testing"

	"github.com/kira-scheduler/kira/internal/shard"
)

// A slot's phase changes only as next lists, raising is counted while a
// slot is in it, and any other change panics, naming the slot and both
// phases.
func TestPhasesChangeOnlyAsDrawn(t *testing.T) {
	s := &Scheduler{}
	sl := &slot{id: shard.Slot{Job: "j", Partition: 3}}
	for _, to := range []phase{campaigning, raising, leading, resigning, idle, campaigning, raising, idle} {
		s.setPhase(sl, to)
		if want := map[bool]int{true: 1, false: 0}[to == raising]; s.TakingOver() != want {
			t.Fatalf("in %s: TakingOver %d; want %d", to, s.TakingOver(), want)
		}
	}
	for from, tos := range next {
		for to := range len(next) {
			legal := false
			for _, l := range tos {
				legal = legal || l == phase(to)
			}
			sl := &slot{id: shard.Slot{Job: "j"}, phase: phase(from)}
			panicked := func() (p any) {
				defer func() { p = recover() }()
				s.setPhase(sl, phase(to))
				return nil
			}()
			if legal == (panicked != nil) {
				t.Errorf("%s → %s: panicked %v; legal %v", phase(from), phase(to), panicked, legal)
			}
		}
	}
	defer func() {
		if p := recover(); p != "scheduler: slot j/3: no change from idle to leading" {
			t.Fatalf("panic %v", p)
		}
	}()
	sl.phase = idle
	s.setPhase(sl, leading)
}
