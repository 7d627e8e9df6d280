package api

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kira-scheduler/kira/config"
)

// verb is what a write does to a job, as a credential's scope names it.
type verb string

const (
	// verbWrite creates, replaces or deletes a job's definition.
	verbWrite verb = "write"
	// verbTrigger requests a run, or cancels a waiting one.
	verbTrigger verb = "trigger"
	// verbPause pauses or resumes a job.
	verbPause verb = "pause"
	// verbCatalog replaces the whole catalog (PUT /v1/catalog): no scope
	// names it, only an unscoped credential may.
	verbCatalog verb = "catalog"
)

// scopeVerbs are the verbs a scope may list, in the order messages name them.
var scopeVerbs = []verb{verbWrite, verbTrigger, verbPause}

// scope limits a credential to some jobs and verbs. Each part that is set
// must allow a request: Jobs by the job's name, Labels by its labels, Verbs
// by what the request does. A nil *scope is an unscoped credential: every
// job, every verb, and whole-catalog writes (TestScopeAllows).
type scope struct {
	// jobs are job names: exact ("billing-run"), or a prefix ending in *
	// ("customer-*" is every job whose name starts with "customer-"; "*"
	// is every job). Empty: any name.
	jobs []string
	// labels must all be among the job's labels (jobLabels), with the same
	// values. Empty: any labels.
	labels map[string]string
	// verbs are what the credential may do. Empty: every verb but
	// whole-catalog writes.
	verbs []verb
}

// jobLabels are the labels a scope's label selector is matched against:
// the job's labels: (config.Job.Labels), not its placement's, which say
// where it runs.
func jobLabels(j config.Job) map[string]string { return j.Labels }

// matchName reports whether name is one of patterns (exact, or prefix*).
func matchName(patterns []string, name string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); (ok && strings.HasPrefix(name, prefix)) || p == name {
			return true
		}
	}
	return false
}

// refuses says why s does not let a caller do v to the job name, or "" if
// it does. Each of labels is the labels of a definition of the job that
// exists (the stored one, the new one): every one must match, so a
// replace cannot move a job out of the scope. With none (a job not
// stored, and no new definition), only the name decides.
func (s *scope) refuses(v verb, name string, labels ...map[string]string) string {
	switch {
	case s == nil:
		return ""
	case v == verbCatalog:
		return fmt.Sprintf("a whole-catalog write needs an unscoped credential, and this one is limited to %s", s)
	case len(s.verbs) > 0 && !slices.Contains(s.verbs, v):
		return fmt.Sprintf("its scope allows the verbs %s, not %s", joinVerbs(s.verbs), v)
	case len(s.jobs) > 0 && !matchName(s.jobs, name):
		return fmt.Sprintf("the name %s matches none of its scope's jobs (%s)", name, strings.Join(s.jobs, ", "))
	}
	for i, have := range labels {
		for _, k := range slices.Sorted(maps.Keys(s.labels)) {
			if got, ok := have[k]; !ok || got != s.labels[k] {
				which := "the job's labels"
				if len(labels) == 2 && i == 1 {
					which = "the new definition's labels"
				}
				return fmt.Sprintf("%s (%s) lack %s=%s, which its scope requires", which, pairs(have), k, s.labels[k])
			}
		}
	}
	return ""
}

// String is the scope as its limits: what a refusal names.
func (s *scope) String() string {
	var parts []string
	if len(s.jobs) > 0 {
		parts = append(parts, "jobs "+strings.Join(s.jobs, ", "))
	}
	if len(s.labels) > 0 {
		parts = append(parts, "labels "+pairs(s.labels))
	}
	if len(s.verbs) > 0 {
		parts = append(parts, "verbs "+joinVerbs(s.verbs))
	}
	return strings.Join(parts, "; ")
}

func joinVerbs(vs []verb) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// pairs is labels as {k=v,…}, sorted.
func pairs(labels map[string]string) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		out = append(out, k+"="+labels[k])
	}
	return "{" + strings.Join(out, ",") + "}"
}
