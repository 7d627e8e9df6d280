package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kira-scheduler/kira/internal/keyspace"
)

// A write of a whole catalog (Apply, PutJobs, StoreFile) replaces the jobs
// of the whole-catalog managers, apply and file, and keeps the others':
// combine makes the catalog it stores from the new one and the stored one
// (docs/catalog.md, "Who manages a job"; TestApplyKeepsJobsOfOtherManagers).

// WholeOptions say what a write of a whole catalog does with the stored
// jobs of single-job writers (api:<name>, cli:<name>).
type WholeOptions struct {
	// ForceConflicts takes over the jobs the new catalog names that another
	// manager holds: their manager becomes apply (or file). Without it such
	// a job is a *ManagerConflictError and nothing is written.
	ForceConflicts bool
	// PruneOthers deletes the stored jobs of other managers that the new
	// catalog lacks. Without it they are kept, unchanged.
	PruneOthers bool
	// Where names where a job is in the files the catalog was read from
	// (file:line), for a conflict's message; nil: its index in jobs:.
	Where func(job string) string
}

// whole is the catalog a whole write stores: the new jobs and the kept ones,
// in the order they are stored, each with its position and manager, and
// what became of the other managers' jobs.
type whole struct {
	cat    *Catalog
	meta   []jobMeta // by index in cat.Jobs
	kept   map[Manager][]string
	taken  map[string]Manager // job → its manager before
	pruned map[Manager][]string
}

// notes says what the write does with other managers' jobs, for Applied's
// Changes: "kept 3 jobs managed by api:signup".
func (w *whole) notes() []string {
	var out []string
	for _, m := range slices.Sorted(maps.Keys(w.kept)) {
		out = append(out, fmt.Sprintf("= kept %s managed by %s", jobCount(len(w.kept[m])), m))
	}
	for _, job := range slices.Sorted(maps.Keys(w.taken)) {
		out = append(out, fmt.Sprintf("! job %s taken over from %s", job, w.taken[job]))
	}
	for _, m := range slices.Sorted(maps.Keys(w.pruned)) {
		out = append(out, fmt.Sprintf("- pruned %s managed by %s: %s", jobCount(len(w.pruned[m])), m, strings.Join(w.pruned[m], ", ")))
	}
	return out
}

func jobCount(n int) string {
	if n == 1 {
		return "1 job"
	}
	return fmt.Sprintf("%d jobs", n)
}

// combine is the catalog the write of cat (stored as src) makes over cur
// (nil: none, or one unread): the family's jobs are cat's; a stored job of
// another manager that cat lacks is kept unless opt.PruneOthers; a job of
// cat that another manager holds is a *ManagerConflictError unless
// opt.ForceConflicts. The combined catalog is validated across its jobs:
// after: targets, cycles, pools, MaxJobs; an after: target cat lacks is
// resolved against the kept jobs (TestApplyKeepsJobsOfOtherManagers).
func combine(cat *Catalog, src Source, cur *Stored, opt WholeOptions) (*whole, error) {
	fam := familyOf(src)
	var st *perJobState
	if cur != nil && cur.Catalog != nil {
		st = cur.perJob
	}
	if st == nil {
		return &whole{cat: cat, meta: metaOf(cat.Jobs, nil, fam)}, resolved(cat, nil)
	}
	w := &whole{kept: map[Manager][]string{}, taken: map[string]Manager{}, pruned: map[Manager][]string{}}
	names := make(map[string]bool, len(cat.Jobs))
	var conflicts []ManagerConflict
	for i, j := range cat.Jobs {
		names[j.Name] = true
		m, ok := st.managers[j.Name]
		switch {
		case !ok || m.Family():
		case opt.ForceConflicts:
			w.taken[j.Name] = m
		default:
			conflicts = append(conflicts, ManagerConflict{Job: j.Name, Manager: m, Where: whereJob(opt, i, j.Name)})
		}
	}
	if len(conflicts) > 0 {
		return nil, &ManagerConflictError{By: fam, Conflicts: conflicts}
	}
	var kept []storedJob
	for _, j := range cur.Catalog.Jobs {
		m := st.managers[j.Name]
		switch {
		case names[j.Name] || m.Family():
		case opt.PruneOthers:
			w.pruned[m] = append(w.pruned[m], j.Name)
		default:
			w.kept[m] = append(w.kept[m], j.Name)
			kept = append(kept, storedJob{Position: st.positions[j.Name], Job: j, Manager: m, Created: st.created[j.Name]})
		}
	}
	meta := metaOf(cat.Jobs, st.positions, fam)
	for i, j := range cat.Jobs {
		meta[i].created = st.created[j.Name] // a job kept is the same job
	}
	if len(kept) == 0 {
		w.cat, w.meta = cat, meta
		return w, resolved(cat, nil)
	}
	all := make([]storedJob, 0, len(cat.Jobs)+len(kept))
	for i, j := range cat.Jobs {
		all = append(all, storedJob{Position: meta[i].pos, Job: j, Manager: meta[i].manager, Created: meta[i].created})
	}
	all = append(all, kept...)
	slices.SortStableFunc(all, byPosition)
	next := *cat
	next.Jobs, w.meta = make([]Job, len(all)), make([]jobMeta, len(all))
	for i, j := range all {
		next.Jobs[i], w.meta[i] = j.Job, jobMeta{pos: j.Position, manager: j.Manager, created: j.Created}
	}
	w.cat = &next
	return w, resolved(&next, kept)
}

// whereJob names job i of the new catalog for a message.
func whereJob(opt WholeOptions, i int, job string) string {
	if opt.Where != nil {
		if w := opt.Where(job); w != "" {
			return w
		}
	}
	return fmt.Sprintf("jobs[%d]", i)
}

// resolved checks what the validator of the files could not: the after:
// targets they lack (Catalog.unresolved) must be kept jobs, and the
// combined catalog cat (with the kept jobs) must hold across its jobs.
func resolved(cat *Catalog, kept []storedJob) error {
	var problems []Problem
	names := make(map[string]bool, len(kept))
	for _, k := range kept {
		names[k.Job.Name] = true
	}
	for _, u := range cat.unresolved {
		if !names[u.upstream] {
			problems = append(problems, u.problem)
		}
	}
	if len(kept) > 0 {
		problems = append(problems, keptProblems(cat, kept)...)
	}
	if len(problems) > 0 {
		return &Error{Problems: problems}
	}
	return nil
}

// keptProblems checks the combined catalog cat for what involves its kept
// jobs: their pools exist, their after: targets exist, no cycle, MaxJobs.
func keptProblems(cat *Catalog, kept []storedJob) []Problem {
	v := validator{}
	if len(cat.Jobs) > MaxJobs {
		v.addf(root("jobs"), "with the %d jobs of other managers it keeps, the catalog has %d jobs, over the limit of %d", len(kept), len(cat.Jobs), MaxJobs)
	}
	for _, k := range kept {
		if k.Job.Pool != "" {
			if _, ok := cat.Pools[k.Job.Pool]; !ok {
				v.addf(root("pools"), "job %s (managed by %s, kept) has pool %q, which the new catalog does not declare", k.Job.Name, k.Manager, k.Job.Pool)
			}
		}
	}
	v.graph(cat)
	out := v.problems
	for i := range out {
		out[i].Field = "" // the combined catalog's indexes are no file's
	}
	return out
}

// ManagerConflict is one job a write names that another manager holds.
type ManagerConflict struct {
	Job     string
	Manager Manager // who holds it
	Where   string  // where the write names it: file:line, or jobs[i]
}

// ManagerConflictError is returned when a write names jobs another manager
// holds, without ForceConflicts (a whole write) or Force (PutJob,
// DeleteJob): nothing is written. The API answers it 409.
type ManagerConflictError struct {
	By        Manager // the writer
	Conflicts []ManagerConflict
}

func (e *ManagerConflictError) Error() string {
	parts := make([]string, len(e.Conflicts))
	for i, c := range e.Conflicts {
		parts[i] = fmt.Sprintf("job %s (%s) is managed by %s", c.Job, c.Where, c.Manager)
		if c.Where == "" {
			parts[i] = fmt.Sprintf("job %s is managed by %s", c.Job, c.Manager)
		}
	}
	return fmt.Sprintf("config: conflict: %s, not %s; nothing written: take it over with force (kira apply --force-conflicts), or leave it to its manager", strings.Join(parts, "; "), e.By)
}

// ref is one after: edge: dep runs after up.
type ref struct{ up, dep string }

func (r ref) key(cluster string, g int64) string { return keyspace.CatalogRef(cluster, g, r.up, r.dep) }

// refsOf is every after: edge of cat.
func refsOf(cat *Catalog) map[ref]bool {
	out := map[ref]bool{}
	for _, j := range cat.Jobs {
		for _, u := range j.After {
			out[ref{up: u.Job, dep: j.Name}] = true
		}
	}
	return out
}

// unresolvedAfter is an after: entry of a catalog read from files that
// names a job the files lack: a write resolves it against the stored jobs
// of other managers (UnresolvedCatalog).
type unresolvedAfter struct {
	upstream string
	problem  Problem
}

// UnresolvedCatalog returns the catalog of err, an *Error of Lint, Parse
// or LintDir, when its only problems are after: targets the files lack:
// Apply, PutJobs and StoreFile resolve those against the jobs of other
// managers they keep, and refuse the catalog with the same problems if
// they are not there (TestAfterIntoAJobOfAnotherManager).
func UnresolvedCatalog(err error) (*Catalog, bool) {
	e, ok := err.(*Error)
	if !ok || e.open == nil {
		return nil, false
	}
	return e.open, true
}
