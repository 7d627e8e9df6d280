package config

import (
	"fmt"
	"maps"
	"slices"
)

// Concurrency limits (docs/catalog.md, "Concurrency limits"): a job's
// max_running: N lets at most N of its slots run at once across the
// cluster; a catalog's pools: {name: N} and a job's pool: name share one
// limit between jobs, as Airflow's pools do. A job sets one or the other,
// not both. Held by TestLimits and TestLimitProblems.

// MaxPoolLimit bounds a limit: a larger one is almost surely a typo, and a
// fire waiting for a permit reads up to that many keys.
const MaxPoolLimit = 10000

// Limit is the concurrency limit a job's runs share: Pool names it (the
// key prefix the permits live under, see keyspace.Permits), N is how many
// run at once. The zero Limit is no limit.
type Limit struct {
	Pool string // "pool/<name>" for a catalog pool, "job/<name>" for max_running
	N    int
}

// Limited reports whether l limits anything.
func (l Limit) Limited() bool { return l.N > 0 }

// Limit returns the limit j's runs share in c: its pool's, its own
// max_running's, or none.
func (c *Catalog) Limit(j Job) Limit {
	switch {
	case j.Pool != "":
		if n, ok := c.Pools[j.Pool]; ok {
			return Limit{Pool: "pool/" + j.Pool, N: n}
		}
	case j.MaxRunning > 0:
		return Limit{Pool: "job/" + j.Name, N: j.MaxRunning}
	}
	return Limit{}
}

// pools validates the catalog's pools: at most MaxPools, names as job
// names are spelled, limits from 1 to MaxPoolLimit.
func (v *validator) pools(raw map[string]int) map[string]int {
	if raw == nil {
		return nil
	}
	if len(raw) > MaxPools {
		v.addf(root("pools"), "%d pools, over the limit of %d", len(raw), MaxPools)
		return nil
	}
	out := make(map[string]int, len(raw))
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		p, n := root("pools").child(name), raw[name]
		switch {
		case !namePattern.MatchString(name) || len(name) > MaxNameLength:
			v.addf(p, "%q is not a valid pool name: use lower-case letters, digits and '-', starting with a letter or digit, at most %d characters", name, MaxNameLength)
		case n < 1 || n > MaxPoolLimit:
			v.addf(p, "pool %s's limit must be between 1 and %d, got %d", name, MaxPoolLimit, n)
		default:
			out[name] = n
		}
	}
	return out
}

// limit validates a job's max_running and pool against the pools the
// catalog declares (valid or not: a bad limit is reported at the pool).
func (v *validator) limit(jp fieldPath, rj rawJob, j *Job, declared map[string]int) {
	if rj.MaxRunning != nil {
		if n := *rj.MaxRunning; n < 1 || n > MaxPoolLimit {
			v.addf(jp.child("max_running"), "max_running must be between 1 and %d, got %d", MaxPoolLimit, n)
		} else {
			j.MaxRunning = n
		}
	}
	if rj.Pool == "" {
		return
	}
	j.Pool = rj.Pool
	switch _, known := declared[rj.Pool]; {
	case rj.MaxRunning != nil:
		v.addf(jp.child("pool"), "set pool or max_running, not both: a pool's limit is set under pools:")
	case !known:
		names := slices.Sorted(maps.Keys(declared))
		if len(names) == 0 {
			v.addf(jp.child("pool"), "unknown pool %q: the catalog declares no pools (add pools: {%s: N} at the top level)", rj.Pool, rj.Pool)
		} else {
			v.addf(jp.child("pool"), "unknown pool %q: the catalog declares %v", rj.Pool, names)
		}
	}
}

// limitsText describes a change of the catalog's pools, for kira apply's diff.
func limitsText(prev, next map[string]int) string {
	if maps.Equal(prev, next) {
		return ""
	}
	return fmt.Sprintf("pools: %v → %v (members apply it to fires that start waiting after they see it)", prev, next)
}
