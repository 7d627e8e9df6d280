package config

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kira-scheduler/kira/internal/keyspace"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// DeleteJob deletes job name of the cluster's stored catalog as
// opt.Manager, under opt's conditions, and returns the new catalog
// revision: ErrNoJob when it is not stored, a *DependentsError while jobs
// run after it. What it reads and guards is job.go's
// (TestSingleJobWrites, TestSingleJobRulesAcrossJobs). It writes through a
// new JobWriter, which reads everything first.
func DeleteJob(ctx context.Context, kv clientv3.KV, cluster, name string, opt DeleteJobOptions) (rev int64, err error) {
	return NewJobWriter(kv, cluster).DeleteJob(ctx, name, opt)
}

// DeleteJob is DeleteJob of the writer's cluster, deciding first on what
// the writer keeps (jobwriter.go): a job it keeps is deleted in one
// request.
func (w *JobWriter) DeleteJob(ctx context.Context, name string, opt DeleteJobOptions) (int64, error) {
	if err := opt.Manager.ValidateSingle(); err != nil {
		return 0, err
	}
	v := w.kept(name)
	var lost *lostWrite
	for range jobAttempts {
		if v == nil {
			var err error
			if v, err = w.read(ctx, name); err != nil {
				return 0, err
			}
		}
		switch ok, err := lost.applied(v); {
		case err != nil:
			return 0, err
		case ok:
			return v.headRev, nil
		}
		rev, next, err := w.deleteOnce(ctx, v, opt)
		switch {
		case isLost(err):
			lost, v = &lostWrite{at: v.at, before: v.jobRev, err: err}, nil
		case err != nil && !v.fresh:
			v = nil // decided on what the writer kept: read, and decide again
		case err != nil || rev != 0:
			return rev, err
		default:
			v = next
		}
	}
	return 0, fmt.Errorf("%w (job %s)", ErrCatalogBusy, name)
}

// deleteOnce decides the delete on v and commits it: the new revision, or
// the view a failed guard answered (nil: read it again), or an error.
func (w *JobWriter) deleteOnce(ctx context.Context, v *jobView, opt DeleteJobOptions) (int64, *jobView, error) {
	if v.job == nil {
		return 0, nil, noJob(v.name, v.cluster)
	}
	if err := v.allowed(ctx, w.kv, opt.Manager, opt.IfRevision, false, opt.Force); err != nil {
		return 0, nil, err
	}
	if err := check(opt.Check, v, nil); err != nil {
		return 0, nil, err
	}
	guard, err := v.noDependents(ctx, w.kv)
	if err != nil {
		return 0, nil, err
	}
	ops := []clientv3.Op{clientv3.OpDelete(v.key())}
	if v.head.Refs {
		for _, u := range v.job.Job.After {
			ops = append(ops, clientv3.OpDelete(ref{up: u.Job, dep: v.name}.key(v.cluster, v.head.Generation)))
		}
	}
	refs := keyspace.CatalogRefs(v.cluster, v.head.Generation, v.name)
	resp, err := w.kv.Txn(ctx).If(append(v.guards(), guard)...).Then(append(ops, v.bump(opt.Manager, "deleted")...)...).
		Else(append(viewOps(v.cluster, v.head.Generation, v.name), clientv3.OpGet(refs, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(10)))...).Commit()
	switch {
	case err != nil:
		return 0, nil, lostAnswer{fmt.Errorf("config: delete job %s: %w", v.name, err)}
	case resp.Succeeded:
		w.wrote(v, nil, resp)
		return resp.Header.Revision, nil, nil
	}
	next, err := viewFrom(v.cluster, v.name, v.head.Generation, resp)
	if next != nil {
		w.learn(next)
		next.depsRead = true
		for _, kv := range resp.Responses[4].GetResponseRange().Kvs {
			next.deps = append(next.deps, strings.TrimPrefix(string(kv.Key), refs))
		}
	}
	return 0, next, err
}

// noDependents refuses the delete while a job runs after this one, and
// returns the guard that keeps it so until the commit: no reference key
// under the job (a range compare, whose failure answers the keys: v.deps),
// or, in a generation an older version stored without them (head.Refs
// false), the generation's jobs read whole and catalog-head's mod revision
// unchanged since, which takes a fresh view.
func (v *jobView) noDependents(ctx context.Context, kv clientv3.KV) (clientv3.Cmp, error) {
	if v.head.Refs {
		if len(v.deps) > 0 {
			return clientv3.Cmp{}, &DependentsError{Job: v.name, Dependents: v.deps}
		}
		return clientv3.Compare(clientv3.CreateRevision(keyspace.CatalogRefs(v.cluster, v.head.Generation, v.name)), "=", 0).WithPrefix(), nil
	}
	if !v.fresh {
		return clientv3.Cmp{}, errKept
	}
	st, err := readGeneration(ctx, kv, v.cluster, v.head.Generation, v.at)
	if err != nil {
		return clientv3.Cmp{}, err
	}
	var deps []string
	for name, j := range st.fresh {
		for _, u := range j.After {
			if u.Job == v.name {
				deps = append(deps, name)
			}
		}
	}
	if len(deps) > 0 {
		slices.Sort(deps)
		return clientv3.Cmp{}, &DependentsError{Job: v.name, Dependents: deps}
	}
	return clientv3.Compare(clientv3.ModRevision(keyspace.CatalogHead(v.cluster)), "=", v.headRev), nil
}
