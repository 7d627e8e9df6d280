package ops

import (
	"testing"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/jobs"
)

// The last failover, from the records alone: the departed member whose
// last record is newest (a failover before it is not the last); each
// successor's count of its slots and when it first acted on them, the one
// that took most leading (a tie goes to the one that acted first); a slot
// it gave up by a rebalance while it still started fires elsewhere and a
// fenced record are not takeovers; a graceful stop whose other slot's run
// still finished after a successor acted is one; live members' handovers
// are no failover.
func TestLastFailover(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var recs []history.Record
	// fire: a record of job/partition by member under token, started at
	// second s and finished one later.
	fire := func(job string, p int, member string, token int, s int, outcome jobs.Outcome) {
		recs = append(recs, history.Record{Job: job, Partition: p, Member: member, Token: fencing.Token(token),
			ScheduledTime: at(s), StartedAt: at(s), FinishedAt: at(s + 1), Outcome: string(outcome)})
	}
	// old: lost at 10 s; its slots o/0, o/1 went to b.
	fire("o", 0, "old", 1, 5, jobs.Succeeded)
	fire("o", 1, "old", 1, 9, jobs.Succeeded)
	fire("o", 0, "b", 2, 14, jobs.Succeeded)
	fire("o", 1, "b", 2, 14, jobs.Succeeded)
	// gone: gave j/0 to c by a rebalance at 20 s, kept starting fires on
	// j/1..j/5 until 40 s, then was lost. c took j/1, j/2 (first at 45 s),
	// b took j/3, j/4 (first at 46 s and 44 s), d took j/5 at 44 s: c and b
	// tie at 2 and b, acting first, leads. A fenced write of gone's on j/5
	// after the takeover draws nothing.
	fire("j", 0, "gone", 3, 10, jobs.Succeeded)
	fire("j", 0, "c", 9, 20, jobs.Succeeded)
	for p := 1; p <= 5; p++ {
		fire("j", p, "gone", 3, 40, jobs.Succeeded)
	}
	fire("j", 1, "c", 10, 45, jobs.Succeeded)
	fire("j", 2, "c", 10, 47, jobs.Succeeded)
	fire("j", 3, "b", 11, 46, jobs.Succeeded)
	fire("j", 4, "b", 11, 44, jobs.Succeeded)
	fire("j", 5, "d", 12, 44, jobs.Succeeded)
	fire("j", 5, "gone", 3, 50, jobs.Fenced)
	// live handovers: c to b, both live.
	fire("k", 0, "c", 14, 70, jobs.Succeeded)
	fire("k", 0, "b", 15, 80, jobs.Succeeded)

	got := LastFailover(recs, map[string]bool{"b": true, "c": true, "d": true})
	if len(got) != 3 {
		t.Fatalf("takeovers %+v; want b's, c's and d's of gone's slots", got)
	}
	want := map[string]Takeover{
		"b": {Left: "gone", LeftLastRecord: at(41), Slots: 2, Of: 5, At: at(44), LedMost: true},
		"c": {Left: "gone", LeftLastRecord: at(41), Slots: 2, Of: 5, At: at(45)},
		"d": {Left: "gone", LeftLastRecord: at(41), Slots: 1, Of: 5, At: at(44)},
	}
	for m, w := range want {
		if got[m] != w {
			t.Errorf("%s: %+v, want %+v", m, got[m], w)
		}
	}

	// A graceful stop: gone started its last fire at 40 s, let j/2 go, c
	// acted on it at 41 s, and gone's run on j/2 started at 39 s ended at 50 s.
	recs = recs[:0]
	fire("j", 1, "gone", 3, 40, jobs.Succeeded)
	fire("j", 2, "gone", 3, 38, jobs.Succeeded)
	fire("j", 2, "gone", 3, 39, jobs.Succeeded) // a run ending after c's first record elsewhere: a graceful stop
	recs[2].FinishedAt = at(50)
	fire("j", 1, "c", 10, 45, jobs.Succeeded)
	fire("j", 2, "c", 10, 41, jobs.Succeeded)
	got = LastFailover(recs, map[string]bool{"c": true})
	if c := got["c"]; len(got) != 1 || c != (Takeover{Left: "gone", LeftLastRecord: at(50), Slots: 2, Of: 2, At: at(41), LedMost: true}) {
		t.Errorf("after a graceful stop: %+v", got)
	}
	if got := LastFailover(recs, map[string]bool{"c": true, "gone": true}); len(got) != 0 {
		t.Errorf("a live member's handovers read as a failover: %+v", got)
	}
}
