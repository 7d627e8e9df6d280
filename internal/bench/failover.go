package bench

import (
	"slices"
	"time"
)

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
