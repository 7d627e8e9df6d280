package config

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kira-scheduler/kira/internal/keyspace"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// PutJob creates or replaces job name of the cluster's stored catalog with
// data, one job in YAML or JSON (jobbody.go), as opt.Manager, under opt's
// conditions, and returns what it did. A created job has no position: it
// orders after the catalog's positioned jobs, by name (byPosition); a
// replaced one keeps its position. What it reads and guards, and the rules
// across jobs it keeps, are job.go's (TestSingleJobWrites,
// TestSingleJobRulesAcrossJobs, TestPutJobWhoseAnswerIsLost). It writes
// through a new JobWriter, which reads everything first.
func PutJob(ctx context.Context, kv clientv3.KV, cluster string, data []byte, name string, opt PutJobOptions) (*JobWritten, error) {
	return NewJobWriter(kv, cluster).PutJob(ctx, data, name, opt)
}

// PutJob is PutJob of the writer's cluster, deciding first on what the
// writer keeps (jobwriter.go).
func (w *JobWriter) PutJob(ctx context.Context, data []byte, name string, opt PutJobOptions) (*JobWritten, error) {
	if err := opt.Manager.ValidateSingle(); err != nil {
		return nil, err
	}
	file := "job " + name
	rj, doc, err := decodeJobBody(file, name, data)
	if err != nil {
		return nil, err
	}
	v := w.kept(name)
	var lost *lostWrite
	for range jobAttempts {
		if v == nil {
			if v, err = w.read(ctx, name); err != nil {
				return nil, err
			}
		}
		switch ok, err := lost.applied(v); {
		case err != nil:
			return nil, err
		case ok:
			return &JobWritten{Job: name, Revision: v.jobRev, Created: lost.created, Manager: opt.Manager}, nil
		}
		p := &jobPut{jobView: v, by: opt.Manager}
		res, next, err := p.attempt(ctx, w, file, rj, doc, opt)
		switch {
		case isLost(err):
			lost, v = &lostWrite{at: v.at, before: v.jobRev, value: p.value, err: err, created: v.job == nil}, nil
		case err != nil && !v.fresh:
			v = nil // decided on what the writer kept: read, and decide again
		case err != nil || res != nil:
			return res, err
		default:
			v = next
		}
	}
	return nil, fmt.Errorf("%w (job %s)", ErrCatalogBusy, name)
}

// check asks c (if set) about the stored job of v and next.
func check(c func(stored, next *Job) error, v *jobView, next *Job) error {
	if c == nil {
		return nil
	}
	var stored *Job
	if v.job != nil {
		stored = &v.job.Job
	}
	return c(stored, next)
}

// jobPut is one attempt of PutJob over a view.
type jobPut struct {
	*jobView
	by    Manager
	job   Job
	value []byte
}

// attempt decides the put on p's view and commits it: its answer, or the
// view a failed guard answered (read it again when nil), or an error; an
// error of a view that is not fresh is not the write's answer.
func (p *jobPut) attempt(ctx context.Context, w *JobWriter, file string, rj rawJob, doc *document, opt PutJobOptions) (*JobWritten, *jobView, error) {
	v := p.jobView
	if err := v.allowed(ctx, w.kv, opt.Manager, opt.IfRevision, opt.CreateOnly, opt.Force); err != nil {
		return nil, nil, err
	}
	j, err := validJob(file, rj, doc, v.sets)
	if err != nil {
		return nil, nil, err
	}
	if err := check(opt.Check, v, &j); err != nil {
		return nil, nil, err
	}
	p.job = j
	return p.commit(ctx, w)
}

// errKept is an answer that writes nothing, decided on a view that is not
// fresh: the write reads the view and decides again.
var errKept = errors.New("config: decided on a kept view")

// commit checks the rules across jobs and commits the put; a failed guard
// answers the view as stored (nil: read it again). A lost answer is an
// error isLost knows.
func (p *jobPut) commit(ctx context.Context, w *JobWriter) (*JobWritten, *jobView, error) {
	pos, created := int64(0), int64(0)
	if p.jobView.job != nil {
		pos, created = p.jobView.job.Position, p.jobView.job.Created // a replace keeps the job's creation
	}
	value, err := json.Marshal(storedJob{Position: pos, Job: p.job, Manager: p.by, Created: created})
	if err != nil {
		return nil, nil, err
	}
	if len(value) > MaxTxnBytes {
		return nil, nil, &Error{Problems: []Problem{{File: "job " + p.name, Message: (&tooLargeError{job: p.name, size: len(value), limit: MaxTxnBytes}).message()}}}
	}
	p.value = value
	if p.jobView.job != nil && string(value) == string(p.jobValue) {
		if !p.fresh {
			return nil, nil, errKept
		}
		return &JobWritten{Job: p.name, Revision: p.jobRev, Unchanged: true, Manager: p.by}, nil, nil
	}
	guards, err := p.rules(ctx, w)
	if err != nil {
		return nil, nil, err
	}
	op := "created"
	if p.jobView.job != nil {
		op = "replaced"
	}
	ops := append([]clientv3.Op{clientv3.OpPut(p.key(), string(value))}, p.refOps()...)
	resp, err := w.kv.Txn(ctx).If(append(p.guards(), guards...)...).Then(append(ops, p.bump(p.by, op)...)...).
		Else(viewOps(p.cluster, p.head.Generation, p.name)...).Commit()
	if err != nil {
		return nil, nil, lostAnswer{fmt.Errorf("config: put job %s: %w", p.name, err)}
	}
	if !resp.Succeeded {
		next, err := viewFrom(p.cluster, p.name, p.head.Generation, resp)
		if next != nil {
			w.learn(next)
		}
		return nil, next, err
	}
	w.wrote(p.jobView, value, resp)
	res := &JobWritten{Job: p.name, Revision: resp.Header.Revision, Created: p.jobView.job == nil, Manager: p.by}
	if p.jobView.job != nil && Manager(p.jobView.job.Manager.String()) != p.by {
		res.Previous = Manager(p.jobView.job.Manager.String())
	}
	return res, nil, nil
}

// rules checks the rules across jobs that the put job takes part in, and
// returns the guards that keep them until the commit: its after: targets
// exist and it closes no cycle through them (walk); a create keeps the
// jobs at most MaxJobs (jobcount.go).
func (p *jobPut) rules(ctx context.Context, w *JobWriter) ([]clientv3.Cmp, error) {
	var room []clientv3.Cmp
	if p.jobView.job == nil {
		var err error
		if room, err = w.room(ctx, p.jobView); err != nil {
			return nil, err
		}
	}
	guards, err := p.walk(ctx, w.kv)
	return append(room, guards...), err
}

// walk reads the jobs the put job runs after, and theirs, level by level,
// each read key guarded by its mod revision: a target that is not stored is
// a problem of its after: entry, and a path back to the job a cycle.
func (w *jobPut) walk(ctx context.Context, kv clientv3.KV) ([]clientv3.Cmp, error) {
	var guards []clientv3.Cmp
	seen := map[string]bool{}
	via := map[string]string{} // job → the job that runs after it, towards the put one
	var level []string
	for _, u := range w.job.After {
		if u.Job == w.name {
			return nil, w.problem(u.Job, fmt.Sprintf("after: makes a cycle (%s → %s): a job cannot run after itself", w.name, w.name))
		}
		level, seen[u.Job], via[u.Job] = append(level, u.Job), true, w.name
	}
	for first := true; len(level) > 0; first = false {
		found, err := w.readJobs(ctx, kv, level)
		if err != nil {
			return nil, err
		}
		var next []string
		for _, name := range level {
			sj, ok := found[name]
			if !ok {
				if first {
					return nil, w.problem(name, fmt.Sprintf("job %q runs after %q, which is not a job of the catalog", w.name, name))
				}
				continue // a dangling reference of another job: not this write's
			}
			guards = append(guards, clientv3.Compare(clientv3.ModRevision(keyspace.CatalogJob(w.cluster, w.head.Generation, name)), "=", sj.rev))
			for _, u := range sj.after {
				if u == w.name {
					return nil, w.problem(firstOf(w.name, name, via), fmt.Sprintf("after: makes a cycle (%s): a job cannot run after itself", cyclePath(w.name, name, via)))
				}
				if !seen[u] {
					seen[u], via[u] = true, name
					next = append(next, u)
				}
			}
		}
		level = next
	}
	return guards, nil
}

// cyclePath spells the cycle that closes at job: name → … → job → name.
func cyclePath(name, last string, via map[string]string) string {
	path := []string{name}
	for at := last; at != name; at = via[at] {
		path = append(path, at)
	}
	slices.Reverse(path[1:])
	return strings.Join(append(path, name), " → ")
}

// firstOf is the after: target of the put job through which walk reached
// job.
func firstOf(name, job string, via map[string]string) string {
	for via[job] != name {
		job = via[job]
	}
	return job
}

// readJob is what walk needs of a job: its after: targets and mod revision.
type readJob struct {
	after []string
	rev   int64
}

// readJobs reads the named jobs of the generation, MaxTxnOps at a time.
func (w *jobPut) readJobs(ctx context.Context, kv clientv3.KV, names []string) (map[string]readJob, error) {
	out := map[string]readJob{}
	for len(names) > 0 {
		batch := names[:min(len(names), MaxTxnOps)]
		names = names[len(batch):]
		ops := make([]clientv3.Op, len(batch))
		for i, n := range batch {
			ops[i] = clientv3.OpGet(keyspace.CatalogJob(w.cluster, w.head.Generation, n))
		}
		resp, err := kv.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("config: put job %s: %w", w.name, err)
		}
		for i, r := range resp.Responses {
			kvs := r.GetResponseRange().Kvs
			if len(kvs) == 0 {
				continue
			}
			sj, err := decodeStoredJob(kvs[0], batch[i], w.sets)
			if err != nil {
				return nil, err
			}
			rj := readJob{rev: kvs[0].ModRevision}
			for _, u := range sj.Job.After {
				rj.after = append(rj.after, u.Job)
			}
			out[batch[i]] = rj
		}
	}
	return out, nil
}

// problem is an *Error at the put job's after: entry for upstream.
func (w *jobPut) problem(upstream, message string) error {
	field := "after"
	for k, u := range w.job.After {
		if u.Job == upstream {
			field = fmt.Sprintf("after[%d]", k)
		}
	}
	return &Error{Problems: []Problem{{File: "job " + w.name, Field: field, Message: message}}}
}

// refOps keeps the reference keys of the generation (where head.Refs says
// it has them) with the put job's after: entries.
func (w *jobPut) refOps() []clientv3.Op {
	if !w.head.Refs {
		return nil
	}
	had := map[string]bool{}
	if w.jobView.job != nil {
		for _, u := range w.jobView.job.Job.After {
			had[u.Job] = true
		}
	}
	var ops []clientv3.Op
	for _, u := range w.job.After {
		if !had[u.Job] {
			ops = append(ops, clientv3.OpPut(ref{up: u.Job, dep: w.name}.key(w.cluster, w.head.Generation), ""))
		}
		delete(had, u.Job)
	}
	for up := range had {
		ops = append(ops, clientv3.OpDelete(ref{up: up, dep: w.name}.key(w.cluster, w.head.Generation)))
	}
	return ops
}

// lostAnswer is an error of etcd on a write's transaction: it may have
// been applied.
type lostAnswer struct{ error }

func (e lostAnswer) Unwrap() error { return e.error }

func isLost(err error) bool {
	_, ok := err.(lostAnswer)
	return ok
}
