package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Upstream is one job a dependent job runs after (after:): the dependent
// fires once for each fire of Job, when every partition of that fire has
// ended with one of Outcomes (docs/semantics.md, "Jobs that run after
// other jobs").
type Upstream struct {
	Job      string   `json:"job"`
	Outcomes []string `json:"outcome,omitempty"` // empty: DefaultAfterOutcomes
}

// DefaultAfterOutcomes are the upstream outcomes a dependent runs after
// when its after: entry names none.
var DefaultAfterOutcomes = []string{"succeeded"}

// AfterOutcomes are the outcomes an upstream partition's fire can end
// with, which an after: entry may allow.
var AfterOutcomes = []string{"succeeded", "failed", "timed_out", "cancelled", "fenced", "skipped", "missed"}

// Allows reports whether outcome lets the dependent run.
func (u Upstream) Allows(outcome string) bool {
	if len(u.Outcomes) == 0 {
		return slices.Contains(DefaultAfterOutcomes, outcome)
	}
	return slices.Contains(u.Outcomes, outcome)
}

// Dependent reports whether j runs after other jobs instead of on a
// schedule.
func (j Job) Dependent() bool { return len(j.After) > 0 }

// never is the schedule of a dependent job: it has no fires of its own.
type never struct{}

func (never) Next(time.Time) time.Time { return time.Time{} }

// rawUpstream is an after: entry: a job's name, or {job:, outcome: [...]}.
type rawUpstream struct {
	Job     string   `yaml:"job"`
	Outcome []string `yaml:"outcome"`
}

// UnmarshalYAML reads either form of an after: entry.
func (r *rawUpstream) UnmarshalYAML(unmarshal func(any) error) error {
	var name string
	if err := unmarshal(&name); err == nil {
		*r = rawUpstream{Job: name}
		return nil
	}
	type plain rawUpstream
	var p plain
	if err := unmarshal(&p); err != nil {
		return err
	}
	*r = rawUpstream(p)
	return nil
}

// MarshalYAML writes the short form when the entry allows the default
// outcomes.
func (r rawUpstream) MarshalYAML() (any, error) {
	if len(r.Outcome) == 0 {
		return r.Job, nil
	}
	type plain rawUpstream
	return plain(r), nil
}

func rawUpstreamsOf(after []Upstream) []rawUpstream {
	var out []rawUpstream
	for _, u := range after {
		out = append(out, rawUpstream{Job: u.Job, Outcome: u.Outcomes})
	}
	return out
}

// after validates a job's after: entries, each on its own; whether the
// jobs they name exist, and cycles, are checked over the whole catalog
// (graph).
func (v *validator) after(jp fieldPath, rj rawJob, j *Job) {
	if rj.After == nil {
		return
	}
	ap := jp.child("after")
	if len(rj.After) == 0 {
		v.addf(ap, "after: is empty: name at least one upstream job, or remove it and set a schedule")
		return
	}
	if rj.Schedule != "" {
		v.addf(jp.child("schedule"), "a job with after: fires when its upstream jobs end: remove its schedule (or its after:)")
	}
	if rj.Jitter != "" {
		v.addf(jp.child("jitter"), "a job with after: fires when its upstream jobs end: jitter applies to scheduled jobs only")
	}
	if rj.Timezone != "" {
		v.addf(jp.child("timezone"), "a job with after: has no schedule to read in a time zone")
	}
	seen := map[string]bool{}
	for i, ru := range rj.After {
		p := ap.index(i)
		switch {
		case ru.Job == "":
			v.addf(p, "an after: entry names a job: write after: [extract] or after: [{job: extract, outcome: [succeeded]}]")
			continue
		case seen[ru.Job]:
			v.addf(p.child("job"), "job %q is named twice in after:", ru.Job)
			continue
		}
		seen[ru.Job] = true
		for k, o := range ru.Outcome {
			if !slices.Contains(AfterOutcomes, o) {
				v.addf(p.child("outcome").index(k), "outcome %q is not one of %s", o, strings.Join(AfterOutcomes, ", "))
			}
		}
		if ru.Outcome != nil && len(ru.Outcome) == 0 {
			v.addf(p.child("outcome"), "outcome: is empty: list the upstream outcomes the job runs after, or remove it (default: succeeded)")
		}
		j.After = append(j.After, Upstream{Job: ru.Job, Outcomes: ru.Outcome})
	}
}

// afterField is the path of job i's after: entry k.
func afterField(i, k int) fieldPath { return root("jobs").index(i).child("after").index(k) }

// graph checks the after: entries of the whole catalog: every upstream is
// a job of the catalog, and no job runs after itself, directly or through
// others. Held by TestAfterValidation.
func (v *validator) graph(cat *Catalog) {
	index := map[string]int{}
	for i, j := range cat.Jobs {
		if _, dup := index[j.Name]; !dup && j.Name != "" {
			index[j.Name] = i
		}
	}
	for i, j := range cat.Jobs {
		for k, u := range j.After {
			if _, ok := index[u.Job]; !ok {
				v.addf(afterField(i, k), "job %q runs after %q, which is not a job of the catalog", j.Name, u.Job)
				v.unresolved = append(v.unresolved, unresolvedAfter{upstream: u.Job, problem: v.problems[len(v.problems)-1]})
			}
		}
	}
	// A depth-first walk from each job, in catalog order, reports each
	// cycle once, at the after: entry that closes it.
	const (
		unseen = iota
		walking
		done
	)
	state := make([]int, len(cat.Jobs))
	var path []string
	var walk func(i int)
	walk = func(i int) {
		state[i] = walking
		path = append(path, cat.Jobs[i].Name)
		for k, u := range cat.Jobs[i].After {
			up, ok := index[u.Job]
			if !ok {
				continue
			}
			switch state[up] {
			case walking:
				start := slices.Index(path, u.Job)
				cycle := append(slices.Clone(path[start:]), u.Job)
				v.addf(afterField(i, k), "after: makes a cycle (%s): a job cannot run after itself", strings.Join(cycle, " → "))
			case unseen:
				walk(up)
			}
		}
		path = path[:len(path)-1]
		state[i] = done
	}
	for i := range cat.Jobs {
		if state[i] == unseen {
			walk(i)
		}
	}
}

// Dependents returns, for each job of cat, the jobs that run after it, in
// catalog order.
func (c *Catalog) Dependents() map[string][]string {
	out := map[string][]string{}
	for _, j := range c.Jobs {
		for _, u := range j.After {
			out[u.Job] = append(out[u.Job], j.Name)
		}
	}
	return out
}

// String is the entry as the catalog writes it.
func (u Upstream) String() string {
	if len(u.Outcomes) == 0 {
		return u.Job
	}
	return fmt.Sprintf("%s (outcome %s)", u.Job, strings.Join(u.Outcomes, ", "))
}
