package ops

import (
	"cmp"
	"slices"
	"time"

	"github.com/kira-scheduler/kira/internal/history"
	"github.com/kira-scheduler/kira/jobs"
)

// Takeover is a live member's part in the cluster's last failover, as the
// history's records show it: the member that left or was lost (Left, gone
// from the live members), how many of its slots this member took over and
// when it first acted on them. Only records tell who held a slot when
// (holders as GET /v1/timeline draws them), so a failover older than the
// records a slot keeps (history_limit) is not seen. TestLastFailover.
type Takeover struct {
	// Left is the departed member's id; LeftLastRecord the end of its last
	// record in any slot, about when it stopped acting.
	Left           string    `json:"left"`
	LeftLastRecord time.Time `json:"left_last_record"`
	// Slots of Left's this member took over, of Of taken over by anyone.
	Slots int `json:"slots"`
	Of    int `json:"of"`
	// At is the start of this member's first record in those slots.
	At time.Time `json:"at"`
	// LedMost: no member took over more of them (of those that took as
	// many, this one first acted first).
	LedMost bool `json:"led_most"`
}

// LastFailover is the cluster's last failover in recs (every slot's
// records, as Rings.Records answers them; the slices are sorted in place):
// of the members not in live, the one whose last record is the newest
// among those whose slots others took over, and each member's takeover of
// its slots, by member id.
//
// A takeover of a departed member A's slot is the next holder after A's
// last holding there, counted only when that holder's first record there
// starts no earlier than A's last start anywhere: a slot A gave up while
// it still started fires elsewhere (a rebalance as a member joined) is
// not a failover's, while a slot it let go as it stopped (SIGTERM), its
// other slots' runs still finishing, is.
func LastFailover(recs []history.Record, live map[string]bool) map[string]Takeover {
	a := holdersOf(recs)
	taken := map[string]map[string]*Takeover{} // by departed member, by successor
	for _, hs := range a.holders {
		for i := 1; i < len(hs); i++ {
			left, next := hs[i-1], hs[i]
			if live[left.Member] || left.Member == next.Member || next.From.Before(a.lastStart[left.Member]) {
				continue
			}
			if taken[left.Member] == nil {
				taken[left.Member] = map[string]*Takeover{}
			}
			t := taken[left.Member][next.Member]
			if t == nil {
				t = &Takeover{Left: left.Member, LeftLastRecord: a.lastEnd[left.Member], At: next.From}
				taken[left.Member][next.Member] = t
			}
			t.Slots++
			if next.From.Before(t.At) {
				t.At = next.From
			}
		}
	}
	last := ""
	for m := range taken {
		if last == "" || a.lastEnd[m].After(a.lastEnd[last]) || a.lastEnd[m].Equal(a.lastEnd[last]) && m < last {
			last = m
		}
	}
	if last == "" {
		return nil
	}
	return ranked(taken[last])
}

// activity is every slot's holders, oldest first, and each member's last
// start and last end of a record in any slot.
type activity struct {
	holders            [][]Holding
	lastStart, lastEnd map[string]time.Time
}

// holdersOf is the activity recs show (fenced records left out).
func holdersOf(recs []history.Record) activity {
	bySlot := recordsBySlot(recs)
	a := activity{holders: make([][]Holding, 0, len(bySlot)), lastStart: map[string]time.Time{}, lastEnd: map[string]time.Time{}}
	for _, rs := range bySlot {
		slices.SortFunc(rs, func(x, y history.Record) int {
			return cmp.Or(x.ScheduledTime.Compare(y.ScheduledTime), x.StartedAt.Compare(y.StartedAt))
		})
		var hs []Holding
		for _, r := range rs {
			hs = addHolding(hs, r)
			if r.Outcome != string(jobs.Fenced) {
				a.lastStart[r.Member] = maxTime(a.lastStart[r.Member], startOf(r))
			}
		}
		for _, h := range hs {
			a.lastEnd[h.Member] = maxTime(a.lastEnd[h.Member], h.To)
		}
		a.holders = append(a.holders, hs)
	}
	return a
}

// ranked is one failover's takeovers with Of and LedMost set: the
// successor that took most leads; of those that took as many, the one that
// acted first, then the smallest id.
func ranked(taken map[string]*Takeover) map[string]Takeover {
	lead, of := "", 0
	for m, t := range taken {
		of += t.Slots
		if l := taken[lead]; l == nil || cmp.Or(l.Slots-t.Slots, t.At.Compare(l.At), cmp.Compare(m, lead)) < 0 {
			lead = m
		}
	}
	out := map[string]Takeover{}
	for m, t := range taken {
		t.Of, t.LedMost = of, m == lead
		out[m] = *t
	}
	return out
}

// AddLastFailover sets each member's LastFailover from the cluster's
// records (LastFailover): null for a member that took no slot over.
func AddLastFailover(members []MemberView, recs []history.Record) {
	live := map[string]bool{}
	for _, m := range members {
		live[m.ID] = true
	}
	takeovers := LastFailover(recs, live)
	for i := range members {
		if t, ok := takeovers[members[i].ID]; ok {
			members[i].LastFailover = &t
		}
	}
}
