package bench

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/kira-scheduler/kira/scheduler"
	"github.com/kira-scheduler/kira/shard"
)

// ownerOf waits until the single slot is led by the member the assignment prefers
// (views have converged) and by nobody else, and returns that member.
func ownerOf(ms []*member) (*member, error) {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.id)
	}
	a, err := shard.Assign([]shard.Job{{Name: "load", Partitions: 1, Members: ids}})
	if err != nil {
		return nil, err
	}
	want := a.Owner(shard.Slot{Job: "load"})
	var owner *member
	err = waitFor(30*time.Second, func() bool {
		owner = nil
		l := leaders(ms)
		if len(l) != 1 || l[shard.Slot{Job: "load"}] != want {
			return false
		}
		for _, m := range ms {
			if m.id == want {
				owner = m
			}
		}
		return true
	})
	return owner, err
}

// lostFires counts scheduled seconds in [from, to) that no member started.
func lostFires(evs []scheduler.Event, from, to time.Time) int {
	ran := map[int64]bool{}
	for _, e := range evs {
		if e.Kind == scheduler.Finished && !e.StartedAt.IsZero() {
			ran[e.Execution.ScheduledTime.UnixNano()] = true
		}
	}
	return holes(ran, from, to)
}

// holes counts the whole seconds in (from, to) missing from ran, a set of
// scheduled times by Unix nanoseconds (time.Time values of one instant may
// differ as map keys).
func holes(ran map[int64]bool, from, to time.Time) int {
	lost := 0
	for t := from.Truncate(time.Second).Add(time.Second); t.Before(to); t = t.Add(time.Second) {
		if !ran[t.UnixNano()] {
			lost++
		}
	}
	return lost
}

// ownerChange runs trials of one change of owner: n members run a 1s job;
// once the ring's owner has run it twice, act is applied to the owner at
// offset() into a second, and took reports (from the events) how long after
// that the change was complete. It returns the samples and the fires no
// member started around the change.
func ownerChange(cfg Config, name string, ttl time.Duration, n int, offset func() time.Duration,
	act func(owner *member), took func(e scheduler.Event, owner *member, at time.Time) (time.Duration, bool)) ([]time.Duration, int, error) {
	var samples []time.Duration
	lost := 0
	for trial := 0; trial < cfg.Trials; trial++ {
		ev := &events{}
		ms, err := startMembers(cfg, benchCatalog(cluster(name), ttl, 1, 0), n, ev.add)
		if err != nil {
			return samples, lost, err
		}
		owner, err := ownerOf(ms)
		if err == nil {
			err = waitFor(10*time.Second, func() bool { return countFinished(ev.snapshot(), owner.id) >= 2 })
		}
		if err != nil {
			return samples, lost, err
		}
		first := time.Now()
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + offset())))
		at := time.Now()
		act(owner)
		var d time.Duration
		err = waitFor(ttl+30*time.Second, func() bool {
			for _, e := range ev.snapshot() {
				if got, ok := took(e, owner, at); ok {
					d = got
					return true
				}
			}
			return false
		})
		if err != nil {
			return samples, lost, err
		}
		// Let the catch-up and one more fire happen, then count holes.
		end := time.Now().Add(1500 * time.Millisecond)
		time.Sleep(time.Until(end) + 500*time.Millisecond)
		lost += lostFires(ev.snapshot(), first, end)
		samples = append(samples, d)
		for _, m := range ms {
			if m != owner {
				m.stop()
			}
		}
	}
	return samples, lost, nil
}

// failover crashes the owner of a 1s job at a random moment of a second and
// times the first execution by the next owner (missed fires are caught up at
// once: misfire fire-all). The moment is random because etcd checks for
// expired leases every 500 ms on a fixed ticker: crashes at one offset into
// the second would all meet that ticker at one phase, and a run's samples
// would fall on a single grid instead of spreading as real crashes do.
func failover(cfg Config, ttl time.Duration) (Failover, error) {
	anyMoment := func() time.Duration { return rand.N(time.Second) }
	samples, lost, err := ownerChange(cfg, "failover", ttl, 3, anyMoment, (*member).crash,
		func(e scheduler.Event, owner *member, at time.Time) (time.Duration, bool) {
			ok := e.Kind == scheduler.Finished && e.Member != owner.id && !e.StartedAt.IsZero() && e.StartedAt.After(at)
			return e.StartedAt.Sub(at), ok
		})
	if err != nil {
		return Failover{TTL: ttl}, err
	}
	return failoverFigures(ttl, samples, lost), nil
}

// failoverFigures sums up a failover run: its samples' median and worst,
// and the median as a ratio to the TTL.
func failoverFigures(ttl time.Duration, samples []time.Duration, lost int) Failover {
	med := median(samples)
	return Failover{TTL: ttl, Samples: samples, Median: med, Worst: slices.Max(samples), RatioTTL: float64(med) / float64(ttl), Lost: lost}
}

// handoverFigures sums up a handover run: its samples' median and worst.
func handoverFigures(samples []time.Duration, lost int) *Handover {
	return &Handover{Samples: samples, Median: median(samples), Worst: slices.Max(samples), Lost: lost}
}

func countFinished(evs []scheduler.Event, member string) int {
	n := 0
	for _, e := range evs {
		if e.Kind == scheduler.Finished && e.Member == member {
			n++
		}
	}
	return n
}

// handover stops the owner of an idle 1s job gracefully, a quarter into a
// second, and times until the next owner holds the slot (won its election).
func handover(cfg Config) (*Handover, error) {
	quarter := func() time.Duration { return 250 * time.Millisecond }
	samples, lost, err := ownerChange(cfg, "handover", 6*time.Second, 2, quarter,
		func(owner *member) { go owner.stop() },
		func(e scheduler.Event, owner *member, at time.Time) (time.Duration, bool) {
			return e.At.Sub(at), e.Kind == scheduler.Acquired && e.Member != owner.id && e.At.After(at)
		})
	if err != nil {
		return nil, err
	}
	return handoverFigures(samples, lost), nil
}
